//! `switchyard.toml`: one workspace's MCP servers and agents, declared in a file an operator
//! reviews and keeps in git. The file holds names and references, never secrets.
//!
//! Reading it takes three passes, each reporting every problem it finds with its line and
//! column: [`secrets`] looks at every string for a literal secret, serde reads the
//! [`document`] (unknown keys and wrong types are refused), and [`validate`] checks what the
//! types cannot say. [`desired()`] fills in the defaults: what the workspace should look like.

mod desired;
pub mod document;
mod secrets;
mod validate;

pub use desired::{DeclaredAgent, DeclaredServer, Desired, Placement, Transport, desired};
pub use document::Document;
pub(crate) use validate::is_id;

use std::fmt;
use toml::de::DeTable;

/// The reference to a central connection's value the server keeps sealed with its
/// installation key (set with `switchyard credential set`, never written in the file).
pub const STORED_REFERENCE: &str = "stored";

/// One problem in the file, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Issue {
    /// An issue at byte `offset` of `text`.
    fn at(text: &str, offset: usize, message: String) -> Issue {
        let before = &text[..offset.min(text.len())];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        Issue {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message,
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Reads `text` as a `switchyard.toml`, or says everything wrong with it, in file order.
pub fn parse(text: &str) -> Result<Document, Vec<Issue>> {
    let syntax = |error: toml::de::Error| {
        let offset = error.span().map_or(0, |span| span.start);
        vec![Issue::at(text, offset, error.message().trim().to_owned())]
    };
    let tree = DeTable::parse(text).map_err(syntax)?;
    let secrets = secrets::literal_secrets(text, tree.get_ref());
    // The other passes may quote a value (an unknown enum name, say): never a secret.
    let redacted = |mut issue: Issue| {
        for literal in &secrets.literals {
            issue.message = issue.message.replace(literal.as_str(), "<redacted>");
        }
        issue
    };
    let mut issues = secrets.issues.clone();
    match toml::from_str::<Document>(text) {
        Ok(document) => {
            issues.extend(validate::check(text, &document).into_iter().map(redacted));
            finish(document, issues)
        }
        Err(error) => {
            issues.extend(syntax(error).into_iter().map(redacted));
            Err(sorted(issues))
        }
    }
}

fn finish(document: Document, issues: Vec<Issue>) -> Result<Document, Vec<Issue>> {
    if issues.is_empty() {
        Ok(document)
    } else {
        Err(sorted(issues))
    }
}

fn sorted(mut issues: Vec<Issue>) -> Vec<Issue> {
    issues.sort_by_key(|issue| (issue.line, issue.column));
    issues.dedup();
    issues
}

#[cfg(test)]
mod tests;
