//! Building a statement from shared fragments: each parameter is declared by name, numbered
//! by [`Params`] in the order it is declared, and bound in that same order, so no fragment
//! counts parameters by hand and none can shift another's.

use sqlx::AssertSqlSafe;
use std::sync::Arc;

/// The parameters of a statement being built.
#[derive(Debug, Default)]
pub(super) struct Params(usize);

impl Params {
    /// The next parameter's placeholder (`$1`, `$2`, …). Bind the values in the order the
    /// placeholders were taken.
    pub(super) fn next(&mut self) -> String {
        self.0 += 1;
        format!("${}", self.0)
    }
}

/// A statement's text, built once from constant fragments (never from input).
pub(super) type Text = AssertSqlSafe<Arc<str>>;

/// `text` as a statement to run.
pub(super) fn text(text: &Arc<str>) -> Text {
    AssertSqlSafe(Arc::clone(text))
}
