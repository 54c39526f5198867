//! The pool's bookkeeping, with a stand-in session.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use switchyard_protocol::{DeviceId, UserId};

/// A stand-in session that can be made to look dead.
#[derive(Default)]
struct FakeSession {
    closed: AtomicBool,
}

impl PooledSession for FakeSession {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

type Pool = SessionPool<FakeSession, &'static str>;

/// A key on a connection of its own, for one user under one profile.
fn key(client_session_id: Option<&str>) -> SessionKey {
    SessionKey {
        connection_id: ConnectionId::new(),
        profile_id: ProfileId::new(),
        submitter: Submitter::User(UserId::new()),
        client_session_id: client_session_id.map(str::to_owned),
    }
}

/// The release a user sends for `key`: their own sessions with its client session id.
fn release_of(key: &SessionKey) -> ReleaseKey {
    ReleaseKey {
        connection_id: key.connection_id,
        client_session_id: key.client_session_id.clone(),
        submitter: Some(key.submitter),
    }
}

fn launch(env_value: &str) -> SessionLaunch {
    SessionLaunch {
        spec: ConnectorSpec::Stdio {
            command: "server".to_owned(),
            args: Vec::new(),
            env: vec!["TOKEN".to_owned()],
        },
        env: vec![("TOKEN".to_owned(), env_value.to_owned())],
        headers: Vec::new(),
    }
}

/// Opens a session for `key` with one waiting call; returns its slot.
fn open(pool: &mut Pool, key: &SessionKey, fingerprint: Fingerprint) -> SessionSlot {
    assert!(matches!(pool.checkout(key, fingerprint), Checkout::Absent));
    let slot = pool.start_opening(
        key.clone(),
        fingerprint,
        Arc::default(),
        CallId::new(),
        "first",
    );
    let opened = pool
        .opened(slot, FakeSession::default(), Instant::now())
        .expect("a starting entry opens");
    assert_eq!(opened.waiters.len(), 1);
    slot
}

fn closing_reasons(pool: &mut Pool) -> Vec<(SessionSlot, &'static str)> {
    pool.take_closable()
        .into_iter()
        .map(|close| (close.slot, close.reason.as_str()))
        .collect()
}

#[test]
fn equal_launches_share_a_fingerprint_and_other_values_do_not() {
    let pool = Pool::new();
    assert_eq!(
        pool.fingerprint(&launch("a-1")),
        pool.fingerprint(&launch("a-1"))
    );
    assert_ne!(
        pool.fingerprint(&launch("a-1")),
        pool.fingerprint(&launch("a-2"))
    );
    assert_eq!(
        format!("{:?}", pool.fingerprint(&launch("a-1"))),
        "Fingerprint(..)"
    );
}

#[test]
fn calls_with_the_same_key_share_one_session_and_other_keys_do_not() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let shared = key(Some("s1"));
    let slot = open(&mut pool, &shared, fingerprint);

    let Checkout::Ready { slot: again, .. } = pool.checkout(&shared, fingerprint) else {
        panic!("the open session is reused");
    };
    assert_eq!(again, slot);
    let other = SessionKey {
        client_session_id: Some("s2".to_owned()),
        ..shared.clone()
    };
    assert!(matches!(
        pool.checkout(&other, fingerprint),
        Checkout::Absent
    ));
    let default = SessionKey {
        client_session_id: None,
        ..shared
    };
    assert!(matches!(
        pool.checkout(&default, fingerprint),
        Checkout::Absent
    ));
}

#[test]
fn calls_arriving_while_a_session_opens_wait_for_it() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let shared = key(None);
    let slot = pool.start_opening(
        shared.clone(),
        fingerprint,
        Arc::default(),
        CallId::new(),
        "first",
    );
    let Checkout::Opening(waiting) = pool.checkout(&shared, fingerprint) else {
        panic!("the second call waits");
    };
    let second = CallId::new();
    assert!(pool.wait(waiting, second, "second").is_ok());
    let third = CallId::new();
    assert!(pool.wait(waiting, third, "third").is_ok());
    assert_eq!(pool.remove_waiter(slot, third), Some("third"));

    let opened = pool
        .opened(slot, FakeSession::default(), Instant::now())
        .expect("opened");

    let served: Vec<&str> = opened.waiters.iter().map(|(_, waiter)| *waiter).collect();
    assert_eq!(served, ["first", "second"]);
    assert_eq!(pool.state(slot), Some(SessionState::Ready));
}

#[test]
fn a_release_drains_until_the_active_calls_finish() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let released = key(Some("r"));
    let slot = open(&mut pool, &released, fingerprint);

    assert_eq!(pool.release(&release_of(&released)), 1);
    assert_eq!(pool.state(slot), Some(SessionState::Draining));
    assert!(pool.take_closable().is_empty(), "one call is still active");
    assert!(
        matches!(pool.checkout(&released, fingerprint), Checkout::Absent),
        "a draining session takes no new calls"
    );

    pool.checkin(slot, Verdict::Keep, Instant::now());

    assert_eq!(closing_reasons(&mut pool), [(slot, "released")]);
    assert_eq!(pool.state(slot), Some(SessionState::Closing));
    pool.closed(slot);
    assert!(pool.is_empty());
}

#[test]
fn a_new_fingerprint_drains_the_submitters_older_sessions_of_the_connection() {
    let mut pool = Pool::new();
    let old = pool.fingerprint(&launch("old-token"));
    let new = pool.fingerprint(&launch("new-token"));
    let first = key(Some("a"));
    let other_session = SessionKey {
        client_session_id: Some("b".to_owned()),
        ..first.clone()
    };
    let unrelated = key(Some("a"));
    // Another person on the same connection, whose launch rightly differs (their own grant).
    let other_person = SessionKey {
        submitter: Submitter::User(UserId::new()),
        ..first.clone()
    };
    let slot_a = open(&mut pool, &first, old);
    let slot_b = open(&mut pool, &other_session, old);
    let slot_unrelated = open(&mut pool, &unrelated, old);
    let slot_other_person = open(&mut pool, &other_person, old);
    pool.checkin(slot_b, Verdict::Keep, Instant::now());
    pool.checkin(slot_unrelated, Verdict::Keep, Instant::now());
    pool.checkin(slot_other_person, Verdict::Keep, Instant::now());

    pool.supersede(&first, new);

    assert_eq!(closing_reasons(&mut pool), [(slot_b, "credential_changed")]);
    assert_eq!(pool.state(slot_a), Some(SessionState::Draining));
    assert_eq!(pool.state(slot_unrelated), Some(SessionState::Ready));
    assert_eq!(pool.state(slot_other_person), Some(SessionState::Ready));
    assert!(matches!(pool.checkout(&first, new), Checkout::Absent));
}

#[test]
fn a_drain_while_starting_applies_once_opened() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let released = key(None);
    let slot = pool.start_opening(
        released.clone(),
        fingerprint,
        Arc::default(),
        CallId::new(),
        "first",
    );
    assert_eq!(pool.release(&release_of(&released)), 1);

    let opened = pool
        .opened(slot, FakeSession::default(), Instant::now())
        .expect("opened");

    assert_eq!(opened.waiters.len(), 1, "the waiting call is still served");
    assert_eq!(pool.state(slot), Some(SessionState::Draining));
    pool.checkin(slot, Verdict::Keep, Instant::now());
    assert_eq!(closing_reasons(&mut pool), [(slot, "released")]);
}

#[test]
fn idle_sessions_close_after_the_timeout() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let idle = key(None);
    let slot = open(&mut pool, &idle, fingerprint);
    assert_eq!(
        pool.next_idle_deadline(Duration::from_secs(60)),
        None,
        "a session with an active call is not idle"
    );
    let finished = Instant::now();
    pool.checkin(slot, Verdict::Keep, finished);
    let timeout = Duration::from_secs(60);
    assert_eq!(pool.next_idle_deadline(timeout), Some(finished + timeout));

    pool.close_idle(finished + timeout - Duration::from_millis(1), timeout);
    assert!(pool.take_closable().is_empty());
    pool.close_idle(finished + timeout, timeout);
    assert_eq!(closing_reasons(&mut pool), [(slot, "idle")]);
    assert_eq!(pool.next_idle_deadline(timeout), None);
}

#[test]
fn an_evicting_verdict_closes_the_session_after_its_other_calls() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let shared = key(None);
    let slot = open(&mut pool, &shared, fingerprint);
    assert!(matches!(
        pool.checkout(&shared, fingerprint),
        Checkout::Ready { .. }
    ));

    pool.checkin(slot, Verdict::Evict(CloseReason::Timeout), Instant::now());
    assert!(pool.take_closable().is_empty(), "another call is active");
    assert!(matches!(
        pool.checkout(&shared, fingerprint),
        Checkout::Absent
    ));
    pool.checkin(slot, Verdict::Keep, Instant::now());

    assert_eq!(closing_reasons(&mut pool), [(slot, "timeout")]);
}

#[test]
fn a_dead_ready_session_is_evicted_instead_of_handed_out() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let shared = key(None);
    let slot = open(&mut pool, &shared, fingerprint);
    pool.checkin(slot, Verdict::Keep, Instant::now());
    let Checkout::Ready { session, .. } = pool.checkout(&shared, fingerprint) else {
        panic!("ready");
    };
    pool.checkin(slot, Verdict::Keep, Instant::now());
    session.closed.store(true, Ordering::SeqCst);
    drop(session);

    assert!(matches!(
        pool.checkout(&shared, fingerprint),
        Checkout::Absent
    ));
    assert_eq!(closing_reasons(&mut pool), [(slot, "transport_closed")]);
}

#[test]
fn a_failed_open_returns_its_waiters() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let slot = pool.start_opening(
        key(None),
        fingerprint,
        Arc::default(),
        CallId::new(),
        "first",
    );

    let (waiters, _) = pool.open_failed(slot).expect("a starting entry");

    assert_eq!(waiters.len(), 1);
    assert!(pool.is_empty());
}

#[test]
fn shutdown_drains_everything() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let busy = open(&mut pool, &key(None), fingerprint);
    let idle = open(&mut pool, &key(None), fingerprint);
    pool.checkin(idle, Verdict::Keep, Instant::now());

    pool.drain_all(CloseReason::Shutdown);

    assert_eq!(closing_reasons(&mut pool), [(idle, "shutdown")]);
    pool.checkin(busy, Verdict::Keep, Instant::now());
    assert_eq!(closing_reasons(&mut pool), [(busy, "shutdown")]);
}

#[test]
fn two_submitters_with_one_client_session_id_never_share_a_session() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let alice = key(Some("s1"));
    let bob = SessionKey {
        submitter: Submitter::User(UserId::new()),
        ..alice.clone()
    };
    let device = SessionKey {
        submitter: Submitter::Device(DeviceId::new()),
        ..alice.clone()
    };
    let alice_elsewhere = SessionKey {
        profile_id: ProfileId::new(),
        ..alice.clone()
    };
    let slot = open(&mut pool, &alice, fingerprint);

    for other in [&bob, &device, &alice_elsewhere] {
        assert!(
            matches!(pool.checkout(other, fingerprint), Checkout::Absent),
            "{other:?} must not get alice's session"
        );
    }
    let Checkout::Ready { slot: again, .. } = pool.checkout(&alice, fingerprint) else {
        panic!("alice's own calls share her session");
    };
    assert_eq!(again, slot);
}

#[test]
fn a_release_drains_only_its_submitters_sessions_under_every_profile() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let alice = key(Some("s1"));
    let alice_elsewhere = SessionKey {
        profile_id: ProfileId::new(),
        ..alice.clone()
    };
    let bob = SessionKey {
        submitter: Submitter::User(UserId::new()),
        ..alice.clone()
    };
    let slots = [&alice, &alice_elsewhere, &bob].map(|key| {
        let slot = open(&mut pool, key, fingerprint);
        pool.checkin(slot, Verdict::Keep, Instant::now());
        slot
    });

    assert_eq!(pool.release(&release_of(&alice)), 2);

    assert_eq!(
        closing_reasons(&mut pool),
        [(slots[0], "released"), (slots[1], "released")]
    );
    assert_eq!(pool.state(slots[2]), Some(SessionState::Ready));
    let everyone = ReleaseKey {
        submitter: None,
        ..release_of(&alice)
    };
    assert_eq!(pool.release(&everyone), 1, "bob's is left");
}

/// Caps of `n` in every scope.
fn caps(global: usize, per_connection: usize, per_submitter: usize) -> SessionCaps {
    SessionCaps {
        global,
        per_connection,
        per_submitter,
    }
}

/// `key` with another client session id.
fn named(key: &SessionKey, client_session_id: &str) -> SessionKey {
    SessionKey {
        client_session_id: Some(client_session_id.to_owned()),
        ..key.clone()
    }
}

#[test]
fn a_full_cap_drains_the_least_recently_used_idle_session_of_its_scope() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let alice = key(Some("a"));
    let start = Instant::now();
    // Three idle sessions of alice's, used last in the order b, a, c.
    let slots: Vec<SessionSlot> = ["a", "b", "c"]
        .iter()
        .map(|name| open(&mut pool, &named(&alice, name), fingerprint))
        .collect();
    pool.checkin(slots[1], Verdict::Keep, start + Duration::from_secs(10));
    pool.checkin(slots[0], Verdict::Keep, start + Duration::from_secs(11));
    pool.checkin(slots[2], Verdict::Keep, start + Duration::from_secs(12));
    // Another user's older idle session is outside alice's per-submitter scope.
    let bob = SessionKey {
        submitter: Submitter::User(UserId::new()),
        ..alice.clone()
    };
    let bobs = open(&mut pool, &bob, fingerprint);
    pool.checkin(bobs, Verdict::Keep, start);

    assert!(pool.make_room(&named(&alice, "d"), caps(10, 10, 3)));

    assert_eq!(closing_reasons(&mut pool), [(slots[1], "capacity")]);
    assert!(
        pool.make_room(&named(&alice, "d"), caps(10, 10, 3)),
        "room now"
    );
    assert!(pool.take_closable().is_empty());

    // The global cap reaches every submitter: bob's, the least recently used, goes first.
    assert!(pool.make_room(&named(&alice, "d"), caps(3, 10, 3)));
    assert_eq!(closing_reasons(&mut pool), [(bobs, "capacity")]);
}

#[test]
fn a_busy_session_is_never_drained_for_a_cap_and_the_new_one_closes_after_use() {
    let mut pool = Pool::new();
    let fingerprint = pool.fingerprint(&launch("v"));
    let busy_key = key(Some("busy"));
    let busy = open(&mut pool, &busy_key, fingerprint);
    let full = caps(1, 1, 1);
    let next = named(&busy_key, "next");

    assert!(!pool.make_room(&next, full), "the only session is busy");
    assert_eq!(pool.state(busy), Some(SessionState::Ready));
    let one_off = pool.start_opening(
        next.clone(),
        fingerprint,
        Arc::default(),
        CallId::new(),
        "x",
    );
    pool.close_after_use(one_off);
    let Checkout::Opening(waiting) = pool.checkout(&next, fingerprint) else {
        panic!("a call with the same key waits for the session being opened");
    };
    assert!(pool.wait(waiting, CallId::new(), "y").is_ok());
    let opened = pool
        .opened(one_off, FakeSession::default(), Instant::now())
        .expect("opened");
    assert_eq!(opened.waiters.len(), 2, "both calls are served");
    pool.checkin(one_off, Verdict::Keep, Instant::now());
    assert!(pool.take_closable().is_empty());
    pool.checkin(one_off, Verdict::Keep, Instant::now());
    assert_eq!(closing_reasons(&mut pool), [(one_off, "capacity")]);

    // Once idle, the busy session is the one to go.
    pool.checkin(busy, Verdict::Keep, Instant::now());
    assert!(pool.make_room(&next, full));
    assert_eq!(closing_reasons(&mut pool), [(busy, "capacity")]);
}
