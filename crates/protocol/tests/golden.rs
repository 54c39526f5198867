//! Golden files: the wire shape of every type in `switchyard-protocol`, pinned.
//!
//! Each entry of the `golden!` list below builds an example value of one wire type; its test
//! (`<name>::matches_file`) checks it against `tests/golden/<name>.json` twice over:
//!
//! 1. the value, serialized, equals the file (compared as JSON values, so whitespace and key
//!    order do not matter; a mismatch names the differing paths and prints both sides);
//! 2. the file, read as the type, equals the value and writes back to the same JSON (the
//!    round trip).
//!
//! So a changed wire shape fails here until the files are rewritten, and then shows as a diff of
//! the JSON files in review. To rewrite them from the Rust values:
//!
//! ```text
//! SWITCHYARD_BLESS=1 cargo test -p switchyard-protocol --test golden
//! ```
//!
//! "Every" is checked, not promised: `every_wire_type_has_a_golden_file` reads `src/` and fails
//! for a type that derives `Serialize` or `Deserialize` (or an id `id_type!` declares) without
//! an entry, `no_golden_file_is_stale` fails for a file without one, and `one_each!` (used for
//! every enum) stops compiling when a variant is added until the variant has a value.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use switchyard_protocol::api::*;
use switchyard_protocol::approval::*;
use switchyard_protocol::credential_status::*;
use switchyard_protocol::diagnose::*;
use switchyard_protocol::runner::*;
use switchyard_protocol::state::CallState;
use switchyard_protocol::*;
use uuid::Uuid;

/// The one list of golden files: `file_name: WireType = example value;`. The file name is the
/// type's name in snake case; enums are pinned as a list holding one value per variant.
///
/// Adding a wire type to `src/` means adding its line here (the coverage test says so), then
/// blessing.
macro_rules! golden {
    ($($name:ident: $ty:ty = $value:expr;)+) => {
        $(
            /// The golden file of this name: one module each, so that the test does not
            /// shadow a value function of the same name.
            mod $name {
                use super::*;

                #[test]
                fn matches_file() {
                    check::<$ty>(stringify!($name), &$value);
                }
            }
        )+

        /// Every entry: its file name and its type, as written in the list.
        const ENTRIES: &[(&str, &str)] = &[$((stringify!($name), stringify!($ty))),+];
    };
}

/// One value per variant of `$enum`, in declaration order; a unit variant may be listed by
/// name alone. The match stops compiling when a variant is added, pointing here; the assertion
/// fails when a value is not of the variant it is listed under.
macro_rules! one_each {
    ($enum:ident: $($variant:ident $(=> $value:expr)?),+ $(,)?) => {{
        let values: Vec<$enum> = vec![$(one_each!(@value $enum $variant $($value)?)),+];
        let variants: Vec<&str> = values
            .iter()
            .map(|value| match value {
                $($enum::$variant { .. } => stringify!($variant)),+
            })
            .collect();
        assert_eq!(
            variants,
            [$(stringify!($variant)),+],
            "one value per variant of {}, in order",
            stringify!($enum)
        );
        values
    }};
    (@value $enum:ident $variant:ident) => { $enum::$variant };
    (@value $enum:ident $variant:ident $value:expr) => { $value };
}

golden! {
    // ids.rs: the id newtypes share one shape, so one file holds them all.
    ids: Ids = ids();

    // state.rs
    call_state: Vec<CallState> = one_each!(CallState:
        AwaitingApproval, Queued, Leased, Running, Succeeded, ToolError, Failed, Cancelled,
        Expired, Unknown, Resolved, Declined,
    );

    // runner_ref.rs
    runner_ref: Vec<RunnerRef> = one_each!(RunnerRef:
        Central,
        Device => RunnerRef::Device(DEVICE),
    );

    // error.rs
    error_code: Vec<ErrorCode> = error_codes();
    api_error: ApiError = api_error();
    error_body: ErrorBody = ErrorBody { error: api_error() };

    // api.rs: users, workspaces, members and environments
    user_view: UserView = UserView { id: ALICE, name: "alice".into(), is_owner: true };
    create_workspace: CreateWorkspace = CreateWorkspace { name: "payments".into() };
    workspace_view: WorkspaceView = WorkspaceView {
        id: WORKSPACE,
        name: "payments".into(),
        created_at: at("2026-03-02T09:00:00.120394Z"),
    };
    member_role: Vec<MemberRole> = one_each!(MemberRole: Member, Admin);
    add_member: AddMember = AddMember { user: "bob".into(), role: MemberRole::Admin };
    member_view: MemberView = MemberView {
        workspace_id: WORKSPACE,
        user_id: BOB,
        user_name: "bob".into(),
        role: MemberRole::Admin,
    };
    removed_member: RemovedMember = RemovedMember {
        member: MemberView {
            workspace_id: WORKSPACE,
            user_id: BOB,
            user_name: "bob".into(),
            role: MemberRole::Member,
        },
        grants_removed: 2,
    };
    create_environment: CreateEnvironment = CreateEnvironment { name: "prod".into() };
    environment_view: EnvironmentView = EnvironmentView {
        id: PROD,
        workspace_id: WORKSPACE,
        name: "prod".into(),
    };

    // api.rs: connectors, connections and tools
    connector_spec: Vec<ConnectorSpec> = one_each!(ConnectorSpec:
        Stdio => github_spec(),
        Http => ConnectorSpec::Http { url: "https://mcp.linear.app/mcp".into() },
    );
    create_connector: CreateConnector = CreateConnector {
        name: "github".into(),
        spec: github_spec(),
    };
    transport: Vec<Transport> = one_each!(Transport: Stdio, Http);
    connector_target: Vec<ConnectorTarget> = one_each!(ConnectorTarget:
        Shown => ConnectorTarget::Shown(github_spec()),
        Withheld => ConnectorTarget::Withheld { transport: Transport::Stdio },
    );
    connector_view: ConnectorView = connector_view();
    connector_view_withheld: ConnectorView = ConnectorView {
        target: ConnectorTarget::Withheld { transport: Transport::Stdio },
        ..connector_view()
    };
    import_report: ImportReport = ImportReport {
        created: vec![connector_view()],
        warnings: vec![
            "github: environment values dropped (kept names GITHUB_PERSONAL_ACCESS_TOKEN); \
             bind them to credential references"
                .into(),
        ],
    };
    create_connection: CreateConnection = CreateConnection {
        name: "github".into(),
        connector: "github".into(),
        runner: Some(device_runner()),
        namespace: Some("github".into()),
        credentials: None,
        declared: true,
    };
    create_connection_with_credentials: CreateConnection = CreateConnection {
        name: "remote".into(),
        connector: "remote".into(),
        runner: None,
        namespace: None,
        credentials: Some(connection_credentials()),
        declared: false,
    };
    connection_credentials: ConnectionCredentials = connection_credentials();
    credential_reference: CredentialReference = bearer_reference();
    set_credential_value: SetCredentialValue = SetCredentialValue {
        value: "example-token-value".into(),
        prefix: Some("Bearer ".into()),
    };
    credential_value_set: CredentialValueSet = CredentialValueSet {
        connection_id: CONNECTION,
        destination: "header".into(),
        name: "Authorization".into(),
        reference: CredentialReference {
            provider: CredentialProvider::Installation,
            name: None,
            account: None,
            key: None,
            prefix: Some("Bearer ".into()),
        },
    };
    credential_provider: Vec<CredentialProvider> = one_each!(CredentialProvider:
        Environment, OsStore, SecretsFile, Installation);
    credential_status_list: CredentialStatusList = CredentialStatusList {
        connection_id: CONNECTION,
        connection: "remote".into(),
        values_settable: false,
        credentials: vec![credential_status_view()],
    };
    credential_status_view: CredentialStatusView = credential_status_view();
    credential_status_view_unusable: CredentialStatusView = CredentialStatusView {
        destination: "env".into(),
        name: "API_TOKEN".into(),
        reference: Some(CredentialReference {
            provider: CredentialProvider::SecretsFile,
            name: None,
            account: None,
            key: Some(format!("{CONNECTION}/API_TOKEN")),
            prefix: None,
        }),
        state: CredentialValueState::Unusable,
        code: Some("credential_invalid".into()),
        reason: Some("the value is shorter than 4 bytes".into()),
    };
    credential_value_state: Vec<CredentialValueState> = one_each!(CredentialValueState:
        Unbound, Present, Missing, Unusable);
    connection_view: ConnectionView = ConnectionView {
        id: CONNECTION,
        workspace_id: WORKSPACE,
        name: "github".into(),
        namespace: "github".into(),
        connector_id: CONNECTOR,
        connector_name: "github".into(),
        runner: device_runner(),
        revision: 2,
        last_discovery_at: Some(at("2026-03-02T09:05:12.402118Z")),
        last_discovery_error: None,
        created_at: at("2026-03-02T09:04:58.771020Z"),
        retired: Some(retired_view()),
        prefix_tools: true,
        declared: true,
        auth: Some(connection_auth_view()),
    };
    // connection_auth.rs
    auth_kind: Vec<AuthKind> = one_each!(AuthKind: None, Token, Oauth);
    credential_holder: Vec<CredentialHolder> = one_each!(CredentialHolder: Shared, User);
    auth_state: Vec<AuthState> =
        one_each!(AuthState: NeedsAuthorization, Authorized, AuthRequired, Expired);
    set_connection_auth: SetConnectionAuth = SetConnectionAuth {
        kind: Some(AuthKind::Oauth),
        scopes: vec!["mcp:tools".into()],
        client_id_env: Some("SWITCHYARD_OAUTH_SENTRY_CLIENT_ID".into()),
        client_secret_env: Some("SWITCHYARD_OAUTH_SENTRY_CLIENT_SECRET".into()),
        credential: CredentialHolder::Shared,
        header: None,
    };
    connection_auth_view: ConnectionAuthView = connection_auth_view();
    authorization_started: AuthorizationStarted = AuthorizationStarted {
        authorization_url: "https://auth.example.com/authorize?response_type=code&client_id=abc&state=Zq3".into(),
        state: "Zq3".into(),
    };
    set_prefix_tools: SetPrefixTools = SetPrefixTools { prefix_tools: false };
    set_declared: SetDeclared = SetDeclared { declared: true };
    retired_view: RetiredView = retired_view();
    tool_view: ToolView = tool_view();
    // tools.rs
    tool_state: Vec<ToolState> = one_each!(ToolState: Unclassified, Classified, Unavailable, Retired);
    risk: Vec<Risk> = one_each!(Risk: Low, Medium, High);
    tool_classification: ToolClassification = tool_classification();
    tool_hints: ToolHints = ToolHints {
        read_only: Some(false),
        destructive: Some(true),
        idempotent: Some(false),
        open_world: Some(true),
    };
    discovery_view: DiscoveryView = DiscoveryView {
        connection_id: CONNECTION,
        tools: vec![tool_view()],
    };
    // diagnose.rs
    diagnose_request: DiagnoseRequest = DiagnoseRequest { timeout_ms: Some(5000) };
    diagnose_check: Vec<DiagnoseCheck> = one_each!(DiagnoseCheck:
        Enabled, Approved, Transport, Credentials, Catalog, Grants, Handshake,
    );
    check_status: Vec<CheckStatus> = one_each!(CheckStatus: Passed, Failed, Skipped);
    failure_class: Vec<FailureClass> = one_each!(FailureClass:
        ExecutableNotFound, SpawnFailed, HandshakeTimeout, NotMcp, AuthRefused, TlsFailed,
        Unreachable, EndpointBlocked,
    );
    live_check: Vec<LiveCheck> = one_each!(LiveCheck: Central, OnDevice);
    check_result: CheckResult = CheckResult {
        check: DiagnoseCheck::Credentials,
        status: CheckStatus::Passed,
        detail: "env GITHUB_TOKEN: present".into(),
    };
    diagnosis_view: DiagnosisView = DiagnosisView {
        connection_id: CONNECTION,
        connection: "files".into(),
        runner: "central".into(),
        live_check: LiveCheck::Central,
        checks: vec![CheckResult {
            check: DiagnoseCheck::Handshake,
            status: CheckStatus::Failed,
            detail: "MCP initialize did not finish within 2s".into(),
        }],
        passed: false,
        failure: Some(FailureClass::HandshakeTimeout),
        stderr_tail: Some("starting…\n".into()),
    };
    connection_event_view: ConnectionEventView = ConnectionEventView {
        id: 41,
        connection_id: CONNECTION,
        kind: "session_started".into(),
        detail: json!({"client_session_id": "triage-7", "pid": 48213}),
        runner: Some(device_runner()),
        at: at("2026-03-02T09:14:06.002731Z"),
    };

    // api.rs: profiles and grants
    create_profile: CreateProfile = CreateProfile {
        name: "deploy-bot".into(),
        environment: Some("prod".into()),
        connections: vec!["github".into()],
        tools: Some(vec!["create_issue".into(), "list_issues".into()]),
    };
    set_tools: SetTools = SetTools {
        tools: Some(vec!["create_issue".into()]),
    };
    grant_request: GrantRequest = GrantRequest {
        user: Some("bob".into()),
        agent: None,
        use_: true,
        manage: false,
        share: true,
        approve: true,
    };
    grant_view: GrantView = grant_view();
    profile_view: ProfileView = ProfileView {
        id: PROFILE,
        workspace_id: WORKSPACE,
        name: "deploy-bot".into(),
        environment_id: PROD,
        connection_ids: vec![CONNECTION],
        tools: std::collections::BTreeMap::from([(
            CONNECTION,
            vec!["create_issue".into(), "list_issues".into()],
        )]),
        grants: vec![grant_view()],
        retired: None,
    };

    // api.rs: calls
    submit_call: SubmitCall = SubmitCall {
        request_id: REQUEST,
        profile_id: "deploy-bot".into(),
        connection_id: "github".into(),
        tool_name: "create_issue".into(),
        arguments: issue_arguments(),
        environment_id: Some("prod".into()),
        client_session_id: Some("triage-7".into()),
        timeout_seconds: Some(120),
        operation_id: Some(OPERATION),
    };
    call_error: CallError = timeout_error();
    call_view: CallView = settled_call();
    call_summary: CallSummary = call_summary();
    call_list: CallList = CallList {
        calls: vec![call_summary()],
        next_cursor: Some("c1.0123456789abcdef".into()),
    };
    cancel_outcome: Vec<CancelOutcome> = one_each!(CancelOutcome:
        Cancelled, CancellationRequested, AlreadyFinished,
    );
    cancel_answer: CancelAnswer = CancelAnswer {
        outcome: CancelOutcome::Cancelled,
        call: CallView {
            state: CallState::Cancelled,
            finished_at: Some(at("2026-03-02T09:14:05.640017Z")),
            ..queued_call()
        },
    };
    release_session: ReleaseSession = ReleaseSession { connection_id: Some("github".into()) };
    release_answer: ReleaseAnswer = ReleaseAnswer {
        client_session_id: "triage-7".into(),
        connection_ids: vec![CONNECTION],
    };

    // api.rs: pairing, devices and operations
    start_pairing: StartPairing = StartPairing { device_name: "alice-laptop".into() };
    pairing_started: PairingStarted = PairingStarted {
        pairing_id: PAIRING,
        code: "K7QM-3XTD".into(),
        expires_at: at("2026-03-02T09:20:00Z"),
        poll_secret: "sy_poll_4XcQ9uV2mT7rB1kLzN8pW3eH".into(),
    };
    poll_pairing: PollPairing = PollPairing {
        poll_secret: "sy_poll_4XcQ9uV2mT7rB1kLzN8pW3eH".into(),
    };
    pairing_status: Vec<PairingStatus> = one_each!(PairingStatus:
        Pending => PairingStatus::Pending { expires_at: at("2026-03-02T09:20:00Z") },
        Approved => PairingStatus::Approved {
            device_id: DEVICE,
            workspace_id: WORKSPACE,
            credential: Some("sy_dev_9fQ2LmX7vB4nR8tK1wZ6cJ3hY5pD0sGe".into()),
        },
        Expired,
    );
    approve_device: ApproveDevice = ApproveDevice {
        code: "K7QM-3XTD".into(),
        profile: "deploy-bot".into(),
    };
    create_token: CreateToken = CreateToken {
        name: "ci".into(),
        expires_in_seconds: Some(2_592_000),
    };
    token_view: TokenView = token_view();
    created_token: CreatedToken = CreatedToken {
        token: token_view(),
        secret: "sy_5f0c2e4b8a1d3f6e9c7b0a2d4e6f8a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b9d0f".into(),
    };
    device_view: DeviceView = DeviceView {
        id: DEVICE,
        workspace_id: WORKSPACE,
        name: "alice-laptop".into(),
        runner: device_runner(),
        profile_id: PROFILE,
        approved_by: ALICE,
        created_at: at("2026-03-02T09:11:47.318842Z"),
        last_seen_at: Some(at("2026-03-02T09:14:05.901223Z")),
        revoked_at: None,
    };

    // audit.rs
    audit_actor_kind: Vec<AuditActorKind> = one_each!(AuditActorKind: User, Device, System);
    audit_actor_view: AuditActorView = AuditActorView {
        kind: AuditActorKind::User,
        id: Some(ALICE.0),
        name: "alice".into(),
    };
    audit_object_view: AuditObjectView = AuditObjectView {
        kind: "connection".into(),
        id: Some(CONNECTION.0),
        name: "github".into(),
    };
    audit_entry_view: AuditEntryView = AuditEntryView {
        seq: 7,
        at: at("2026-03-02T09:15:12.004417Z"),
        workspace_id: Some(WORKSPACE),
        actor: AuditActorView { kind: AuditActorKind::User, id: Some(ALICE.0), name: "alice".into() },
        action: "connection.created".into(),
        object: AuditObjectView { kind: "connection".into(), id: Some(CONNECTION.0), name: "github".into() },
        connection_id: Some(CONNECTION),
        before: None,
        after: Some(json!({"connector": "github", "runner": "central", "credentials": ["GITHUB_TOKEN"]})),
        request_id: Some("0195f1a0-0008-7000-8000-000000000001".into()),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        call_id: None,
        prev_hash: Some("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into()),
        hash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752".into(),
    };
    audit_break_kind: Vec<AuditBreakKind> = one_each!(AuditBreakKind:
        Edited, Removed, Reordered, Truncated,
    );
    audit_break: AuditBreak = AuditBreak {
        kind: AuditBreakKind::Edited,
        seq: 4,
        message: "entry 4 no longer matches its hash: it was edited".into(),
    };
    audit_verification: AuditVerification = AuditVerification {
        entries: 6,
        head_seq: 7,
        broken: Some(AuditBreak {
            kind: AuditBreakKind::Removed,
            seq: 5,
            message: "entry 5 is missing (entry 6 follows entry 4)".into(),
        }),
    };
    // agents.rs
    principal_kind: Vec<PrincipalKind> = one_each!(PrincipalKind: Person, Agent);
    agent_mode: Vec<AgentMode> = one_each!(AgentMode: Tools, Menu);
    auth_failure: Vec<AuthFailure> = one_each!(AuthFailure: Stop, Degrade);
    tool_sync_failure: Vec<ToolSyncFailure> = one_each!(ToolSyncFailure: Warn, Silent);
    announce: Vec<Announce> = one_each!(Announce: Auto, Never);
    unavailable_reason: Vec<UnavailableReason> =
        one_each!(UnavailableReason: Unreachable, NeedsAuthorization);
    create_agent: CreateAgent = CreateAgent {
        name: "triage-bot".into(),
        mode: AgentMode::Tools,
        defer_all: false,
        declared: true,
    };
    edit_agent: EditAgent = EditAgent {
        mode: Some(AgentMode::Menu),
        defer_all: None,
        declared: None,
    };
    agent_created: AgentCreated = AgentCreated {
        agent: agent_view(),
        token: "sy_0123456789abcdef".into(),
    };
    agent_view: AgentView = agent_view();
    agent_detail: AgentDetail = AgentDetail {
        agent: agent_view(),
        profiles: vec![AgentProfileView { id: PROFILE, name: "deploy-bot".into() }],
        connections: vec![AgentConnectionView {
            connection_id: CONNECTION,
            connection_name: "github".into(),
            settings: agent_connection_settings(),
        }],
    };
    agent_profile_view: AgentProfileView = AgentProfileView {
        id: PROFILE,
        name: "deploy-bot".into(),
    };
    agent_connection_view: AgentConnectionView = AgentConnectionView {
        connection_id: CONNECTION,
        connection_name: "github".into(),
        settings: agent_connection_settings(),
    };
    agent_connection_settings: AgentConnectionSettings = agent_connection_settings();
    agent_tools_view: AgentToolsView = AgentToolsView {
        mode: AgentMode::Tools,
        tools: vec![agent_tool_view()],
        deferred: vec![],
        dropped: vec![dropped_tool_view()],
        unavailable: vec![unavailable_connection_view()],
    };
    agent_tool_view: AgentToolView = agent_tool_view();
    dropped_tool_view: DroppedToolView = dropped_tool_view();
    unavailable_connection_view: UnavailableConnectionView = unavailable_connection_view();
    // approval.rs
    approval_policy: Vec<ApprovalPolicy> = one_each!(ApprovalPolicy:
        Default, Destructive, Always, Never,
    );
    ask_reason: Vec<AskReason> = one_each!(AskReason: HighRisk, Destructive, Always);
    approval_state: Vec<ApprovalState> = one_each!(ApprovalState:
        Pending, Approved, Declined, Expired, Cancelled,
    );
    approval_view: ApprovalView = approval_view();
    approval_list: ApprovalList = ApprovalList { approvals: vec![approval_view()] };
    decide_approval: DecideApproval = DecideApproval {
        reason: Some("not on a Friday".into()),
    };
    set_approval_policy: SetApprovalPolicy = SetApprovalPolicy {
        connection: Some("github".into()),
        tool: Some("create_issue".into()),
        policy: ApprovalPolicy::Always,
    };
    approval_policy_view: ApprovalPolicyView = approval_policy_view();
    approval_policy_list: ApprovalPolicyList = ApprovalPolicyList {
        policies: vec![approval_policy_view()],
    };
    approval_timeout: ApprovalTimeout = ApprovalTimeout { seconds: Some(3600) };

    // placement.rs
    spec_digest: SpecDigest = github_spec().digest();
    placement_state: Vec<PlacementState> = one_each!(PlacementState:
        Pending, Accepted, SpecChanged, Declined,
    );
    placement_view: PlacementView = PlacementView {
        device_id: DEVICE,
        device_name: "alice-laptop".into(),
        connection_id: CONNECTION,
        connection_name: "github".into(),
        connector_name: "github".into(),
        spec: github_spec(),
        spec_digest: github_spec().digest(),
        state: PlacementState::SpecChanged,
        accepted_digest: Some(ConnectorSpec::Http { url: "https://mcp.linear.app/mcp".into() }.digest()),
        decided_by: Some(ALICE),
        decided_at: Some(at("2026-03-02T09:15:12.004417Z")),
    };
    accept_placement: AcceptPlacement = AcceptPlacement { spec_digest: github_spec().digest() };
    begin_operation: BeginOperation = BeginOperation {
        environment: "prod".into(),
        profile: "deploy-bot".into(),
        task: "Triage the failed payout webhooks".into(),
    };
    operation_view: OperationView = OperationView {
        id: OPERATION,
        workspace_id: WORKSPACE,
        environment_id: PROD,
        profile_id: PROFILE,
        task: "Triage the failed payout webhooks".into(),
        device_id: Some(DEVICE),
        created_at: at("2026-03-02T09:13:30.004512Z"),
    };

    // reconcile.rs: what is recorded beside an unknown call
    call_kind: Vec<CallKind> = one_each!(CallKind: Tool, Lookup, Discovery);
    resolution_outcome: Vec<ResolutionOutcome> = one_each!(ResolutionOutcome:
        Succeeded, NotApplied, Failed,
    );
    reported: Vec<Reported> = one_each!(Reported: Applied, NotApplied, Failed, Unknown);
    observation_source: Vec<ObservationSource> = one_each!(ObservationSource:
        Lookup, LateReceipt,
    );
    observation_view: ObservationView = lookup_observation();
    resolution_source: Vec<ResolutionSource> = one_each!(ResolutionSource: Observation, Caller);
    resolution_view: ResolutionView = ResolutionView {
        outcome: ResolutionOutcome::NotApplied,
        source: ResolutionSource::Caller,
        observation_id: None,
        source_version_id: Some(EVIDENCE),
        explanation: Some("The issue list shows no issue titled like this one.".into()),
        explanation_removed_at: None,
        resolved_by: Some(ALICE),
        request_id: Some(RESOLVE_REQUEST),
        resolved_at: at("2026-03-02T09:31:02.551870Z"),
    };
    attempt_view: AttemptView = attempt();
    lineage_view: LineageView = lineage();

    // reconcile.rs: receipt policies, reconcile, resolve, erase and evidence
    set_receipt_policy: SetReceiptPolicy = SetReceiptPolicy {
        tool: "search_issues".into(),
        arguments: receipt_arguments(),
    };
    receipt_policy_view: ReceiptPolicyView = ReceiptPolicyView {
        connection_id: CONNECTION,
        tool: "search_issues".into(),
        arguments: receipt_arguments(),
        approved_by: ALICE,
        approved_at: at("2026-03-02T09:07:44.120005Z"),
    };
    reconcile_call: ReconcileCall = ReconcileCall {
        request_id: LOOKUP_REQUEST,
        client_session_id: None,
    };
    reconcile_answer: ReconcileAnswer = ReconcileAnswer {
        lookup: queued_lookup(),
        call: unknown_call(),
    };
    resolve_call: ResolveCall = ResolveCall {
        request_id: RESOLVE_REQUEST,
        outcome: ResolutionOutcome::NotApplied,
        source_version_id: EVIDENCE,
        explanation: "The issue list shows no issue titled like this one.".into(),
    };
    erase_answer: EraseAnswer = EraseAnswer {
        call: CallView {
            arguments: None,
            erased_at: Some(at("2026-03-03T08:00:00.310447Z")),
            ..unknown_call()
        },
        observations_erased: 1,
        evidence_erased: 1,
        pending_evidence_dropped: 0,
        notice: "Erasure removed Switchyard's retained evidence of this call (its result, \
                 observation outputs, evidence records, pending evidence and explanations) and \
                 fences receipts that arrive for it later. It does not undo whatever the tool \
                 did outside Switchyard: an effect that happened still happened."
            .into(),
    };
    capture_exclusion: CaptureExclusion = password_exclusion();
    set_capture_exclusions: SetCaptureExclusions = SetCaptureExclusions {
        exclusions: vec![
            password_exclusion(),
            CaptureExclusion {
                tool: None,
                capture_nothing: true,
                ..CaptureExclusion::default()
            },
        ],
    };
    capture_exclusions_view: CaptureExclusionsView = CaptureExclusionsView {
        connection_id: CONNECTION,
        exclusions: vec![password_exclusion()],
        updated_at: Some(at("2026-03-02T09:08:11.5Z")),
    };
    set_capture_policy: SetCapturePolicy = SetCapturePolicy {
        capture_managed_tool_results: Some(true),
        evidence_retention_days: Some(90),
    };
    capture_policy_view: CapturePolicyView = CapturePolicyView {
        workspace_id: WORKSPACE,
        capture_managed_tool_results: true,
        pending_records: 3,
        pending_bytes: 18_432,
        dropped: 0,
        expired: 0,
        evidence_retention_days: 30,
        updated_at: Some(at("2026-03-02T09:08:10.000981Z")),
    };
    evidence_view: EvidenceView = EvidenceView {
        id: EVIDENCE,
        workspace_id: WORKSPACE,
        call_id: LOOKUP_CALL,
        request_id: LOOKUP_REQUEST,
        kind: CallKind::Lookup,
        profile_id: PROFILE,
        environment_id: PROD,
        operation_id: Some(OPERATION),
        tool_name: "search_issues".into(),
        connection_id: CONNECTION,
        connector_id: Some(CONNECTOR),
        connector_revision: Some(2),
        runner: device_runner(),
        outcome: CallState::Succeeded,
        resolution_outcome: None,
        output: Some(lookup_output()),
        output_truncated: false,
        lineage: json!({"parent_call_id": CALL, "observation_id": OBSERVATION}),
        captured_at: at("2026-03-02T09:24:41.200664Z"),
        published_at: at("2026-03-02T09:24:41.913027Z"),
        erased_at: None,
    };

    // runner.rs: the work a runner leases and what it reports
    epoch: Epoch = Epoch(4);
    leased_call: LeasedCall = leased_call();
    submitter: Vec<Submitter> = one_each!(Submitter:
        User => Submitter::User(ALICE),
        Device => Submitter::Device(DEVICE),
    );
    connection_target: ConnectionTarget = connection_target();
    completion: Vec<Completion> = completions();
    lifecycle_event: Vec<LifecycleEvent> = one_each!(LifecycleEvent:
        SessionStarted => LifecycleEvent::SessionStarted {
            connection_id: CONNECTION,
            client_session_id: Some("triage-7".into()),
            profile_id: Some(PROFILE),
            pid: Some(48213),
        },
        SessionClosed => LifecycleEvent::SessionClosed {
            connection_id: CONNECTION,
            client_session_id: Some("triage-7".into()),
            profile_id: Some(PROFILE),
            reason: "idle".into(),
        },
        ProcessExited => LifecycleEvent::ProcessExited {
            connection_id: CONNECTION,
            pid: 48213,
            status: None,
            signal: Some("SIGTERM".into()),
        },
    );

    // runner.rs: the device runner API (`/api/v1/runner/...`)
    acquire_lease: AcquireLease = AcquireLease { holder: HOLDER };
    acquire_answer: Vec<AcquireAnswer> = one_each!(AcquireAnswer:
        Acquired => AcquireAnswer::Acquired { epoch: Epoch(4), ttl_seconds: 30 },
        Held => AcquireAnswer::Held { retry_after_ms: 5000 },
    );
    heartbeat: Heartbeat = heartbeat();
    session_release: SessionRelease = session_release();
    heartbeat_answer: HeartbeatAnswer = heartbeat_answer();
    lease_request: LeaseRequest = lease_request();
    lease_answer: LeaseAnswer = lease_answer();
    auth_state_report: AuthStateReport = AuthStateReport {
        connection_id: CONNECTION,
        state: AuthState::AuthRequired,
    };
    start_request: StartRequest = StartRequest { epoch: Epoch(4) };
    start_answer: Vec<StartAnswer> = start_answers();
    complete_request: CompleteRequest = complete_request();
    complete_answer: Vec<CompleteAnswer> = one_each!(CompleteAnswer: Recorded, Superseded, Fenced);
    receipt_check: ReceiptCheck = ReceiptCheck { receipts: vec![receipt_ref()] };
    receipt_ref: ReceiptRef = receipt_ref();
    receipt_check_answer: ReceiptCheckAnswer = ReceiptCheckAnswer { fenced: vec![RECEIPT] };
    start_check: StartCheck = StartCheck { starts: vec![start_ref()] };
    start_ref: StartRef = start_ref();
    start_check_answer: StartCheckAnswer = StartCheckAnswer { unacknowledged: vec![CALL] };

    // runner.rs: the runner channel. `ChannelCall` and `ChannelReply` never travel alone (they
    // are flattened beside the line's `id`); their files show the part each line carries.
    channel_request: Vec<ChannelRequest> = numbered(channel_calls())
        .map(|(id, call)| ChannelRequest { id, call })
        .collect();
    channel_call: Vec<ChannelCall> = channel_calls();
    channel_start: ChannelStart = channel_start();
    channel_complete: ChannelComplete = channel_complete();
    channel_answer: Vec<ChannelAnswer> = numbered(channel_replies())
        .map(|(id, reply)| ChannelAnswer { id, reply })
        .collect();
    channel_reply: Vec<ChannelReply> = channel_replies();
    channel_error: ChannelError = channel_error();
}

// ---------------------------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------------------------

/// How to rewrite the golden files, for failure messages.
const BLESS: &str = "to write the golden files from the Rust values, run \
                     `SWITCHYARD_BLESS=1 cargo test -p switchyard-protocol --test golden` \
                     and review the diff of tests/golden/: it is a change of wire shape";

/// The folder of the golden files.
fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Whether this run rewrites the golden files (`SWITCHYARD_BLESS=1`).
fn blessing() -> bool {
    std::env::var("SWITCHYARD_BLESS").is_ok_and(|v| v == "1")
}

/// Checks `value` against `tests/golden/<name>.json` (writing the file first when blessing),
/// then reads the file back as `T` and writes it again.
fn check<T>(name: &str, value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let path = golden_dir().join(format!("{name}.json"));
    let shown = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
    let written = serde_json::to_string_pretty(value).expect("a wire value serializes") + "\n";
    if blessing() {
        fs::create_dir_all(golden_dir()).unwrap();
        fs::write(&path, &written).unwrap_or_else(|e| panic!("writing {}: {e}", shown.display()));
    }
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}\n{BLESS}", shown.display()));
    let file: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{BLESS}", shown.display()));

    let serialized = serde_json::to_value(value).unwrap();
    if serialized != file {
        panic!(
            "{name}: the Rust value no longer serializes as {}.\n{}\n\
             --- file ---\n{text}--- Rust value ---\n{written}{BLESS}",
            shown.display(),
            differences(&file, &serialized),
        );
    }

    let read: T = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not read back: {e}", shown.display()));
    assert_eq!(
        &read,
        value,
        "{}, read back, differs from the value",
        shown.display()
    );
    let again = serde_json::to_value(&read).unwrap();
    assert!(
        again == file,
        "{}, read and written again, changed:\n{}\n--- written again ---\n{}",
        shown.display(),
        differences(&file, &again),
        serde_json::to_string_pretty(&again).unwrap(),
    );
}

/// Where `expected` and `actual` differ, one JSON pointer a line.
fn differences(expected: &Value, actual: &Value) -> String {
    fn walk(at: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
                for key in keys {
                    let at = format!("{at}/{key}");
                    match (e.get(key), a.get(key)) {
                        (Some(e), Some(a)) => walk(&at, e, a, out),
                        (Some(e), None) => out.push(format!("{at}: only in the file ({e})")),
                        (None, Some(a)) => out.push(format!("{at}: only in the value ({a})")),
                        (None, None) => unreachable!("a key of either"),
                    }
                }
            }
            (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
                for (i, (e, a)) in e.iter().zip(a).enumerate() {
                    walk(&format!("{at}/{i}"), e, a, out);
                }
            }
            _ if expected != actual => {
                let at = if at.is_empty() { "/" } else { at };
                out.push(format!("{at}: file {expected}, value {actual}"));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", expected, actual, &mut out);
    out.join("\n")
}

// ---------------------------------------------------------------------------------------------
// "Every": the list above against the source and the folder
// ---------------------------------------------------------------------------------------------

#[test]
fn every_wire_type_has_a_golden_file() {
    let id_names: Vec<String> = match serde_json::to_value(ids()).unwrap() {
        Value::Object(ids) => ids.keys().cloned().collect(),
        _ => unreachable!("`Ids` is a struct"),
    };
    let mut missing = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in fs::read_dir(&src).unwrap() {
        let path = file.unwrap().path();
        let shown = path.file_name().unwrap().to_string_lossy();
        let (types, ids) = wire_types(&fs::read_to_string(&path).unwrap());
        for name in types {
            let file_name = snake_case(&name);
            let listed = ENTRIES.iter().any(|(entry, ty)| {
                *entry == file_name
                    && ty
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|word| word == name)
            });
            if !listed {
                missing.push(format!(
                    "{name} ({shown}): add `{file_name}: {name} = …;` to `golden!`"
                ));
            }
        }
        for name in ids.into_iter().filter(|id| !id_names.contains(id)) {
            missing.push(format!("{name} ({shown}): add a field of it to `Ids`"));
        }
    }
    assert!(
        missing.is_empty(),
        "wire types without a golden file:\n{}\nthen run \
         `SWITCHYARD_BLESS=1 cargo test -p switchyard-protocol --test golden`",
        missing.join("\n")
    );
}

#[test]
fn no_golden_file_is_stale() {
    let stale: Vec<String> = fs::read_dir(golden_dir())
        .unwrap()
        .map(|file| file.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|file| file != "README.md")
        .filter(|file| {
            let name = file.strip_suffix(".json").unwrap_or(file);
            !ENTRIES.iter().any(|(entry, _)| *entry == name)
        })
        .collect();
    assert!(
        stale.is_empty(),
        "files in tests/golden/ without an entry in `golden!` (delete them): {stale:?}"
    );
}

/// The names of the types in `source` whose derive list holds `Serialize` or `Deserialize`,
/// and those of the ids an `id_type!` invocation declares.
fn wire_types(source: &str) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut ids = Vec::new();
    let mut attributes = String::new();
    let mut in_id_list = false;
    for line in source.lines().map(str::trim) {
        if in_id_list {
            in_id_list = line != "}";
            if let Some(name) = line.strip_suffix(',').filter(|_| !line.starts_with("//")) {
                ids.push(name.to_owned());
            }
            continue;
        }
        in_id_list = line == "id_type! {";
        let open = attributes.matches('[').count() > attributes.matches(']').count();
        if line.starts_with("#[") || open {
            attributes.push_str(line);
            continue;
        }
        if line.starts_with("//") {
            continue;
        }
        let item = line
            .strip_prefix("pub struct ")
            .or(line.strip_prefix("pub enum "));
        if let Some(item) = item
            && (attributes.contains("Serialize") || attributes.contains("Deserialize"))
        {
            // `pub struct $name` inside `id_type!` itself yields no name.
            let name: String = item
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
        attributes.clear();
    }
    (names, ids)
}

/// `CallView` → `call_view`.
fn snake_case(name: &str) -> String {
    let mut snake = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    snake
}

// ---------------------------------------------------------------------------------------------
// The example values: one workspace (`payments`), a GitHub connection on Alice's laptop, and one
// `create_issue` call that timed out, became unknown and was settled by a receipt lookup.
// ---------------------------------------------------------------------------------------------

/// A fixed UUIDv7-shaped id whose second group names its kind (see tests/golden/README.md).
const fn uuid(kind: u16, n: u16) -> Uuid {
    Uuid::from_u128(0x0195f1a0_0000_7000_8000_000000000000 | ((kind as u128) << 80) | n as u128)
}

const ALICE: UserId = UserId(uuid(0x1, 1));
const BOB: UserId = UserId(uuid(0x1, 2));
const WORKSPACE: WorkspaceId = WorkspaceId(uuid(0x2, 1));
const PROD: EnvironmentId = EnvironmentId(uuid(0x3, 1));
const CONNECTOR: ConnectorId = ConnectorId(uuid(0x4, 1));
const CONNECTION: ConnectionId = ConnectionId(uuid(0x5, 1));
const PROFILE: ProfileId = ProfileId(uuid(0x6, 1));
const CALL: CallId = CallId(uuid(0x7, 1));
const LOOKUP_CALL: CallId = CallId(uuid(0x7, 2));
const REQUEST: RequestId = RequestId(uuid(0x8, 1));
const LOOKUP_REQUEST: RequestId = RequestId(uuid(0x8, 2));
const RESOLVE_REQUEST: RequestId = RequestId(uuid(0x8, 3));
const DEVICE: DeviceId = DeviceId(uuid(0x9, 1));
const OPERATION: OperationId = OperationId(uuid(0xa, 1));
const EVIDENCE: EvidenceId = EvidenceId(uuid(0xb, 1));
const OBSERVATION: ObservationId = ObservationId(uuid(0xc, 1));
const PAIRING: Uuid = uuid(0xd, 1);
const HOLDER: Uuid = uuid(0xe, 1);
const TOKEN: TokenId = TokenId(uuid(0x10, 1));
const RECEIPT: Uuid = uuid(0xf, 1);

fn token_view() -> TokenView {
    TokenView {
        id: TOKEN,
        name: "ci".into(),
        created_at: at("2026-03-02T09:11:47.318842Z"),
        expires_at: Some(at("2026-04-01T09:11:47.318842Z")),
        revoked_at: None,
    }
}

/// A fixed time.
fn agent_view() -> AgentView {
    AgentView {
        id: BOB,
        workspace_id: WORKSPACE,
        name: "triage-bot".into(),
        mode: AgentMode::Tools,
        defer_all: false,
        created_at: at("2026-12-06T10:00:00Z"),
        revoked_at: None,
        declared: true,
    }
}

fn agent_connection_settings() -> AgentConnectionSettings {
    AgentConnectionSettings {
        include: vec!["list_*".into(), "get_issue".into()],
        exclude: vec!["*_admin".into()],
        read_only: true,
        non_destructive: false,
        idempotent: false,
        defer: true,
        approve: Some(ApprovalPolicy::Destructive),
        auth_failure: AuthFailure::Degrade,
        tool_sync_failure: ToolSyncFailure::Warn,
        announce: Announce::Auto,
    }
}

fn agent_tool_view() -> AgentToolView {
    AgentToolView {
        name: "github__list_issues".into(),
        connection: "github".into(),
        tool: "list_issues".into(),
    }
}

fn dropped_tool_view() -> DroppedToolView {
    DroppedToolView {
        connection: "github".into(),
        tool: "delete_repo".into(),
        reason: "not_read_only".into(),
    }
}

fn unavailable_connection_view() -> UnavailableConnectionView {
    UnavailableConnectionView {
        connection: "linear".into(),
        reason: "needs_authorization".into(),
    }
}

fn at(rfc3339: &str) -> DateTime<Utc> {
    rfc3339.parse().unwrap()
}

/// Every id newtype, keyed by its type name: they share one shape (a UUID string), so one file
/// pins them all. The coverage test reads the keys.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Ids {
    user_id: UserId,
    workspace_id: WorkspaceId,
    environment_id: EnvironmentId,
    connector_id: ConnectorId,
    connection_id: ConnectionId,
    profile_id: ProfileId,
    call_id: CallId,
    request_id: RequestId,
    device_id: DeviceId,
    operation_id: OperationId,
    evidence_id: EvidenceId,
    observation_id: ObservationId,
    token_id: TokenId,
}

fn ids() -> Ids {
    Ids {
        user_id: ALICE,
        workspace_id: WORKSPACE,
        environment_id: PROD,
        connector_id: CONNECTOR,
        connection_id: CONNECTION,
        profile_id: PROFILE,
        call_id: CALL,
        request_id: REQUEST,
        device_id: DEVICE,
        operation_id: OPERATION,
        evidence_id: EVIDENCE,
        observation_id: OBSERVATION,
        token_id: TOKEN,
    }
}

fn credential_status_view() -> CredentialStatusView {
    CredentialStatusView {
        destination: "header".into(),
        name: "Authorization".into(),
        reference: Some(bearer_reference()),
        state: CredentialValueState::Present,
        code: None,
        reason: None,
    }
}

fn bearer_reference() -> CredentialReference {
    CredentialReference {
        provider: CredentialProvider::OsStore,
        name: None,
        account: Some("remote-token".into()),
        key: None,
        prefix: Some("Bearer ".into()),
    }
}

fn connection_credentials() -> ConnectionCredentials {
    ConnectionCredentials {
        env: std::collections::BTreeMap::from([(
            "API_TOKEN".into(),
            CredentialReference {
                provider: CredentialProvider::Environment,
                name: Some("REMOTE_API_TOKEN".into()),
                account: None,
                key: None,
                prefix: None,
            },
        )]),
        headers: std::collections::BTreeMap::from([("Authorization".into(), bearer_reference())]),
    }
}

fn connection_auth_view() -> ConnectionAuthView {
    ConnectionAuthView {
        kind: Some(AuthKind::Oauth),
        scopes: vec!["mcp:tools".into()],
        client_id_env: None,
        client_secret_env: None,
        credential: CredentialHolder::Shared,
        state: AuthState::Authorized,
        authorized_at: Some(at("2026-03-02T09:06:40.118204Z")),
        header: None,
    }
}

fn error_codes() -> Vec<ErrorCode> {
    one_each!(ErrorCode:
        InvalidJson, InvalidRequest, InvalidName, InvalidArguments, InvalidTimeout,
        InvalidConnector, InvalidFilter, InvalidCursor, Unauthenticated, Forbidden,
        WorkspaceNotFound, EnvironmentNotFound,
        ConnectorNotFound, ConnectionNotFound, ProfileNotFound, UserNotFound, CallNotFound,
        ToolNotFound, AmbiguousName, AlreadyExists, ConnectorNotApproved,
        ConnectionNotInProfile, EnvironmentMismatch, DiscoveryFailed, McpRequestConflict,
        McpReplayExpired, PairingNotFound, DeviceNotFound, TokenNotFound, MemberNotFound,
        LastAdmin, DeviceRevoked, RunnerFenced,
        OperationRequired, OperationNotFound, OperationMismatch, McpReconcileConfigChanged,
        McpReconcileNotUnknown, ReceiptPolicyMissing, EvidenceNotFound, ExplanationTooLong,
        CallErased, CallActive, BodyTooLarge, ToolNotGranted, TooManyStreams,
        ConnectionRetired, ConnectorRetired, ProfileRetired, AnswerTooLong, QuotaExceeded,
        PlacementPending, SpecChanged, EndpointBlocked, InvalidNamespace, DiscoveryPending,
        ApprovalUnavailable, ApprovalNotFound, ApprovalDecided, SelfApproval,
        ToolUnclassified, ToolUnavailable, HandshakeFailed, InvalidCredentials,
        CredentialValuesDisabled, ConnectionNotCentral, McpSessionNotFound, AgentNotFound, ConflictingRoutes,
        AuthorizationUnsupported, AuthorizationFailed, AuthorizationStateInvalid, IssuerMismatch,
        VaultNotConfigured, OauthEnvRefused, AuthorizationDeclined,
        Internal,
    )
}

fn api_error() -> ApiError {
    ApiError {
        code: ErrorCode::McpRequestConflict,
        message: "request_id 0195f1a0-0008-7000-8000-000000000001 was used before with \
                  another payload; send a fresh request_id for a new call"
            .into(),
    }
}

fn device_runner() -> String {
    format!("device:{DEVICE}")
}

fn github_spec() -> ConnectorSpec {
    ConnectorSpec::Stdio {
        command: "npx".into(),
        args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
        env: vec!["GITHUB_PERSONAL_ACCESS_TOKEN".into()],
    }
}

fn connector_view() -> ConnectorView {
    ConnectorView {
        id: CONNECTOR,
        name: "github".into(),
        target: ConnectorTarget::Shown(github_spec()),
        revision: 1,
        approved: true,
        created_at: at("2026-03-02T09:02:31.005812Z"),
        retired: None,
    }
}

fn retired_view() -> RetiredView {
    RetiredView {
        at: at("2026-03-09T16:40:02.118204Z"),
        by: Some(ALICE),
    }
}

fn tool_view() -> ToolView {
    ToolView {
        name: "create_issue".into(),
        description: Some("Create a new issue in a GitHub repository".into()),
        input_schema: json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string"},
                "repo": {"type": "string"},
                "title": {"type": "string"},
                "body": {"type": "string"}
            },
            "required": ["owner", "repo", "title"]
        }),
        annotations: Some(json!({"destructiveHint": false, "openWorldHint": true})),
        hints: ToolHints {
            read_only: None,
            destructive: Some(false),
            idempotent: None,
            open_world: Some(true),
        },
        state: ToolState::Classified,
        classification: Some(tool_classification()),
        suggested: ToolClassification {
            side_effect: true,
            risk: Risk::Medium,
        },
        needs_review: true,
        available: true,
        discovered_at: at("2026-03-02T09:05:12.402118Z"),
        retired: false,
    }
}

fn approval_view() -> ApprovalView {
    ApprovalView {
        call_id: CALL,
        workspace_id: WORKSPACE,
        request_id: REQUEST,
        profile_id: PROFILE,
        profile_name: "deploy-bot".into(),
        connection_id: CONNECTION,
        connection_name: "github".into(),
        tool_name: "create_issue".into(),
        arguments: Some(issue_arguments()),
        payload_digest: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        asked_by: ALICE,
        asked_by_name: "alice".into(),
        asked_by_device: None,
        asked_at: at("2026-03-02T10:00:00.000001Z"),
        why: AskReason::HighRisk,
        policy: ApprovalPolicy::Default,
        state: ApprovalState::Declined,
        call_state: CallState::Declined,
        expires_at: Some(at("2026-03-02T11:00:00.000001Z")),
        decided_by: Some(BOB),
        decided_by_name: Some("bob".into()),
        decided_at: Some(at("2026-03-02T10:05:00.000001Z")),
        reason: Some("not on a Friday".into()),
        may_answer: false,
    }
}

fn approval_policy_view() -> ApprovalPolicyView {
    ApprovalPolicyView {
        connection_id: CONNECTION,
        connection_name: "github".into(),
        tool: Some("create_issue".into()),
        policy: ApprovalPolicy::Always,
    }
}

fn tool_classification() -> ToolClassification {
    ToolClassification {
        side_effect: true,
        risk: Risk::Low,
    }
}

fn grant_view() -> GrantView {
    GrantView {
        user_id: BOB,
        user_name: "bob".into(),
        use_: true,
        manage: false,
        share: true,
        approve: true,
    }
}

fn issue_arguments() -> Value {
    json!({
        "owner": "acme",
        "repo": "payments",
        "title": "Payout webhook retries exhausted",
        "body": "Three payouts failed after five retries; see the runbook."
    })
}

fn receipt_arguments() -> Value {
    json!({"owner": "acme", "repo": "payments", "query": "{{request_id}} in:body"})
}

fn lookup_output() -> Value {
    json!({"content": [{"type": "text", "text": "{\"total_count\":0,\"items\":[]}"}]})
}

fn timeout_error() -> CallError {
    CallError {
        code: "timeout".into(),
        message: "no answer within 120 s".into(),
    }
}

/// The call as it was accepted: what a list shows.
fn queued_call() -> CallView {
    CallView {
        id: CALL,
        workspace_id: WORKSPACE,
        request_id: REQUEST,
        profile_id: PROFILE,
        connection_id: CONNECTION,
        environment_id: PROD,
        tool_name: "create_issue".into(),
        client_session_id: Some("triage-7".into()),
        timeout_seconds: 120,
        state: CallState::Queued,
        runner: device_runner(),
        arguments: Some(issue_arguments()),
        result: None,
        result_truncated: false,
        error: None,
        created_at: at("2026-03-02T09:14:05.318204Z"),
        leased_at: None,
        started_at: None,
        finished_at: None,
        cancel_requested_at: None,
        retention_expired_at: None,
        kind: CallKind::Tool,
        parent_call_id: None,
        resolution_outcome: None,
        attempts: Vec::new(),
        observations: Vec::new(),
        resolution: None,
        lineage: None,
        erased_at: None,
    }
}

/// An exclusion that keeps a user-creating tool's secrets out of what is stored.
fn password_exclusion() -> CaptureExclusion {
    CaptureExclusion {
        tool: Some("create_user".into()),
        capture_nothing: false,
        drop_argument_fields: vec!["password".into()],
        drop_result_fields: vec!["api_key".into()],
    }
}

/// A finished call as the history list shows it: no arguments, result or error message.
fn call_summary() -> CallSummary {
    CallSummary {
        id: CALL,
        workspace_id: WORKSPACE,
        request_id: REQUEST,
        profile_id: PROFILE,
        connection_id: CONNECTION,
        environment_id: PROD,
        tool_name: "create_issue".into(),
        kind: CallKind::Tool,
        parent_call_id: None,
        state: CallState::Unknown,
        resolution_outcome: None,
        runner: device_runner(),
        submitted_by: ALICE,
        submitted_by_device: Some(DEVICE),
        error_code: Some("timeout".into()),
        created_at: at("2026-03-02T09:14:05.318204Z"),
        started_at: Some(at("2026-03-02T09:14:06.000001Z")),
        finished_at: Some(at("2026-03-02T09:16:06.5Z")),
        retention_expired_at: None,
        erased_at: None,
    }
}

/// The call after its attempt timed out.
fn unknown_call() -> CallView {
    CallView {
        state: CallState::Unknown,
        error: Some(timeout_error()),
        leased_at: attempt().leased_at,
        started_at: attempt().started_at,
        finished_at: attempt().finished_at,
        ..queued_call()
    }
}

/// The call as one read shows it once a receipt lookup settled it: everything recorded
/// beside the attempt.
fn settled_call() -> CallView {
    CallView {
        state: CallState::Resolved,
        resolution_outcome: Some(ResolutionOutcome::NotApplied),
        attempts: vec![attempt()],
        observations: vec![lookup_observation()],
        resolution: Some(ResolutionView {
            outcome: ResolutionOutcome::NotApplied,
            source: ResolutionSource::Observation,
            observation_id: Some(OBSERVATION),
            source_version_id: None,
            explanation: None,
            explanation_removed_at: None,
            resolved_by: None,
            request_id: None,
            resolved_at: at("2026-03-02T09:24:41.200664Z"),
        }),
        lineage: Some(lineage()),
        ..unknown_call()
    }
}

/// The receipt lookup `reconcile` queued for the unknown call.
fn queued_lookup() -> CallView {
    CallView {
        id: LOOKUP_CALL,
        request_id: LOOKUP_REQUEST,
        tool_name: "search_issues".into(),
        client_session_id: None,
        arguments: Some(json!({
            "owner": "acme",
            "repo": "payments",
            "query": format!("{REQUEST} in:body"),
        })),
        created_at: at("2026-03-02T09:24:40.007130Z"),
        kind: CallKind::Lookup,
        parent_call_id: Some(CALL),
        ..queued_call()
    }
}

fn attempt() -> AttemptView {
    AttemptView {
        runner: device_runner(),
        epoch: Some(4),
        connector_revision: Some(1),
        leased_at: Some(at("2026-03-02T09:14:05.402617Z")),
        started_at: Some(at("2026-03-02T09:14:05.411090Z")),
        finished_at: Some(at("2026-03-02T09:16:05.412355Z")),
        error: Some(timeout_error()),
    }
}

fn lookup_observation() -> ObservationView {
    ObservationView {
        id: OBSERVATION,
        source: ObservationSource::Lookup,
        reported: Reported::NotApplied,
        lookup_call_id: Some(LOOKUP_CALL),
        runner: device_runner(),
        epoch: Some(4),
        output: Some(lookup_output()),
        recorded_at: at("2026-03-02T09:24:41.200664Z"),
        erased_at: None,
    }
}

fn lineage() -> LineageView {
    LineageView {
        lookup_call_ids: vec![LOOKUP_CALL],
        receipt_ids: vec![RECEIPT],
        evidence_ids: vec![EVIDENCE],
    }
}

fn connection_target() -> ConnectionTarget {
    ConnectionTarget {
        connection_id: CONNECTION,
        revision: 2,
        spec: github_spec(),
        accepted_spec_digest: Some(github_spec().digest()),
        auth_kind: Some(AuthKind::Oauth),
    }
}

fn leased_call() -> LeasedCall {
    LeasedCall {
        traceparent: None,
        call_id: CALL,
        request_id: REQUEST,
        epoch: Epoch(4),
        connection: connection_target(),
        tool_name: "create_issue".into(),
        arguments: issue_arguments(),
        timeout_seconds: 120,
        client_session_id: Some("triage-7".into()),
        profile_id: PROFILE,
        submitter: Submitter::User(ALICE),
        kind: CallKind::Tool,
    }
}

fn completions() -> Vec<Completion> {
    let result = json!({
        "content": [{"type": "text", "text": "Created issue #412"}],
        "isError": false
    });
    one_each!(Completion:
        Succeeded => Completion::Succeeded { result },
        ToolError => Completion::ToolError {
            result: json!({
                "content": [{"type": "text", "text": "Validation Failed: title is too long"}],
                "isError": true
            }),
        },
        Failed => Completion::Failed {
            error: CallError {
                code: "spawn_failed".into(),
                message: "npx: command not found".into(),
            },
        },
        Unknown => Completion::Unknown { error: timeout_error() },
    )
}

fn heartbeat() -> Heartbeat {
    Heartbeat {
        epoch: Epoch(4),
        active: vec![CALL],
        outbox: Some(2),
    }
}

fn session_release() -> SessionRelease {
    SessionRelease {
        connection_id: CONNECTION,
        client_session_id: Some("triage-7".into()),
        submitter: Some(Submitter::User(ALICE)),
    }
}

fn heartbeat_answer() -> HeartbeatAnswer {
    HeartbeatAnswer {
        cancel: vec![CALL],
        release: vec![session_release()],
    }
}

fn lease_request() -> LeaseRequest {
    LeaseRequest {
        epoch: Epoch(4),
        max: 8,
        wait_ms: 25_000,
    }
}

fn lease_answer() -> LeaseAnswer {
    LeaseAnswer {
        calls: vec![leased_call()],
    }
}

fn start_answers() -> Vec<StartAnswer> {
    one_each!(StartAnswer:
        Proceed,
        Abandon => StartAnswer::Abandon {
            reason: "the call is no longer leased to this runner".into(),
        },
    )
}

fn complete_request() -> CompleteRequest {
    CompleteRequest {
        receipt_id: RECEIPT,
        epoch: Epoch(4),
        completion: Completion::Unknown {
            error: timeout_error(),
        },
    }
}

fn receipt_ref() -> ReceiptRef {
    ReceiptRef {
        receipt_id: RECEIPT,
        call_id: CALL,
        epoch: Epoch(4),
    }
}

fn start_ref() -> StartRef {
    StartRef {
        call_id: CALL,
        epoch: Epoch(4),
    }
}

fn channel_start() -> ChannelStart {
    ChannelStart {
        call: CALL,
        start: StartRequest { epoch: Epoch(4) },
    }
}

fn channel_complete() -> ChannelComplete {
    ChannelComplete {
        call: CALL,
        receipt: complete_request(),
    }
}

fn channel_error() -> ChannelError {
    ChannelError {
        status: 409,
        code: "runner_fenced".into(),
        message: "epoch 3 is stale: the lease is held under epoch 4".into(),
    }
}

fn channel_calls() -> Vec<ChannelCall> {
    one_each!(ChannelCall:
        Lease => ChannelCall::Lease(lease_request()),
        Heartbeat => ChannelCall::Heartbeat(heartbeat()),
        Start => ChannelCall::Start(channel_start()),
        Complete => ChannelCall::Complete(channel_complete()),
    )
}

fn channel_replies() -> Vec<ChannelReply> {
    one_each!(ChannelReply:
        Lease => ChannelReply::Lease(lease_answer()),
        Heartbeat => ChannelReply::Heartbeat(heartbeat_answer()),
        Start => ChannelReply::Start(StartAnswer::Proceed),
        Complete => ChannelReply::Complete(CompleteAnswer::Recorded),
        Error => ChannelReply::Error(channel_error()),
    )
}

/// The items with the line ids a runner would give them: 1, 2, 3, …
fn numbered<T>(items: Vec<T>) -> impl Iterator<Item = (u64, T)> {
    (1..).zip(items)
}
