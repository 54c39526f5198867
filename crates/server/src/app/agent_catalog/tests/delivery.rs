//! Tables of how offered tools reach the client: listed or deferred, `tool_search`, and the
//! provider menu.

use super::*;

/// A deferred connection's tools go behind search; `defer_all` sends every tool there; both
/// are found by name.
#[test]
fn deferred_tools_are_not_listed_but_callable() {
    let make = |defer_all: bool| {
        let mut jira = connection(2, "jira", vec![tool("create_issue")]);
        jira.settings.defer = true;
        Catalog::build(CatalogInput {
            connections: vec![connection(1, "github", vec![tool("search")]), jira],
            defer_all,
        })
    };
    let some = make(false);
    assert_eq!(listed(&some), ["github__search"]);
    assert_eq!(deferred(&some), ["jira__create_issue"]);
    assert!(some.offers_search());
    let found = some
        .lookup("jira__create_issue")
        .expect("a deferred tool is callable");
    assert!(found.deferred);
    assert!(!some.lookup("github__search").expect("listed").deferred);

    let plain = catalog(vec![connection(1, "github", vec![tool("search")])]);
    assert!(!plain.offers_search());
    let mut down = connection(1, "github", vec![tool("search")]);
    down.settings.defer = true;
    down.availability = Availability::Unavailable(UnavailableReason::Unreachable);
    assert!(
        catalog(vec![down]).offers_search(),
        "a search says it is down"
    );

    let all = make(true);
    assert!(listed(&all).is_empty());
    assert_eq!(deferred(&all), ["github__search", "jira__create_issue"]);
}

/// A name nobody offers is unknown; a removed tool's name is refused with its reason; an
/// unavailable connection's with why it is unavailable.
#[test]
fn lookup_refuses_what_is_not_offered() {
    let mut ungranted = tool("delete_repo");
    ungranted.granted = false;
    let mut down = connection(2, "jira", vec![tool("create_issue")]);
    down.availability = Availability::Unavailable(UnavailableReason::NeedsAuthorization);
    let catalog = catalog(vec![connection(1, "github", vec![ungranted]), down]);
    assert_eq!(
        catalog.lookup("github__nothing"),
        Err(CallRefusal::UnknownTool {
            name: "github__nothing".to_owned()
        })
    );
    assert_eq!(
        catalog.lookup("github__delete_repo"),
        Err(CallRefusal::Denied {
            namespace: "github".to_owned(),
            tool: "delete_repo".to_owned(),
            reason: DropReason::NotGranted,
        })
    );
    assert_eq!(
        catalog.lookup("jira__create_issue"),
        Err(CallRefusal::Provider(ProviderError::Unavailable {
            namespace: "jira".to_owned(),
            reason: UnavailableReason::NeedsAuthorization,
        }))
    );
}

/// The catalog a search runs over: deferred tools of two connections, one listed connection,
/// one removed deferred tool, one connection down.
fn searchable() -> Catalog {
    let mut secret = described("delete_issue", "Delete an issue for good.");
    secret.granted = false;
    let mut jira = connection(
        2,
        "jira",
        vec![
            described("create_issue", "Create an issue in a project."),
            described("search_issues", "Find issues with JQL."),
            described("add_comment", "Comment on an issue."),
            secret,
        ],
    );
    jira.settings.defer = true;
    let mut wiki = connection(
        3,
        "wiki",
        vec![described("page_get", "Read a page. Mentions ISSUE once.")],
    );
    wiki.settings.defer = true;
    let mut down = connection(4, "slack", vec![tool("post_message")]);
    down.settings.defer = true;
    down.availability = Availability::Unavailable(UnavailableReason::Unreachable);
    let github = connection(
        1,
        "github",
        vec![described("create_issue", "Create a GitHub issue.")],
    );
    catalog(vec![github, jira, wiki, down])
}

/// Tokens score over names and descriptions, case-insensitively; ties go by name; only
/// deferred, offered tools are searched, and the answer says how many and who is down.
#[test]
fn search_scores_names_then_descriptions() {
    let catalog = searchable();
    let names = |query: &str, limit: Option<usize>| -> Vec<String> {
        let answer = catalog.search(query, limit);
        answer.hits.iter().map(|hit| hit.name.to_owned()).collect()
    };
    // `issue` is a word of one name (4, and 1 for its description), part of another (2 + 1),
    // and in two descriptions only (1 each, tied, so by name).
    assert_eq!(
        names("Issue", None),
        [
            "jira__create_issue",
            "jira__search_issues",
            "jira__add_comment",
            "wiki__page_get"
        ]
    );
    assert_eq!(names("CREATE issue", None)[0], "jira__create_issue");
    assert_eq!(names("jql", None), ["jira__search_issues"]);
    assert!(
        names("delete", None).is_empty(),
        "a removed tool is never a hit"
    );
    assert!(
        names("github", None).is_empty(),
        "listed tools are not searched"
    );
    assert!(names("nothing matches", None).is_empty());
    assert_eq!(names("issue", Some(1)), ["jira__create_issue"]);
    assert_eq!(
        names("issue", Some(0)),
        ["jira__create_issue"],
        "a limit is at least 1"
    );
    // No tokens: every deferred tool, by name.
    assert_eq!(
        names("  --  ", None),
        [
            "jira__add_comment",
            "jira__create_issue",
            "jira__search_issues",
            "wiki__page_get"
        ]
    );

    let answer = catalog.search("issue", None);
    assert_eq!(answer.searched, 4);
    let hit = &answer.hits[0];
    assert_eq!(
        (hit.namespace, hit.description),
        ("jira", Some("Create an issue in a project."))
    );
    assert_eq!(
        answer.unavailable,
        [UnavailableConnection {
            namespace: "slack",
            reason: UnavailableReason::Unreachable
        }]
    );
}

/// At most 10 hits by default and 50 whatever is asked.
#[test]
fn search_limits_hits() {
    let tools = (0..60)
        .map(|i| described(&format!("tool_{i:02}"), "same words"))
        .collect();
    let mut many = connection(1, "many", tools);
    many.settings.defer = true;
    let catalog = catalog(vec![many]);
    let answer = catalog.search("same", None);
    assert_eq!(
        (answer.hits.len(), answer.searched),
        (DEFAULT_SEARCH_LIMIT, 60)
    );
    assert_eq!(answer.hits[0].name, "many__tool_00", "ties go by name");
    assert_eq!(
        catalog.search("same", Some(500)).hits.len(),
        MAX_SEARCH_LIMIT
    );
}

/// Providers are the connections that answered, by namespace, at most 50, with how many of
/// their classified tools the principal may call.
#[test]
fn providers_are_the_answered_connections() {
    let mut ungranted = tool("delete_repo");
    ungranted.granted = false;
    let mut unclassified = tool("new_tool");
    unclassified.state = ToolState::Unclassified;
    let mut down = connection(3, "slack", vec![tool("post")]);
    down.availability = Availability::Unavailable(UnavailableReason::Unreachable);
    let catalog = catalog(vec![
        connection(2, "jira", vec![tool("create_issue")]),
        connection(1, "github", vec![tool("search"), ungranted, unclassified]),
        down,
    ]);
    let list = catalog.providers();
    assert_eq!(list.total, 2);
    let summary: Vec<(&str, usize, usize)> = list
        .providers
        .iter()
        .map(|p| (p.namespace.as_str(), p.tools, p.granted))
        .collect();
    assert_eq!(summary, [("github", 2, 1), ("jira", 1, 1)]);

    let crowd = (0..60)
        .map(|i| connection(100 + i, &format!("ns{i:02}"), vec![]))
        .collect();
    let crowded = super::catalog(crowd);
    let list = crowded.providers();
    assert_eq!((list.providers.len(), list.total), (MAX_PROVIDERS, 60));
}

/// A provider is named by id, or by name or namespace in any case; two matches are
/// ambiguous, none is not found, a connection that did not answer is unavailable.
#[test]
fn providers_resolve_by_id_name_or_namespace() {
    let mut twin = connection(2, "gh_enterprise", vec![tool("search")]);
    twin.name = "GitHub".to_owned();
    let mut other = connection(3, "github_two", vec![tool("search")]);
    other.name = "GitHub".to_owned();
    let mut down = connection(4, "slack", vec![tool("post")]);
    down.availability = Availability::Unavailable(UnavailableReason::NeedsAuthorization);
    let catalog = catalog(vec![
        connection(1, "github", vec![tool("search")]),
        twin,
        other,
        down,
    ]);
    let resolved = |provider: &str| {
        catalog
            .capabilities(provider, None, None)
            .map(|p| p.provider.namespace)
    };
    assert_eq!(resolved(&id(2).to_string()), Ok("gh_enterprise".to_owned()));
    assert_eq!(resolved("GH_Enterprise"), Ok("gh_enterprise".to_owned()));
    assert_eq!(resolved("github server"), Ok("github".to_owned()));
    assert_eq!(
        resolved("github"),
        Err(ProviderError::Ambiguous {
            provider: "github".to_owned(),
            matches: vec![
                "gh_enterprise".to_owned(),
                "github".to_owned(),
                "github_two".to_owned()
            ],
        }),
        "`github` is one namespace and two names"
    );
    assert_eq!(
        resolved("gitlab"),
        Err(ProviderError::NotFound {
            provider: "gitlab".to_owned()
        })
    );
    assert_eq!(
        resolved("Slack"),
        Err(ProviderError::Unavailable {
            namespace: "slack".to_owned(),
            reason: UnavailableReason::NeedsAuthorization
        })
    );
}

/// Pages of 12 by default, at most 20; every classified tool shown, the ones the principal
/// may not call with `granted: false` and why.
#[test]
fn capabilities_come_in_pages_and_show_ungranted_tools() {
    let mut tools: Vec<ToolInput> = (0..30).map(|i| tool(&format!("t{i:02}"))).collect();
    tools[1].granted = false;
    tools[2].state = ToolState::Unclassified;
    let mut big = connection(1, "big", tools);
    big.settings.exclude = vec!["t03".to_owned()];
    let catalog = catalog(vec![big]);

    let first = catalog.capabilities("big", None, None).expect("found");
    assert_eq!(
        (first.page, first.page_size, first.next_page),
        (1, DEFAULT_PAGE_SIZE, Some(2))
    );
    assert_eq!(
        first.provider.tools, 29,
        "the unclassified tool is not shown"
    );
    let shown: Vec<(&str, bool, Option<&str>)> = first
        .tools
        .iter()
        .take(3)
        .map(|t| (t.name, t.granted, t.reason.map(DropReason::as_str)))
        .collect();
    assert_eq!(
        shown,
        [
            ("t00", true, None),
            ("t01", false, Some("not_granted")),
            ("t03", false, Some("excluded"))
        ]
    );

    let last = catalog.capabilities("big", Some(3), None).expect("found");
    assert_eq!((last.tools.len(), last.next_page), (5, None));
    let wide = catalog
        .capabilities("big", Some(0), Some(100))
        .expect("found");
    assert_eq!(
        (wide.page, wide.tools.len(), wide.next_page),
        (1, MAX_PAGE_SIZE, Some(2))
    );
    let beyond = catalog.capabilities("big", Some(9), None).expect("found");
    assert!(beyond.tools.is_empty() && beyond.next_page.is_none());
}

/// `mcp_call` takes an exact provider and tool, checks the grant again, and is refused the
/// same way a call by name is; a name collision refuses nothing in the menu.
#[test]
fn mcp_call_resolves_only_permitted_tools() {
    let mut ungranted = tool("delete_repo");
    ungranted.granted = false;
    let mut a = connection(1, "alpha", vec![tool("search"), ungranted]);
    a.prefix_tools = false;
    let mut b = connection(2, "beta", vec![tool("search")]);
    b.prefix_tools = false;
    let catalog = catalog(vec![a, b]);

    let route = catalog.mcp_call("alpha", "search").expect("permitted");
    assert_eq!(
        (route.connection_id, route.tool.as_str()),
        (id(1), "search")
    );
    assert_eq!(
        catalog.mcp_call("alpha", "delete_repo"),
        Err(CallRefusal::Denied {
            namespace: "alpha".to_owned(),
            tool: "delete_repo".to_owned(),
            reason: DropReason::NotGranted,
        })
    );
    assert_eq!(
        catalog.mcp_call("alpha", "delete_repo"),
        catalog.lookup("delete_repo")
    );
    assert_eq!(
        catalog.mcp_call("alpha", "SEARCH"),
        Err(CallRefusal::UnknownTool {
            name: "SEARCH".to_owned()
        }),
        "the tool's name is exact"
    );
    assert!(matches!(
        catalog.mcp_call("gamma", "search"),
        Err(CallRefusal::Provider(ProviderError::NotFound { .. }))
    ));
}
