//! `tool_search`: a query over the deferred tools' names and descriptions, as discovery read
//! them (no network). Only deferred tools are searched, so a removed tool is never a hit.
//!
//! The query is cut into tokens (runs of letters and digits, lower-cased). Each token scores
//! against each tool: [`WORD_IN_NAME`] when it is a whole word of the tool's exposed name, own
//! name or title, else [`PART_OF_NAME`] when it is part of one, plus [`IN_DESCRIPTION`] when
//! the description holds it. A tool that scores is a hit; hits go by score, then by name. A
//! query without tokens lists the deferred tools by name.

use super::build::Catalog;
use super::{Availability, UnavailableReason};

/// Hits returned when the client gives no limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Most hits returned, whatever the client asks.
pub const MAX_SEARCH_LIMIT: usize = 50;

/// Score of a query token that is a whole word of a tool's name.
const WORD_IN_NAME: u32 = 4;
/// Score of a query token that is part of a word of a tool's name.
const PART_OF_NAME: u32 = 2;
/// Score of a query token found in a tool's description.
const IN_DESCRIPTION: u32 = 1;

/// What `tool_search` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchAnswer<'a> {
    /// The best hits, best first.
    pub hits: Vec<SearchHit<'a>>,
    /// How many tools were searched (every deferred tool).
    pub searched: usize,
    /// Connections that did not answer, whose tools could not be searched.
    pub unavailable: Vec<UnavailableConnection<'a>>,
}

/// One tool a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit<'a> {
    /// The name to give `call_tool`.
    pub name: &'a str,
    /// Its connection's namespace.
    pub namespace: &'a str,
    /// Its bounded description.
    pub description: Option<&'a str>,
}

/// A connection that did not answer, as the client is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnavailableConnection<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Why.
    pub reason: UnavailableReason,
}

impl Catalog {
    /// Searches the deferred tools for `query`, at most `limit` hits ([`DEFAULT_SEARCH_LIMIT`]
    /// when `None`, clamped to 1..=[`MAX_SEARCH_LIMIT`]).
    pub fn search(&self, query: &str, limit: Option<usize>) -> SearchAnswer<'_> {
        let limit = limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT);
        let tokens = words(query);
        let mut scored: Vec<(u32, &super::ExposedTool)> = self
            .deferred()
            .filter_map(|tool| {
                if tokens.is_empty() {
                    return Some((0, tool));
                }
                let score = score(&tokens, tool);
                (score > 0).then_some((score, tool))
            })
            .collect();
        // Names of offered tools are unique, so this order is total.
        scored.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| a.name.cmp(&b.name)));
        SearchAnswer {
            hits: scored
                .into_iter()
                .take(limit)
                .map(|(_, tool)| SearchHit {
                    name: &tool.name,
                    namespace: &tool.namespace,
                    description: tool.description.as_deref(),
                })
                .collect(),
            searched: self.deferred().len(),
            unavailable: self.unavailable().collect(),
        }
    }

    /// The connections that did not answer, by namespace.
    pub fn unavailable(&self) -> impl Iterator<Item = UnavailableConnection<'_>> + '_ {
        self.connections()
            .iter()
            .filter_map(|c| match c.availability {
                Availability::Answered => None,
                Availability::Unavailable(reason) => Some(UnavailableConnection {
                    namespace: &c.namespace,
                    reason,
                }),
            })
    }
}

/// A tool's score for the query's tokens.
fn score(tokens: &[String], tool: &super::ExposedTool) -> u32 {
    let names: Vec<String> = [Some(&tool.name), Some(&tool.tool), tool.title.as_ref()]
        .into_iter()
        .flatten()
        .flat_map(|name| words(name))
        .collect();
    let description = tool
        .description
        .as_deref()
        .map(str::to_lowercase)
        .unwrap_or_default();
    tokens
        .iter()
        .map(|token| {
            let in_name = if names.iter().any(|word| word == token) {
                WORD_IN_NAME
            } else if names.iter().any(|word| word.contains(token.as_str())) {
                PART_OF_NAME
            } else {
                0
            };
            let in_description = if description.contains(token.as_str()) {
                IN_DESCRIPTION
            } else {
                0
            };
            in_name + in_description
        })
        .sum()
}

/// The lower-cased runs of letters and digits of a text (`_`, `-`, `.` and spaces separate).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}
