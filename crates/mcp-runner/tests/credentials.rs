//! Credential references, end to end: real bindings and secrets files in a temp directory, the
//! real process environment and the real Linux kernel keyring.

use keyring_core::{CredentialStore, Entry};
use linux_keyutils::{KeyRing, KeyRingIdentifier};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use switchyard_mcp_runner::SessionLaunch;
use switchyard_mcp_runner::credentials::{
    CredentialError, CredentialResolver, Destination, KEYRING_SERVICE, NoKeyring, OsKeyring, codes,
    validate_file,
};
use switchyard_protocol::api::{CallError, ConnectorSpec};
use switchyard_protocol::ids::{CallId, ConnectionId, RequestId};
use switchyard_protocol::runner::{ConnectionTarget, Epoch, LeasedCall};
use switchyard_testkit::child_env::in_child_with_env;
use switchyard_testkit::scratch::Scratch;
use uuid::Uuid;

/// A value no message may ever contain.
const CANARY: &str = "canary-5f3a9c-do-not-print";

/// A private directory under the temp dir, removed when dropped.
struct TempDir(Scratch);

impl TempDir {
    fn new() -> Self {
        Self(Scratch::new("credentials").expect("create temp dir"))
    }

    /// Writes `bindings` as `dev.mcp-bindings.json` with `mode`, and returns its path.
    #[track_caller]
    fn bindings(&self, bindings: &Value, mode: u32) -> PathBuf {
        let path = self.0.join("dev.mcp-bindings.json");
        write(&path, &bindings.to_string(), mode);
        path
    }

    /// Writes `secrets` as the sibling `dev.mcp-secrets.json` with `mode`.
    #[track_caller]
    fn secrets(&self, secrets: &str, mode: u32) -> PathBuf {
        let path = self.0.join("dev.mcp-secrets.json");
        write(&path, secrets, mode);
        path
    }
}

#[track_caller]
fn write(path: &Path, contents: &str, mode: u32) {
    fs::write(path, contents).expect("write file");
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A keyring entry set for one test and deleted when dropped.
struct KeyringEntry {
    account: String,
    entry: Entry,
}

impl KeyringEntry {
    /// Sets `value` under a fresh account of service `switchyard-mcp`, as an operator would from
    /// another process: through keyring-core on the user's keyrings.
    #[track_caller]
    fn set(value: &str) -> Self {
        // This thread needs a session keyring of its own, as any process setting entries does.
        KeyRing::from_special_id(KeyRingIdentifier::Session, true).expect("join a session keyring");
        let store: Arc<CredentialStore> =
            linux_keyutils_keyring_store::Store::new().expect("keyutils store");
        let account = format!("test-{}", Uuid::new_v4());
        let entry = Entry::new_in_store(&store, KEYRING_SERVICE, &account).expect("entry");
        entry.set_password(value).expect("set keyring entry");
        Self { account, entry }
    }
}

impl Drop for KeyringEntry {
    fn drop(&mut self) {
        let _ = self.entry.delete_credential();
    }
}

fn call(connection: ConnectionId, spec: ConnectorSpec) -> LeasedCall {
    LeasedCall {
        traceparent: None,
        call_id: CallId::new(),
        request_id: RequestId::new(),
        epoch: Epoch(1),
        connection: ConnectionTarget {
            connection_id: connection,
            revision: 1,
            spec,
            accepted_spec_digest: None,
            auth_kind: None,
        },
        tool_name: "echo".to_owned(),
        arguments: json!({}),
        timeout_seconds: 30,
        client_session_id: None,
        profile_id: switchyard_protocol::ProfileId::new(),
        submitter: switchyard_protocol::runner::Submitter::User(switchyard_protocol::UserId::new()),
        kind: Default::default(),
    }
}

fn stdio(env: &[&str]) -> ConnectorSpec {
    ConnectorSpec::Stdio {
        command: "mcp-server".to_owned(),
        args: Vec::new(),
        env: env.iter().map(|name| (*name).to_owned()).collect(),
    }
}

fn http() -> ConnectorSpec {
    ConnectorSpec::Http {
        url: "https://mcp.example/mcp".to_owned(),
    }
}

fn resolver(bindings: &Path) -> CredentialResolver {
    CredentialResolver::new(Some(bindings.to_owned()), Arc::new(NoKeyring))
}

/// `{"bindings": {connection: {"env": env, "headers": headers}}}`.
fn bindings_of(connection: ConnectionId, env: Value, headers: Value) -> Value {
    json!({ "bindings": { connection.to_string(): { "env": env, "headers": headers } } })
}

/// The launch, or a panic naming the error.
#[track_caller]
fn launched(result: Result<SessionLaunch, CallError>) -> SessionLaunch {
    match result {
        Ok(launch) => launch,
        Err(error) => panic!("expected a launch, got {}: {}", error.code, error.message),
    }
}

/// The error, checked to carry `code` and never the canary.
#[track_caller]
fn refused(result: Result<SessionLaunch, CallError>, code: &str) -> CallError {
    let error = match result {
        Ok(launch) => panic!("expected {code}, got a launch {launch:?}"),
        Err(error) => error,
    };
    assert_eq!(error.code, code, "message: {}", error.message);
    assert_no_canary(&error.message);
    assert_no_canary(&format!("{error:?}"));
    error
}

#[track_caller]
fn assert_no_canary(text: &str) {
    assert!(
        !text.contains(CANARY),
        "the secret value leaked into: {text}"
    );
    assert!(
        !text.contains("5f3a9c"),
        "part of the secret value leaked into: {text}"
    );
}

#[test]
fn an_environment_reference_resolves_into_the_declared_variable() {
    let Some([variable]) = in_child_with_env(
        "an_environment_reference_resolves_into_the_declared_variable",
        [CANARY],
    ) else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "environment", "name": variable } }),
            json!({}),
        ),
        0o600,
    );

    let launch = launched(resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))));

    assert_eq!(
        launch.env,
        vec![("API_TOKEN".to_owned(), CANARY.to_owned())]
    );
    assert!(launch.headers.is_empty());
    assert_eq!(launch.spec, stdio(&["API_TOKEN"]));
    assert_no_canary(&format!("{launch:?}"));
}

#[test]
fn an_os_store_reference_resolves_from_the_kernel_keyring_with_its_prefix() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let entry = KeyringEntry::set(CANARY);
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": {
                "provider": "os_store", "account": entry.account, "prefix": "Bearer " } }),
        ),
        0o600,
    );
    let keyring = OsKeyring::new().expect("the kernel keyring is usable");
    let resolver = CredentialResolver::new(Some(path), Arc::new(keyring));

    let launch = launched(resolver.launch_for(&call(connection, http())));

    assert_eq!(
        launch.headers,
        vec![("Authorization".to_owned(), format!("Bearer {CANARY}"))]
    );
    assert!(launch.env.is_empty());
}

#[test]
fn a_keyring_entry_that_does_not_exist_is_missing() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let account = format!("never-set-{}", Uuid::new_v4());
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "os_store", "account": account } }),
            json!({}),
        ),
        0o600,
    );
    let keyring = OsKeyring::new().expect("the kernel keyring is usable");
    let resolver = CredentialResolver::new(Some(path), Arc::new(keyring));

    let error = refused(
        resolver.launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::MISSING,
    );

    assert!(
        error.message.contains(&connection.to_string()),
        "{}",
        error.message
    );
    assert!(error.message.contains("API_TOKEN"), "{}", error.message);
    assert!(error.message.contains(&account), "{}", error.message);
}

#[test]
fn without_an_os_keyring_a_keyring_reference_is_unavailable() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "os_store", "account": "github" } }),
            json!({}),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::UNAVAILABLE,
    );

    assert!(
        error.message.contains("no OS keyring is configured"),
        "{}",
        error.message
    );
}

#[test]
fn a_private_secrets_file_resolves() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    dir.secrets(&json!({ "github": CANARY }).to_string(), 0o600);
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "X-Api-Key": { "provider": "secrets_file", "key": "github" } }),
        ),
        0o600,
    );

    let launch = launched(resolver(&path).launch_for(&call(connection, http())));

    assert_eq!(
        launch.headers,
        vec![("X-Api-Key".to_owned(), CANARY.to_owned())]
    );
}

#[test]
fn a_secrets_file_readable_by_others_fails_closed() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let secrets = dir.secrets(&json!({ "github": CANARY }).to_string(), 0o644);
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "X-Api-Key": { "provider": "secrets_file", "key": "github" } }),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );
    assert!(error.message.contains("0644"), "{}", error.message);
    assert!(
        error.message.contains(&secrets.display().to_string()),
        "{}",
        error.message
    );

    // The startup check refuses it as well.
    let startup = validate_file(&path).expect_err("loose secrets file");
    assert!(
        matches!(startup, CredentialError::SecretsUnsafe { .. }),
        "{startup:?}"
    );
    assert_no_canary(&format!("{startup} {startup:?}"));
}

#[test]
fn a_secrets_file_that_is_a_symbolic_link_fails_closed() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let target = dir.0.join("elsewhere.json");
    write(&target, &json!({ "github": CANARY }).to_string(), 0o600);
    std::os::unix::fs::symlink(&target, dir.0.join("dev.mcp-secrets.json")).expect("symlink");
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "X-Api-Key": { "provider": "secrets_file", "key": "github" } }),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );

    assert!(error.message.contains("symbolic link"), "{}", error.message);
}

#[test]
fn a_bindings_file_behind_a_symbolic_link_or_of_another_user_fails_closed() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let real = dir.0.join("real.json");
    let bindings = bindings_of(
        connection,
        json!({}),
        json!({ "X-Api-Key": { "provider": "environment", "name": "API_KEY" } }),
    );
    write(&real, &bindings.to_string(), 0o600);
    let link = dir.0.join("dev.mcp-bindings.json");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");

    let error = refused(
        resolver(&link).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );
    assert!(error.message.contains("symbolic link"), "{}", error.message);
    assert!(
        matches!(
            validate_file(&link),
            Err(CredentialError::BindingsSymlink { .. })
        ),
        "the startup check refuses it as well"
    );

    // Owned by another user (only root may give a file away: elsewhere this part is moot).
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    fs::remove_file(&link).expect("remove the link");
    let path = dir.bindings(&bindings, 0o600);
    nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );
    assert!(
        error.message.contains("owned by uid 65534"),
        "{}",
        error.message
    );
    assert!(
        matches!(
            validate_file(&path),
            Err(CredentialError::BindingsForeign { .. })
        ),
        "the startup check refuses it as well"
    );
}

#[test]
fn header_credentials_are_never_sent_in_clear_to_another_machine() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "X-Api-Key": { "provider": "environment", "name": "PATH" } }),
        ),
        0o600,
    );
    let at = |url: &str| ConnectorSpec::Http {
        url: url.to_owned(),
    };
    for url in ["http://mcp.example/mcp", "http://10.0.0.7:8080/mcp"] {
        let error = refused(
            resolver(&path).launch_for(&call(connection, at(url))),
            codes::CONFIG_INVALID,
        );
        assert!(error.message.contains("https://"), "{}", error.message);
    }
    for url in [
        "https://mcp.example/mcp",
        "http://127.0.0.1:8080/mcp",
        "http://localhost/mcp",
        "http://[::1]:9/mcp",
    ] {
        let launch = resolver(&path)
            .launch_for(&call(connection, at(url)))
            .unwrap_or_else(|e| panic!("{url}: {e:?}"));
        assert_eq!(launch.headers.len(), 1, "{url}");
    }
}

#[test]
fn a_bindings_file_writable_by_group_or_others_fails_closed() {
    let Some([variable]) = in_child_with_env(
        "a_bindings_file_writable_by_group_or_others_fails_closed",
        [CANARY],
    ) else {
        return;
    };
    for mode in [0o620, 0o602, 0o666] {
        let dir = TempDir::new();
        let connection = ConnectionId::new();
        let path = dir.bindings(
            &bindings_of(
                connection,
                json!({ "API_TOKEN": { "provider": "environment", "name": &variable } }),
                json!({}),
            ),
            mode,
        );

        let error = refused(
            resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
            codes::CONFIG_INVALID,
        );

        assert!(
            error.message.contains("writable by group or others"),
            "{}",
            error.message
        );
        assert!(
            matches!(
                validate_file(&path),
                Err(CredentialError::BindingsWritable { .. })
            ),
            "mode {mode:o}"
        );
    }
}

#[test]
fn reserved_environment_destinations_are_refused() {
    let Some([value]) =
        in_child_with_env("reserved_environment_destinations_are_refused", [CANARY])
    else {
        return;
    };
    for name in [
        "PATH",
        "HOME",
        "LD_PRELOAD",
        "DYLD_INSERT_LIBRARIES",
        "http_proxy",
        "ALL_PROXY",
        "DATABASE_URL",
        "SWITCHYARD_TOKEN",
    ] {
        let dir = TempDir::new();
        let connection = ConnectionId::new();
        let path = dir.bindings(
            &bindings_of(
                connection,
                json!({ name: { "provider": "environment", "name": value } }),
                json!({}),
            ),
            0o600,
        );

        let error = refused(
            resolver(&path).launch_for(&call(connection, stdio(&[name]))),
            codes::RESERVED,
        );

        assert!(error.message.contains(name), "{}", error.message);
        let startup = validate_file(&path).expect_err("reserved destination");
        assert_eq!(startup.code(), codes::RESERVED);
    }
}

#[test]
fn reserved_headers_are_refused_in_any_case() {
    let Some([value]) = in_child_with_env("reserved_headers_are_refused_in_any_case", [CANARY])
    else {
        return;
    };
    for name in [
        "Host",
        "content-type",
        "CONTENT-LENGTH",
        "Transfer-Encoding",
        "Connection",
        "accept",
        "mcp-session-id",
        "Mcp-Protocol-Version",
        "last-event-id",
    ] {
        let dir = TempDir::new();
        let connection = ConnectionId::new();
        let path = dir.bindings(
            &bindings_of(
                connection,
                json!({}),
                json!({ name: { "provider": "environment", "name": value } }),
            ),
            0o600,
        );

        let error = refused(
            resolver(&path).launch_for(&call(connection, http())),
            codes::RESERVED,
        );

        assert!(error.message.contains(name), "{}", error.message);
    }
}

#[test]
fn the_runners_own_configuration_is_not_a_source() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "environment", "name": "DATABASE_URL" } }),
            json!({}),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::RESERVED,
    );

    assert!(error.message.contains("DATABASE_URL"), "{}", error.message);
}

#[test]
fn a_variable_the_connector_does_not_declare_cannot_be_bound() {
    let Some([value]) = in_child_with_env(
        "a_variable_the_connector_does_not_declare_cannot_be_bound",
        [CANARY],
    ) else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({
                "API_TOKEN": { "provider": "environment", "name": value },
                "EXTRA_TOKEN": { "provider": "environment", "name": value },
            }),
            json!({}),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::CONFIG_INVALID,
    );

    assert!(error.message.contains("EXTRA_TOKEN"), "{}", error.message);
    assert!(
        error.message.contains("does not declare"),
        "{}",
        error.message
    );
}

#[test]
fn destinations_of_the_other_transport_are_refused() {
    let Some([value]) =
        in_child_with_env("destinations_of_the_other_transport_are_refused", [CANARY])
    else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "environment", "name": value } }),
            json!({ "Authorization": { "provider": "environment", "name": value } }),
        ),
        0o600,
    );
    let resolver = resolver(&path);

    let on_http = refused(
        resolver.launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );
    let on_stdio = refused(
        resolver.launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::CONFIG_INVALID,
    );

    assert!(on_http.message.contains("API_TOKEN"), "{}", on_http.message);
    assert!(
        on_stdio.message.contains("Authorization"),
        "{}",
        on_stdio.message
    );
}

#[test]
fn every_declared_variable_must_be_bound() {
    let Some([value]) = in_child_with_env("every_declared_variable_must_be_bound", [CANARY]) else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "environment", "name": value } }),
            json!({}),
        ),
        0o600,
    );
    let spec = stdio(&["API_TOKEN", "OTHER_TOKEN"]);

    let partly = refused(
        resolver(&path).launch_for(&call(connection, spec.clone())),
        codes::MISSING,
    );
    assert!(partly.message.contains("OTHER_TOKEN"), "{}", partly.message);

    let another = ConnectionId::new();
    let unbound = refused(
        resolver(&path).launch_for(&call(another, spec.clone())),
        codes::MISSING,
    );
    assert!(
        unbound.message.contains(&another.to_string()),
        "{}",
        unbound.message
    );

    let no_file = CredentialResolver::new(None, Arc::new(NoKeyring));
    let nothing = refused(no_file.launch_for(&call(connection, spec)), codes::MISSING);
    assert!(
        nothing.message.contains("no credential bindings file"),
        "{}",
        nothing.message
    );

    // Connectors that need nothing launch without a file.
    assert_eq!(
        launched(no_file.launch_for(&call(connection, http()))).headers,
        Vec::new()
    );
    assert_eq!(
        launched(no_file.launch_for(&call(connection, stdio(&[])))).env,
        Vec::new()
    );
}

#[test]
fn an_unset_environment_variable_is_missing() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let unset = format!("SY_CRED_TEST_UNSET_{}", Uuid::new_v4().simple());
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({ "API_TOKEN": { "provider": "environment", "name": unset } }),
            json!({}),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::MISSING,
    );

    assert!(error.message.contains(&unset), "{}", error.message);
}

#[test]
fn values_must_be_4_to_16384_bytes() {
    let three = "abc".to_owned();
    let too_long = format!("{CANARY}{}", "x".repeat(16_385 - CANARY.len()));
    let four = "abcd".to_owned();
    let longest = "y".repeat(16_384);
    assert_eq!((three.len(), too_long.len()), (3, 16_385));
    let values = [&three, &too_long, &four, &longest].map(String::as_str);
    let Some(variables) = in_child_with_env("values_must_be_4_to_16384_bytes", values) else {
        return;
    };

    let cases = [
        (three, false),
        (too_long, false),
        (four, true),
        (longest, true),
    ];
    for ((value, accepted), variable) in cases.into_iter().zip(variables) {
        let dir = TempDir::new();
        let connection = ConnectionId::new();
        let path = dir.bindings(
            &bindings_of(
                connection,
                json!({ "API_TOKEN": { "provider": "environment", "name": variable } }),
                json!({}),
            ),
            0o600,
        );

        let result = resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"])));

        if accepted {
            assert_eq!(launched(result).env, vec![("API_TOKEN".to_owned(), value)]);
        } else {
            let error = refused(result, codes::INVALID);
            assert!(
                error.message.contains(&format!("{} bytes", value.len())),
                "{}",
                error.message
            );
        }
    }
}

#[test]
fn a_header_value_cannot_carry_a_line_break() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    dir.secrets(
        &json!({ "github": format!("{CANARY}\r\nX-Injected: 1") }).to_string(),
        0o600,
    );
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": { "provider": "secrets_file", "key": "github" } }),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::INVALID,
    );

    assert!(error.message.contains("CR or LF"), "{}", error.message);
}

#[test]
fn the_bindings_and_secrets_files_are_read_again_at_every_call() {
    let Some([first, second]) = in_child_with_env(
        "the_bindings_and_secrets_files_are_read_again_at_every_call",
        ["first-value", "second-value"],
    ) else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let binding = |variable: &str| {
        bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": {
                "provider": "environment", "name": variable, "prefix": "Bearer " } }),
        )
    };
    let path = dir.bindings(&binding(&first), 0o600);
    let resolver = resolver(&path);
    let headers = || launched(resolver.launch_for(&call(connection, http()))).headers;
    assert_eq!(
        headers(),
        vec![("Authorization".to_owned(), "Bearer first-value".to_owned())]
    );

    // A new reference takes effect at the next call.
    dir.bindings(&binding(&second), 0o600);
    assert_eq!(
        headers(),
        vec![("Authorization".to_owned(), "Bearer second-value".to_owned())]
    );

    // So does a new value in the secrets file.
    dir.secrets(&json!({ "token": "third-value" }).to_string(), 0o600);
    dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": { "provider": "secrets_file", "key": "token" } }),
        ),
        0o600,
    );
    assert_eq!(
        headers(),
        vec![("Authorization".to_owned(), "third-value".to_owned())]
    );
    dir.secrets(&json!({ "token": "fourth-value" }).to_string(), 0o600);
    assert_eq!(
        headers(),
        vec![("Authorization".to_owned(), "fourth-value".to_owned())]
    );

    // And a removed binding.
    dir.bindings(&json!({ "bindings": {} }), 0o600);
    assert_eq!(headers(), Vec::new());
}

#[test]
fn a_malformed_bindings_file_reports_line_and_column() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.0.join("dev.mcp-bindings.json");
    let text = format!(
        "{{\n  \"bindings\": {{\n    \"{connection}\": {{ \"env\": {{ \"API_TOKEN\": {{ \"provider\": \"environment\" \"name\": \"X\" }} }} }}\n  }}\n}}\n"
    );
    write(&path, &text, 0o600);
    let column = text
        .lines()
        .nth(2)
        .and_then(|line| line.find("\"name\""))
        .expect("line 3")
        + 1;

    let error = refused(
        resolver(&path).launch_for(&call(connection, stdio(&["API_TOKEN"]))),
        codes::CONFIG_INVALID,
    );
    assert!(
        error.message.contains(&format!("line 3 column {column}")),
        "{}",
        error.message
    );

    match validate_file(&path) {
        Err(CredentialError::BindingsSyntax {
            line,
            column: reported,
            ..
        }) => {
            assert_eq!((line, reported), (3, column));
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn a_reference_with_a_misspelt_field_is_refused_with_its_position() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": { "provider": "os_store", "account": "github", "prefx": "Bearer " } }),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );

    assert!(error.message.contains("prefx"), "{}", error.message);
    assert!(error.message.contains("line 1 column"), "{}", error.message);
}

#[test]
fn a_malformed_secrets_file_is_reported_without_its_contents() {
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    // Not a string value: serde_json's own message would quote the canary back.
    dir.secrets(&format!("{{\"github\": [\"{CANARY}\", 12345]}}"), 0o600);
    let path = dir.bindings(
        &bindings_of(
            connection,
            json!({}),
            json!({ "Authorization": { "provider": "secrets_file", "key": "github" } }),
        ),
        0o600,
    );

    let error = refused(
        resolver(&path).launch_for(&call(connection, http())),
        codes::CONFIG_INVALID,
    );

    assert!(error.message.contains("line 1 column"), "{}", error.message);
}

#[test]
fn no_error_or_debug_output_contains_a_value() {
    let value_0 = format!("{CANARY}\u{1}");
    let value_1 = format!("{CANARY}{}", "z".repeat(20_000));
    let Some([with_control, env_1, fine]) = in_child_with_env(
        "no_error_or_debug_output_contains_a_value",
        [value_0.as_str(), value_1.as_str(), CANARY],
    ) else {
        return;
    };
    let dir = TempDir::new();
    let connection = ConnectionId::new();
    let too_long = env_1;
    let resolve = |env: Value, headers: Value, spec: ConnectorSpec| {
        let path = dir.bindings(&bindings_of(connection, env, headers), 0o600);
        CredentialResolver::new(Some(path), Arc::new(NoKeyring)).resolve(connection, &spec)
    };

    let failures = [
        resolve(
            json!({}),
            json!({ "X-Key": { "provider": "environment", "name": with_control } }),
            http(),
        ),
        resolve(
            json!({ "API_TOKEN": { "provider": "environment", "name": too_long } }),
            json!({}),
            stdio(&["API_TOKEN"]),
        ),
        resolve(
            json!({ "PATH": { "provider": "environment", "name": fine } }),
            json!({}),
            stdio(&["PATH"]),
        ),
    ];

    for failure in failures {
        let error = failure.expect_err("refused");
        assert_no_canary(&format!("{error} {error:?}"));
        let call_error = CallError::from(error);
        assert_no_canary(&format!("{} {call_error:?}", call_error.message));
    }
    let launch = resolve(
        json!({ "API_TOKEN": { "provider": "environment", "name": fine } }),
        json!({}),
        stdio(&["API_TOKEN"]),
    )
    .expect("resolves");
    assert_no_canary(&format!("{launch:?}"));
    let summary = validate_file(&dir.0.join("dev.mcp-bindings.json")).expect("valid file");
    assert_no_canary(&format!("{summary} {summary:?}"));
}

#[test]
fn the_startup_check_reports_what_is_bound_by_name() {
    let dir = TempDir::new();
    let stdio_connection = ConnectionId::new();
    let http_connection = ConnectionId::new();
    dir.secrets(&json!({ "dev": CANARY }).to_string(), 0o600);
    let path = dir.bindings(
        &json!({ "bindings": {
            stdio_connection.to_string(): { "env": {
                "API_TOKEN": { "provider": "environment", "name": "MY_TOKEN" } } },
            http_connection.to_string(): { "headers": {
                "Authorization": { "provider": "os_store", "account": "github", "prefix": "Bearer " },
                "X-Dev": { "provider": "secrets_file", "key": "dev" } } },
        } }),
        0o600,
    );

    let summary = validate_file(&path).expect("valid bindings file");

    let bound: Vec<(ConnectionId, Destination)> = summary
        .connections
        .iter()
        .flat_map(|c| {
            c.bound
                .iter()
                .map(|b| (c.connection, b.destination.clone()))
        })
        .collect();
    assert_eq!(bound.len(), 3);
    assert!(bound.contains(&(stdio_connection, Destination::Env("API_TOKEN".to_owned()))));
    assert!(bound.contains(&(
        http_connection,
        Destination::Header("Authorization".to_owned())
    )));
    assert!(bound.contains(&(http_connection, Destination::Header("X-Dev".to_owned()))));
    let printed = summary.to_string();
    for name in ["API_TOKEN", "MY_TOKEN", "Authorization", "github", "X-Dev"] {
        assert!(printed.contains(name), "{name} missing from {printed}");
    }
    assert_no_canary(&printed);
}

#[test]
fn the_startup_check_refuses_a_missing_file() {
    let dir = TempDir::new();

    let error = validate_file(&dir.0.join("absent.mcp-bindings.json")).expect_err("missing file");

    assert!(
        matches!(error, CredentialError::BindingsRead { .. }),
        "{error:?}"
    );
    assert_eq!(error.code(), codes::CONFIG_INVALID);
}
