//! The receipt outbox on real files: directory checks, the lock, the order of records, the
//! bound, and what survives a reopen.

use crate::harness::{mode, scratch};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use switchyard_mcp_runner::outbox::{
    CAPACITY, Capacity, EntryState, Outbox, OutboxError, StartedCall,
};
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, DeviceId};

/// Where one test's outbox goes (not created).
fn outbox_dir(test: &str) -> PathBuf {
    scratch(test).join("outbox")
}

fn succeeded(text: &str) -> Completion {
    Completion::Succeeded {
        result: json!({ "content": [{ "type": "text", "text": text }], "isError": false }),
    }
}

#[test]
fn a_missing_directory_is_created_private_with_private_files() {
    let dir = outbox_dir("created");

    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    outbox.record_start(call, Epoch(1)).expect("start ack");

    assert_eq!(mode(&dir), 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("list the outbox")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert!(
        files.iter().any(|file| file.ends_with("outbox.sqlite3")),
        "{files:?}"
    );
    for file in &files {
        assert_eq!(mode(file), 0o600, "{} is not 0600", file.display());
    }
}

#[test]
fn a_directory_others_can_read_is_refused_with_the_fix() {
    let dir = outbox_dir("too-open");
    std::fs::create_dir(&dir).expect("create");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let error = Outbox::open(&dir, DeviceId::new()).expect_err("a 0755 directory is refused");

    assert!(
        matches!(error, OutboxError::TooOpen { mode: 0o755, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("chmod 700 {}", dir.display())),
        "{message}"
    );
    // Nothing was written into the refused directory.
    assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
}

#[test]
fn a_directory_bound_to_another_device_is_refused() {
    let dir = outbox_dir("other-device");
    let first = DeviceId::new();
    drop(Outbox::open(&dir, first).expect("first open binds the directory"));

    let second = DeviceId::new();
    let error = Outbox::open(&dir, second).expect_err("another device is refused");

    match &error {
        OutboxError::OtherDevice {
            bound, requested, ..
        } => {
            assert_eq!((*bound, *requested), (first, second));
        }
        other => panic!("expected OtherDevice, got {other:?}"),
    }
    assert!(error.to_string().contains(&first.to_string()), "{error}");
    Outbox::open(&dir, first).expect("the bound device still opens it");
}

#[test]
fn a_second_open_is_refused_while_the_first_holds_the_lock() {
    let dir = outbox_dir("locked");
    let device = DeviceId::new();
    let first = Outbox::open(&dir, device).expect("first open");

    let error = Outbox::open(&dir, device).expect_err("the directory is in use");

    assert!(matches!(error, OutboxError::Locked { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("in use by another runner process"),
        "{error}"
    );
    drop(first);
    Outbox::open(&dir, device).expect("free again once the first is closed");
}

#[test]
fn start_ack_then_receipt_then_acknowledgement() {
    let dir = outbox_dir("order");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    assert_eq!(outbox.entry_state(call).expect("state"), None);

    outbox.record_start(call, Epoch(3)).expect("start ack");
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Started)
    );
    assert_eq!(
        outbox.unfinished().expect("unfinished"),
        vec![StartedCall {
            call_id: call,
            epoch: Epoch(3)
        }]
    );

    let receipt = outbox
        .record_receipt(call, Epoch(3), &succeeded("done"))
        .expect("receipt");
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Recorded)
    );
    assert!(outbox.unfinished().expect("unfinished").is_empty());
    assert_eq!(
        outbox.unacknowledged().expect("unacked"),
        vec![receipt.clone()]
    );
    // A retried report gets the same receipt back, whatever it passes.
    let again = outbox
        .record_receipt(call, Epoch(3), &succeeded("other"))
        .expect("receipt again");
    assert_eq!(again, receipt);

    outbox.acknowledge(receipt.receipt_id).expect("ack");
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Acknowledged)
    );
    assert!(outbox.unacknowledged().expect("unacked").is_empty());
    outbox
        .acknowledge(receipt.receipt_id)
        .expect("a second ack is harmless");

    // The acknowledged entry takes no room, and the next start deletes it; a call is never
    // started twice through one outbox while its entry lives.
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: CAPACITY }
    );
    assert!(matches!(
        outbox.record_start(call, Epoch(3)),
        Err(OutboxError::AlreadyRecorded {
            state: EntryState::Acknowledged,
            ..
        })
    ));
    outbox
        .record_start(CallId::new(), Epoch(3))
        .expect("the next start");
    assert_eq!(outbox.entry_state(call).expect("state"), None);
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: CAPACITY - 1 }
    );
}

#[test]
fn a_start_records_the_acknowledgements_it_carries_or_on_refusal_none_of_them() {
    let dir = outbox_dir("start-acks");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let (first, second) = (CallId::new(), CallId::new());
    let mut receipts = Vec::new();
    for call in [first, second] {
        outbox.record_start(call, Epoch(1)).expect("start");
        let receipt = outbox
            .record_receipt(call, Epoch(1), &succeeded("done"))
            .expect("receipt");
        receipts.push(receipt.receipt_id);
    }

    // A refused start records nothing, the acknowledgements it carries included.
    assert!(matches!(
        outbox.record_start_acknowledging(first, Epoch(1), &receipts),
        Err(OutboxError::AlreadyRecorded {
            state: EntryState::Recorded,
            ..
        })
    ));
    assert_eq!(outbox.unacknowledged().expect("unacknowledged").len(), 2);

    let next = CallId::new();
    outbox
        .record_start_acknowledging(next, Epoch(1), &receipts[..1])
        .expect("the next start");
    assert_eq!(outbox.entry_state(first).expect("state"), None);
    assert_eq!(
        outbox.entry_state(second).expect("state"),
        Some(EntryState::Recorded)
    );
    assert_eq!(
        outbox.entry_state(next).expect("state"),
        Some(EntryState::Started)
    );
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: CAPACITY - 2 }
    );
}

#[test]
fn a_call_is_started_at_most_once() {
    let dir = outbox_dir("once");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    outbox.record_start(call, Epoch(1)).expect("start ack");

    let error = outbox
        .record_start(call, Epoch(2))
        .expect_err("a second start is refused");

    assert!(
        matches!(
            error,
            OutboxError::AlreadyRecorded { call_id, state: EntryState::Started } if call_id == call
        ),
        "{error:?}"
    );
}

#[test]
fn a_withdrawn_start_frees_its_entry_and_a_recorded_receipt_is_never_withdrawn() {
    let dir = outbox_dir("withdraw");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    outbox.record_start(call, Epoch(1)).expect("start");

    outbox.withdraw_start(call, Epoch(1)).expect("withdraw");

    assert_eq!(outbox.entry_state(call).expect("state"), None);
    assert!(outbox.unfinished().expect("unfinished").is_empty());
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: CAPACITY }
    );
    // Started again, and this time it ran: its receipt stays whatever is withdrawn.
    outbox.record_start(call, Epoch(1)).expect("started again");
    let completion = Completion::Succeeded {
        result: json!({ "content": [], "isError": false }),
    };
    let receipt = outbox
        .record_receipt(call, Epoch(1), &completion)
        .expect("receipt");
    outbox.withdraw_start(call, Epoch(1)).expect("withdraw");
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Recorded)
    );
    assert_eq!(
        outbox.unacknowledged().expect("unacknowledged"),
        vec![receipt]
    );
}

#[test]
fn a_failure_before_start_gets_a_receipt_without_a_start_ack() {
    let dir = outbox_dir("failed-before-start");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    let failed = Completion::Failed {
        error: CallError {
            code: "credential_missing".into(),
            message: "API_TOKEN is not bound".into(),
        },
    };

    let receipt = outbox
        .record_receipt(call, Epoch(7), &failed)
        .expect("receipt");

    assert_eq!(receipt.epoch, Epoch(7));
    assert_eq!(receipt.completion, failed);
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Recorded)
    );
    assert!(outbox.unfinished().expect("unfinished").is_empty());
}

#[test]
fn sixty_four_live_receipts_pause_starts_and_none_is_dropped() {
    let dir = outbox_dir("bound");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let calls: Vec<CallId> = (0..CAPACITY).map(|_| CallId::new()).collect();
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(
            outbox.capacity().expect("capacity"),
            Capacity::Open { free: CAPACITY - i }
        );
        outbox.record_start(*call, Epoch(1)).expect("start ack");
    }

    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Full { live: CAPACITY }
    );
    let error = outbox
        .record_start(CallId::new(), Epoch(1))
        .expect_err("a 65th start is refused");
    assert!(
        matches!(error, OutboxError::Full { live: CAPACITY }),
        "{error:?}"
    );

    // Every started call can still record its receipt; a failure before start too.
    let mut receipts = Vec::new();
    for call in &calls {
        receipts.push(
            outbox
                .record_receipt(*call, Epoch(1), &succeeded("ok"))
                .expect("receipt while full"),
        );
    }
    let extra = outbox
        .record_receipt(
            CallId::new(),
            Epoch(1),
            &Completion::Failed {
                error: CallError {
                    code: "spawn_failed".into(),
                    message: "no such file".into(),
                },
            },
        )
        .expect("a receipt is never refused");
    receipts.push(extra);
    assert_eq!(outbox.unacknowledged().expect("unacked"), receipts);
    assert!(matches!(
        outbox.capacity().expect("capacity"),
        Capacity::Full { .. }
    ));

    // Admission reopens as receipts are acknowledged.
    outbox.acknowledge(receipts[0].receipt_id).expect("ack");
    outbox.acknowledge(receipts[1].receipt_id).expect("ack");
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: 1 }
    );
    assert_eq!(
        outbox.unacknowledged().expect("unacked").len(),
        CAPACITY - 1
    );
}

#[test]
fn a_quarantined_receipt_is_kept_but_never_offered_for_upload() {
    let dir = outbox_dir("quarantine");
    let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
    let call = CallId::new();
    outbox.record_start(call, Epoch(1)).expect("start");
    let receipt = outbox
        .record_receipt(call, Epoch(1), &succeeded("late"))
        .expect("receipt");

    outbox.quarantine(receipt.receipt_id).expect("quarantine");

    assert!(outbox.unacknowledged().expect("unacked").is_empty());
    assert_eq!(
        outbox.entry_state(call).expect("state"),
        Some(EntryState::Quarantined)
    );
    // Still counted until it expires after an hour.
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Open { free: CAPACITY - 1 }
    );
    let error = outbox
        .acknowledge(receipt.receipt_id)
        .expect_err("a quarantined receipt is never acknowledged");
    assert!(matches!(error, OutboxError::NoSuchReceipt(_)), "{error:?}");
}

#[test]
fn reopening_keeps_the_holder_unfinished_calls_and_unacknowledged_receipts() {
    let dir = outbox_dir("reopen");
    let device = DeviceId::new();
    let (holder, receipt, running) = {
        let outbox = Outbox::open(&dir, device).expect("open");
        let done = CallId::new();
        outbox.record_start(done, Epoch(4)).expect("start");
        let receipt = outbox
            .record_receipt(done, Epoch(4), &succeeded("kept"))
            .expect("receipt");
        let running = CallId::new();
        outbox.record_start(running, Epoch(4)).expect("start");
        (outbox.holder(), receipt, running)
    };

    let outbox = Outbox::open(&dir, device).expect("reopen");

    assert_eq!(outbox.holder(), holder);
    assert_eq!(outbox.unacknowledged().expect("unacked"), vec![receipt]);
    assert_eq!(
        outbox.unfinished().expect("unfinished"),
        vec![StartedCall {
            call_id: running,
            epoch: Epoch(4)
        }]
    );
    let other = outbox_dir("reopen-other");
    assert_ne!(
        Outbox::open(&other, device)
            .expect("another directory")
            .holder(),
        holder,
        "each directory has its own holder"
    );
}
