//! The names a client calls tools by, and the bound on what it reads about them.
//!
//! A name is `namespace__tool` (or the tool's own name) when that fits: only characters of
//! `[A-Za-z0-9_.-]`, at least one, at most [`NAME_BUDGET`]. Otherwise it is shortened to a
//! readable head and a hash of what it names, so the same tool always gets the same name and
//! two tools almost never share one (when they do, the catalog drops both).

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use switchyard_protocol::ids::ConnectionId;

/// Longest name an MCP client accepts.
pub const MAX_NAME: usize = 64;

/// Longest name the catalog gives: below [`MAX_NAME`], so that a client may put its own prefix
/// (`mcp__switchyard__`, a dozen characters) in front.
pub const NAME_BUDGET: usize = 52;

/// Longest description, in characters, the catalog passes on.
pub const MAX_DESCRIPTION: usize = 2_000;

/// Hex digits of the hash that ends a shortened name.
const HASH_DIGITS: usize = 8;

/// What separates a namespace from the tool's own name.
const SEPARATOR: &str = "__";

/// The name a tool is exposed under: `namespace__tool`, or `tool` without prefixing, shortened
/// when it does not fit (see the module doc).
pub(super) fn exposed_name(
    namespace: &str,
    prefix_tools: bool,
    connection: ConnectionId,
    tool: &str,
) -> String {
    let full = if prefix_tools {
        format!("{namespace}{SEPARATOR}{tool}")
    } else {
        tool.to_owned()
    };
    if fits(&full) {
        return full;
    }
    // The head keeps what can be read of the name; the hash tells apart every tool whose
    // head is the same. Both are ASCII, so lengths are characters.
    let head: String = full
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(NAME_BUDGET - 1 - HASH_DIGITS)
        .collect();
    let digest = Sha256::digest(format!("{connection}{tool}").as_bytes());
    let mut name = head;
    name.push('_');
    for byte in digest.iter().take(HASH_DIGITS / 2) {
        let _ = write!(name, "{byte:02x}");
    }
    name
}

/// Whether a name may be given as it is: not empty, within [`NAME_BUDGET`], and only
/// characters of `[A-Za-z0-9_.-]`.
pub(super) fn fits(name: &str) -> bool {
    !name.is_empty() && name.len() <= NAME_BUDGET && name.chars().all(allowed)
}

/// Whether a character may appear in a name.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// A description bounded to [`MAX_DESCRIPTION`] characters: a longer one is cut on a character
/// boundary and ends with `…` (which counts as one of them).
pub(super) fn bound_description(text: &str) -> String {
    match text.char_indices().nth(MAX_DESCRIPTION) {
        None => text.to_owned(),
        Some(_) => {
            let mut cut: String = text.chars().take(MAX_DESCRIPTION - 1).collect();
            cut.push('…');
            cut
        }
    }
}
