//! Tables of rule 4 and the output's shape: prefixing, collisions, the name budget, bounded
//! descriptions, order.

use super::*;

/// Whether a name is one every client accepts, within the budget.
fn well_formed(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_BUDGET
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `namespace__tool`, or the tool's own name without prefixing; listed by name.
#[test]
fn names_are_prefixed_unless_turned_off() {
    let mut jira = connection(2, "jira", vec![tool("search"), tool("create_issue")]);
    jira.prefix_tools = false;
    let catalog = catalog(vec![
        connection(1, "github", vec![tool("search"), tool("create_issue")]),
        jira,
    ]);
    assert_eq!(
        listed(&catalog),
        [
            "create_issue",
            "github__create_issue",
            "github__search",
            "search"
        ]
    );
    assert!(catalog.dropped().is_empty());
}

/// The same unprefixed name from two connections: both lose it, nothing else does.
#[test]
fn colliding_names_drop_both() {
    let mut a = connection(1, "alpha", vec![tool("search"), tool("only_alpha")]);
    a.prefix_tools = false;
    let mut b = connection(2, "beta", vec![tool("search"), tool("only_beta")]);
    b.prefix_tools = false;
    let catalog = catalog(vec![a, b]);
    assert_eq!(listed(&catalog), ["only_alpha", "only_beta"]);
    assert_eq!(
        dropped(&catalog),
        [
            ("alpha", "search", "name_collision"),
            ("beta", "search", "name_collision")
        ]
    );
    let refusal = catalog.lookup("search").unwrap_err();
    assert!(
        matches!(
            &refusal,
            CallRefusal::Denied {
                reason: DropReason::NameCollision,
                ..
            }
        ),
        "{refusal:?}"
    );
}

/// A prefixed name can collide with an unprefixed one, and a tool can collide with one of the
/// endpoint's own names.
#[test]
fn any_shared_name_collides() {
    let mut plain = connection(1, "plain", vec![tool("git__status"), tool("tool_search")]);
    plain.prefix_tools = false;
    let catalog = catalog(vec![plain, connection(2, "git", vec![tool("status")])]);
    assert!(listed(&catalog).is_empty());
    assert_eq!(
        dropped(&catalog),
        [
            ("git", "status", "name_collision"),
            ("plain", "git__status", "name_collision"),
            ("plain", "tool_search", "name_collision"),
        ]
    );
}

/// A tool removed by the rules does not take a name away from one that passes them.
#[test]
fn removed_tools_claim_no_name() {
    let mut a = connection(1, "alpha", vec![tool("search")]);
    a.prefix_tools = false;
    let mut b = connection(2, "beta", vec![tool("search")]);
    b.prefix_tools = false;
    b.settings.exclude = vec!["search".to_owned()];
    let catalog = catalog(vec![a, b]);
    assert_eq!(listed(&catalog), ["search"]);
    assert_eq!(dropped(&catalog), [("beta", "search", "excluded")]);
    let route = catalog.lookup("search").expect("alpha's search is offered");
    assert_eq!(
        (route.connection_id, route.tool.as_str()),
        (id(1), "search")
    );
}

/// A name that does not fit is shortened: within the budget, in the alphabet, with a readable
/// head and a hash, the same every time, and it maps back.
#[test]
fn long_or_foreign_names_are_shortened() {
    let long = "a".repeat(60);
    let longer = format!("{long}b");
    let exactly = "x".repeat(NAME_BUDGET - "github__".len());
    let one_over = format!("{exactly}y");
    let table: [(&str, &str); 6] = [
        (&long, "github__aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_"),
        (&longer, "github__aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_"),
        (&exactly, ""),
        (&one_over, "github__xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_"),
        ("créer problème", "github__cr_er_probl_me_"),
        ("repo/read", "github__repo_read_"),
    ];
    let tools = table.iter().map(|(name, _)| tool(name)).collect();
    let catalog = catalog(vec![connection(1, "github", tools)]);
    assert!(catalog.dropped().is_empty(), "{:?}", catalog.dropped());
    for (own, head) in table {
        let exposed = catalog
            .listed()
            .find(|t| t.tool == own)
            .map(|t| t.name.clone())
            .expect("every tool is listed");
        assert!(well_formed(&exposed), "{exposed}");
        if head.is_empty() {
            assert_eq!(
                exposed,
                format!("github__{own}"),
                "a name that fits is kept"
            );
        } else {
            let hash = exposed
                .strip_prefix(head)
                .unwrap_or_else(|| panic!("{exposed} starts with {head}"));
            assert_eq!(hash.len(), 8, "{exposed}");
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{exposed}");
        }
        let route = catalog
            .lookup(&exposed)
            .expect("a shortened name maps back");
        assert_eq!((route.connection_id, route.tool.as_str()), (id(1), own));
    }
    // The same input, the same names.
    let again = Catalog::build(CatalogInput {
        connections: vec![connection(
            1,
            "github",
            table.iter().map(|(n, _)| tool(n)).collect(),
        )],
        defer_all: false,
    });
    assert_eq!(listed(&again), listed(&catalog));
}

/// The hash covers the connection: the same long tool on two unprefixed connections gets two
/// names, and neither collides.
#[test]
fn shortened_names_differ_by_connection() {
    let long = "z".repeat(70);
    let mut a = connection(1, "alpha", vec![tool(&long)]);
    a.prefix_tools = false;
    let mut b = connection(2, "beta", vec![tool(&long)]);
    b.prefix_tools = false;
    let catalog = catalog(vec![a, b]);
    let names = listed(&catalog);
    assert_eq!(names.len(), 2, "{names:?}");
    assert_ne!(names[0], names[1]);
    assert!(names.iter().all(|n| well_formed(n)), "{names:?}");
}

/// Descriptions are cut to 2,000 characters on a character boundary, ending with `…`.
#[test]
fn descriptions_are_bounded() {
    let fits = "d".repeat(MAX_DESCRIPTION);
    let over = "é".repeat(MAX_DESCRIPTION + 500);
    let catalog = catalog(vec![connection(
        1,
        "docs",
        vec![described("fits", &fits), described("over", &over)],
    )]);
    let description = |name: &str| {
        catalog
            .listed()
            .find(|t| t.tool == name)
            .and_then(|t| t.description.clone())
            .expect("described")
    };
    assert_eq!(description("fits"), fits);
    let cut = description("over");
    assert_eq!(cut.chars().count(), MAX_DESCRIPTION);
    assert!(cut.ends_with("é…"), "{}", &cut[cut.len() - 8..]);
}

/// The order of the input changes nothing: the catalog is the same, byte for byte.
#[test]
fn output_is_deterministic() {
    let make = |reverse: bool| {
        let mut connections = vec![
            connection(
                1,
                "github",
                vec![tool("b"), tool("a"), tool(&"q".repeat(80))],
            ),
            connection(2, "jira", vec![tool("c"), described("d", "find issues")]),
            connection(3, "docs", vec![tool("e")]),
        ];
        connections[1].settings.defer = true;
        connections[2].tools[0].granted = false;
        if reverse {
            connections.reverse();
            for c in &mut connections {
                c.tools.reverse();
            }
        }
        catalog(connections)
    };
    assert_eq!(format!("{:?}", make(false)), format!("{:?}", make(true)));
    assert_eq!(
        listed(&make(true)),
        [
            "github__a",
            "github__b",
            "github__qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq_6f0e92e8"
        ]
    );
}
