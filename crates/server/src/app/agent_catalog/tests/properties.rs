//! Properties over any routes, grants and filters: the three ways to call a tool — the menu's
//! `mcp_call`, `call_tool` on a deferred tool, a direct `tools/call` — give one allow/deny
//! answer, the one the rules give; nothing removed is ever offered or found; names fit.

use super::super::filter::glob_matches;
use super::super::names::exposed_name;
use super::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use std::collections::BTreeMap;

/// An annotation hint: absent, true or false.
fn hint() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(None), Just(Some(true)), Just(Some(false))]
}

/// Short names that collide across connections (with and without prefixes), names too long
/// or foreign to keep, and a name the endpoint reserves.
fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[ab]{1,2}(__[ab]{1,2})?",
        1 => "[abé ]{45,60}",
        1 => Just(TOOL_SEARCH.to_owned()),
    ]
}

/// A tool's hints, state and grant, under its name.
fn tools() -> impl Strategy<Value = Vec<ToolInput>> {
    let state = prop_oneof![
        6 => Just(ToolState::Classified),
        1 => Just(ToolState::Unclassified),
        1 => Just(ToolState::Unavailable),
        1 => Just(ToolState::Retired),
    ];
    let body = ((hint(), hint(), hint()), state, prop::bool::weighted(0.8));
    btree_map(tool_name(), body, 0..6).prop_map(|tools| {
        tools
            .into_iter()
            .map(
                |(name, ((read_only, destructive, idempotent), state, granted))| ToolInput {
                    hints: ToolHints {
                        read_only,
                        destructive,
                        idempotent,
                        open_world: None,
                    },
                    state,
                    granted,
                    ..tool(&name)
                },
            )
            .collect()
    })
}

/// A route's settings: a few globs and keys, sometimes deferred.
fn settings() -> impl Strategy<Value = RouteSettings> {
    let glob = select(vec!["*", "a*", "*b", "?", "a?", "?__*", "b"]).prop_map(str::to_owned);
    let key = || prop::bool::weighted(0.2);
    (
        vec(glob.clone(), 0..3),
        vec(glob, 0..2),
        key(),
        key(),
        key(),
        any::<bool>(),
    )
        .prop_map(
            |(include, exclude, read_only, non_destructive, idempotent, defer)| RouteSettings {
                include,
                exclude,
                read_only,
                non_destructive,
                idempotent,
                defer,
            },
        )
}

/// A connection's prefixing, availability, conflict, settings and tools.
type Body = (bool, Availability, bool, RouteSettings, Vec<ToolInput>);

/// A connection without its id and namespace.
fn body() -> impl Strategy<Value = Body> {
    let availability = prop_oneof![
        8 => Just(Availability::Answered),
        1 => Just(Availability::Unavailable(UnavailableReason::Unreachable)),
        1 => Just(Availability::Unavailable(UnavailableReason::NeedsAuthorization)),
    ];
    (
        any::<bool>(),
        availability,
        prop::bool::weighted(0.1),
        settings(),
        tools(),
    )
}

/// One to four connections with distinct namespaces, and the agent's `defer_all`.
fn input() -> impl Strategy<Value = CatalogInput> {
    let namespaces = subsequence(vec!["aa", "ab", "ba", "bb"], 1..=4);
    (namespaces, any::<bool>()).prop_flat_map(|(namespaces, defer_all)| {
        vec(body(), namespaces.len()).prop_map(move |bodies| CatalogInput {
            connections: (1..)
                .zip(&namespaces)
                .zip(bodies)
                .map(|((seed, namespace), body)| {
                    let (prefix_tools, availability, conflicting_routes, settings, tools) = body;
                    ConnectionInput {
                        prefix_tools,
                        availability,
                        conflicting_routes,
                        settings,
                        ..connection(seed, namespace, tools)
                    }
                })
                .collect(),
            defer_all,
        })
    })
}

/// The rules, written again from the module doc: whether the principal may call this tool.
fn permitted(connection: &ConnectionInput, tool: &ToolInput) -> bool {
    let s = &connection.settings;
    let h = &tool.hints;
    !connection.conflicting_routes
        && connection.availability == Availability::Answered
        && tool.state == ToolState::Classified
        && tool.granted
        && (!s.read_only || h.read_only == Some(true))
        && (!s.non_destructive || h.destructive == Some(false))
        && (!s.idempotent || h.idempotent == Some(true))
        && (s.include.is_empty() || s.include.iter().any(|g| glob_matches(g, &tool.name)))
        && !s.exclude.iter().any(|g| glob_matches(g, &tool.name))
}

/// Whether a route resolves to exactly this tool.
fn reaches(
    route: Result<ToolRoute, CallRefusal>,
    connection: &ConnectionInput,
    tool: &ToolInput,
) -> bool {
    route.is_ok_and(|r| r.connection_id == connection.id && r.tool == tool.name)
}

/// The same input with nothing deferred.
fn undeferred(input: &CatalogInput) -> CatalogInput {
    let mut input = input.clone();
    input.defer_all = false;
    for connection in &mut input.connections {
        connection.settings.defer = false;
    }
    input
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// The menu, `call_tool` and a direct `tools/call` agree, and agree with the rules: only a
    /// name shared by two permitted tools (a matter of names, which the menu does not use)
    /// refuses by name what the menu allows.
    #[test]
    fn menu_call_tool_and_direct_call_agree(input in input()) {
        let as_configured = Catalog::build(input.clone());
        let direct = Catalog::build(undeferred(&input));
        let behind_search = Catalog::build(CatalogInput { defer_all: true, ..input.clone() });

        let mut claimants: BTreeMap<String, usize> = BTreeMap::new();
        for c in &input.connections {
            for t in c.tools.iter().filter(|t| permitted(c, t)) {
                *claimants.entry(exposed_name(&c.namespace, c.prefix_tools, c.id, &t.name)).or_default() += 1;
            }
        }
        for c in &input.connections {
            for t in &c.tools {
                let name = exposed_name(&c.namespace, c.prefix_tools, c.id, &t.name);
                let allowed = permitted(c, t);
                let collided = allowed
                    && (claimants[&name] > 1 || RESERVED_NAMES.contains(&name.as_str()));

                let menu = reaches(as_configured.mcp_call(&c.id.to_string(), &t.name), c, t);
                let by_call_tool = behind_search.lookup(&name);
                if let Ok(route) = &by_call_tool {
                    prop_assert!(route.deferred, "{} behind search", name);
                }
                let by_call_tool = reaches(by_call_tool, c, t);
                let by_direct_call = reaches(direct.lookup(&name), c, t);
                let as_configured_by_name = reaches(as_configured.lookup(&name), c, t);

                prop_assert_eq!(menu, allowed, "menu, {}/{}", c.namespace, t.name);
                prop_assert_eq!(by_call_tool, allowed && !collided, "call_tool {}", name);
                prop_assert_eq!(by_direct_call, by_call_tool, "tools/call {}", name);
                prop_assert_eq!(as_configured_by_name, by_call_tool, "as configured {}", name);
                if !collided {
                    prop_assert_eq!(menu, by_direct_call);
                }
            }
        }
    }

    /// What the catalog offers is permitted, uniquely and well named, found by its name,
    /// listed or deferred as configured; a search hit is always an offered deferred tool.
    #[test]
    fn only_permitted_tools_are_offered(input in input(), query in "[ab_ é]{0,6}") {
        let catalog = Catalog::build(input.clone());
        let mut names = std::collections::BTreeSet::new();
        for tool in catalog.listed().chain(catalog.deferred()) {
            let c = input.connections.iter().find(|c| c.id == tool.connection_id).expect("its connection");
            let t = c.tools.iter().find(|t| t.name == tool.tool).expect("its tool");
            prop_assert!(permitted(c, t), "{} is offered", tool.name);
            prop_assert_eq!(tool.deferred, input.defer_all || c.settings.defer);
            prop_assert!(names.insert(tool.name.clone()), "{} twice", tool.name);
            prop_assert!(tool.name.len() <= NAME_BUDGET);
            prop_assert!(tool.name.chars().all(|ch| ch.is_ascii_alphanumeric() || "_.-".contains(ch)));
            let route = catalog.lookup(&tool.name).expect("an offered tool is found");
            prop_assert_eq!((route.connection_id, route.tool.as_str()), (c.id, t.name.as_str()));
        }
        let offered: usize = catalog.connections().iter().map(|c| c.offered).sum();
        prop_assert_eq!(offered + catalog.dropped().len(), input.connections.iter().map(|c| c.tools.len()).sum::<usize>());
        prop_assert_eq!(offered, names.len());

        let answer = catalog.search(&query, Some(MAX_SEARCH_LIMIT));
        prop_assert_eq!(answer.searched, catalog.deferred().len());
        for hit in answer.hits {
            prop_assert!(catalog.deferred().any(|t| t.name == hit.name), "{} is a hit", hit.name);
        }
    }

    /// The order of the input changes nothing, byte for byte.
    #[test]
    fn input_order_changes_nothing(input in input()) {
        let mut reversed = input.clone();
        reversed.connections.reverse();
        for connection in &mut reversed.connections {
            connection.tools.reverse();
        }
        prop_assert_eq!(
            format!("{:?}", Catalog::build(input)),
            format!("{:?}", Catalog::build(reversed))
        );
    }
}
