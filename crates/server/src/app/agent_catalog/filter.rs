//! A route's filter over one tool: the capability keys on the server's explicit hints, then
//! the include globs, then the exclude globs. Each step only removes.

use super::{DropReason, RouteSettings};
use switchyard_protocol::api::ToolHints;

/// Whether a tool of this name and hints passes the filter, or the first step that removes it.
pub(super) fn check(
    settings: &RouteSettings,
    name: &str,
    hints: &ToolHints,
) -> Result<(), DropReason> {
    // Only an explicit hint passes a key: a server that says nothing promises nothing.
    if settings.read_only && hints.read_only != Some(true) {
        return Err(DropReason::NotReadOnly);
    }
    if settings.non_destructive && hints.destructive != Some(false) {
        return Err(DropReason::Destructive);
    }
    if settings.idempotent && hints.idempotent != Some(true) {
        return Err(DropReason::NotIdempotent);
    }
    if !settings.include.is_empty() && !settings.include.iter().any(|glob| glob_matches(glob, name))
    {
        return Err(DropReason::NotIncluded);
    }
    if settings.exclude.iter().any(|glob| glob_matches(glob, name)) {
        return Err(DropReason::Excluded);
    }
    Ok(())
}

/// Whether `glob` matches all of `text`: `*` stands for any run of characters (none too), `?`
/// for exactly one, anything else for itself (case-sensitive).
pub(super) fn glob_matches(glob: &str, text: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut g, mut t) = (0, 0);
    // Where the last `*` was, and where in the text its run would end if it took one more:
    // on a mismatch the `*` swallows one more character and matching resumes after it. Linear
    // backtracking suffices because a later `*` can take over whatever an earlier one did.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some('?') => {
                g += 1;
                t += 1;
            }
            Some(&c) if c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((star_g, star_t)) => {
                    g = star_g + 1;
                    t = star_t + 1;
                    star = Some((star_g, star_t + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}
