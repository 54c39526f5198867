//! Tables of rules 1–3: the route, the tool's state and grant, the filter; and the globs.

use super::super::filter::glob_matches;
use super::*;

/// A tool's hints, from `readOnlyHint`, `destructiveHint`, `idempotentHint`.
fn hints(
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
) -> ToolHints {
    ToolHints {
        read_only,
        destructive,
        idempotent,
        open_world: None,
    }
}

/// Settings from the capability keys and the globs.
fn settings(keys: &str, include: &[&str], exclude: &[&str]) -> RouteSettings {
    RouteSettings {
        include: include.iter().map(|g| (*g).to_owned()).collect(),
        exclude: exclude.iter().map(|g| (*g).to_owned()).collect(),
        read_only: keys.contains("ro"),
        non_destructive: keys.contains("nd"),
        idempotent: keys.contains("id"),
        defer: false,
    }
}

/// What happens to one tool on one route: listed, or dropped with a reason code.
fn verdict(connection: ConnectionInput) -> &'static str {
    let catalog = catalog(vec![connection]);
    match (catalog.listed().next(), catalog.dropped()) {
        (Some(_), []) => "listed",
        (None, [one]) => one.reason.as_str(),
        other => panic!("one tool should be listed or dropped, got {other:?}"),
    }
}

/// Each rule removes what it should, explicit hints only, in the documented order.
#[test]
fn filters_apply_in_order() {
    let yes = Some(true);
    let no = Some(false);
    let none = hints(None, None, None);
    let classified = ToolState::Classified;
    // (settings, tool name, hints, state, granted, expected)
    let table: Vec<(RouteSettings, &str, ToolHints, ToolState, bool, &str)> = vec![
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            classified,
            true,
            "listed",
        ),
        // The tool's state, then its grant.
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            ToolState::Unclassified,
            true,
            "unclassified",
        ),
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            ToolState::Unavailable,
            true,
            "unavailable",
        ),
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            ToolState::Retired,
            true,
            "retired",
        ),
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            ToolState::Unclassified,
            false,
            "unclassified",
        ),
        (
            settings("", &[], &[]),
            "get_issue",
            none,
            classified,
            false,
            "not_granted",
        ),
        (
            settings("ro", &["zzz"], &[]),
            "get_issue",
            none,
            classified,
            false,
            "not_granted",
        ),
        // read_only wants readOnlyHint: true.
        (
            settings("ro", &[], &[]),
            "get_issue",
            none,
            classified,
            true,
            "not_read_only",
        ),
        (
            settings("ro", &[], &[]),
            "get_issue",
            hints(no, None, None),
            classified,
            true,
            "not_read_only",
        ),
        (
            settings("ro", &[], &[]),
            "get_issue",
            hints(yes, None, None),
            classified,
            true,
            "listed",
        ),
        // non_destructive wants destructiveHint: false, even of a read-only tool.
        (
            settings("nd", &[], &[]),
            "get_issue",
            none,
            classified,
            true,
            "destructive",
        ),
        (
            settings("nd", &[], &[]),
            "get_issue",
            hints(None, yes, None),
            classified,
            true,
            "destructive",
        ),
        (
            settings("nd", &[], &[]),
            "get_issue",
            hints(yes, None, None),
            classified,
            true,
            "destructive",
        ),
        (
            settings("nd", &[], &[]),
            "get_issue",
            hints(None, no, None),
            classified,
            true,
            "listed",
        ),
        // idempotent wants idempotentHint: true.
        (
            settings("id", &[], &[]),
            "get_issue",
            none,
            classified,
            true,
            "not_idempotent",
        ),
        (
            settings("id", &[], &[]),
            "get_issue",
            hints(None, None, no),
            classified,
            true,
            "not_idempotent",
        ),
        (
            settings("id", &[], &[]),
            "get_issue",
            hints(None, None, yes),
            classified,
            true,
            "listed",
        ),
        // All three keys: the first that fails names the drop.
        (
            settings("ro nd id", &[], &[]),
            "get_issue",
            none,
            classified,
            true,
            "not_read_only",
        ),
        (
            settings("ro nd id", &[], &[]),
            "get_issue",
            hints(yes, None, None),
            classified,
            true,
            "destructive",
        ),
        (
            settings("ro nd id", &[], &[]),
            "get_issue",
            hints(yes, no, None),
            classified,
            true,
            "not_idempotent",
        ),
        (
            settings("ro nd id", &[], &[]),
            "get_issue",
            hints(yes, no, yes),
            classified,
            true,
            "listed",
        ),
        // Include: one glob must match.
        (
            settings("", &["get_*"], &[]),
            "get_issue",
            none,
            classified,
            true,
            "listed",
        ),
        (
            settings("", &["get_*"], &[]),
            "list_issues",
            none,
            classified,
            true,
            "not_included",
        ),
        (
            settings("", &["get_*", "list_*"], &[]),
            "list_issues",
            none,
            classified,
            true,
            "listed",
        ),
        (
            settings("", &["GET_*"], &[]),
            "get_issue",
            none,
            classified,
            true,
            "not_included",
        ),
        // Exclude after include.
        (
            settings("", &[], &["*delete*"]),
            "delete_repo",
            none,
            classified,
            true,
            "excluded",
        ),
        (
            settings("", &[], &["*delete*"]),
            "get_issue",
            none,
            classified,
            true,
            "listed",
        ),
        (
            settings("", &["*"], &["delete_?epo"]),
            "delete_repo",
            none,
            classified,
            true,
            "excluded",
        ),
        (
            settings("", &["get_*"], &["delete_*"]),
            "delete_repo",
            none,
            classified,
            true,
            "not_included",
        ),
        // Capability keys before globs.
        (
            settings("ro", &["zzz"], &["*"]),
            "get_issue",
            none,
            classified,
            true,
            "not_read_only",
        ),
    ];
    for (settings, name, hints, state, granted, expected) in table {
        let mut tool = tool(name);
        tool.hints = hints;
        tool.state = state;
        tool.granted = granted;
        let mut connection = connection(1, "github", vec![tool]);
        connection.settings = settings.clone();
        assert_eq!(
            verdict(connection),
            expected,
            "{name} with {hints:?}, {state}, granted {granted}, under {settings:?}"
        );
    }
}

/// A route in conflict or a connection that did not answer removes every tool, before
/// anything about the tool itself.
#[test]
fn the_route_comes_first() {
    let unanswered = Availability::Unavailable(UnavailableReason::Unreachable);
    let table = [
        (
            false,
            Availability::Answered,
            ToolState::Classified,
            "listed",
        ),
        (
            true,
            Availability::Answered,
            ToolState::Classified,
            "conflicting_routes",
        ),
        (
            false,
            unanswered,
            ToolState::Classified,
            "connection_unavailable",
        ),
        (
            true,
            unanswered,
            ToolState::Unclassified,
            "conflicting_routes",
        ),
        (
            false,
            unanswered,
            ToolState::Unclassified,
            "connection_unavailable",
        ),
    ];
    for (conflicting_routes, availability, state, expected) in table {
        let mut tool = tool("get_issue");
        tool.state = state;
        let mut connection = connection(1, "github", vec![tool]);
        connection.conflicting_routes = conflicting_routes;
        connection.availability = availability;
        assert_eq!(
            verdict(connection),
            expected,
            "conflicting {conflicting_routes}, {availability:?}, {state}"
        );
    }
}

/// Every reason has its own stable code.
#[test]
fn reason_codes_are_stable() {
    let codes: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        codes,
        [
            "conflicting_routes",
            "connection_unavailable",
            "unclassified",
            "unavailable",
            "retired",
            "not_granted",
            "not_read_only",
            "destructive",
            "not_idempotent",
            "not_included",
            "excluded",
            "name_collision",
        ]
    );
}

/// `*` is any run (none too), `?` one character, everything else itself.
#[test]
fn globs_match_whole_names() {
    let table = [
        ("*", "", true),
        ("*", "anything", true),
        ("", "", true),
        ("", "a", false),
        ("get_issue", "get_issue", true),
        ("get_issue", "get_issues", false),
        ("get_*", "get_", true),
        ("get_*", "get_issue", true),
        ("get_*", "list_get_issue", false),
        ("*_issue", "create_issue", true),
        ("*_issue", "create_issues", false),
        ("a*c", "ac", true),
        ("a*c", "abbbc", true),
        ("a*c", "abcd", false),
        ("a**c", "ac", true),
        ("*a*b*", "xaybz", true),
        ("*a*b", "ba", false),
        ("*aab", "aaab", true),
        ("*ab*ab", "abxabyab", true),
        ("?", "", false),
        ("?", "é", true),
        ("a?c", "abc", true),
        ("a?c", "ac", false),
        ("??", "ab", true),
        ("GET_*", "get_issue", false),
        ("*.read", "repo.read", true),
    ];
    for (glob, text, expected) in table {
        assert_eq!(glob_matches(glob, text), expected, "`{glob}` over `{text}`");
    }
}
