//! Redaction of resolved secret values from everything a call leaves behind.
//!
//! A [`Redactor`] is built from one [`SessionLaunch`]: every environment value and header value,
//! and for a header value with a scheme prefix (`Bearer xyz`) also the part after the prefix.
//! It replaces every exact occurrence of any of them with [`REDACTED`]: in text, in every string
//! of a JSON value (object keys included) and in a [`Completion`].
//!
//! Occurrences are found first and replaced together, overlapping ones merged, so that two
//! secrets sharing characters never leave a fragment of either behind.

use crate::launch::SessionLaunch;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use switchyard_protocol::runner::Completion;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest part after a header scheme prefix that is redacted on its own: shorter parts
/// are too likely to be ordinary text, and the whole header value is redacted anyway.
const MIN_PREFIXED_PART: usize = 4;

/// The secret values of one launch, ready to be removed from text and JSON.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Distinct, non-empty values.
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The values are the secrets themselves.
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for the given secret values; empty values are ignored.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|secret| !secret.is_empty())
            .collect();
        secrets.sort_unstable();
        secrets.dedup();
        Self { secrets }
    }

    /// A redactor for every resolved value of `launch`: all environment values, all header
    /// values, and the part of a header value after its scheme prefix (`Bearer `, `Basic `…)
    /// when that part is at least four bytes long.
    pub fn for_launch(launch: &SessionLaunch) -> Self {
        let env = launch.env.iter().map(|(_, value)| value.clone());
        let headers = launch.headers.iter().flat_map(|(_, value)| {
            let after_prefix = value
                .split_once(' ')
                .map(|(_, rest)| rest.trim_start())
                .filter(|rest| rest.len() >= MIN_PREFIXED_PART)
                .map(str::to_owned);
            std::iter::once(value.clone()).chain(after_prefix)
        });
        Self::new(env.chain(headers))
    }

    /// `text` with every occurrence of every secret replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for secret in &self.secrets {
            let mut from = 0;
            while let Some(found) = text[from..].find(secret.as_str()) {
                let start = from + found;
                spans.push((start, start + secret.len()));
                // Step one character, not the whole match, so overlapping occurrences of the
                // same secret are found too.
                from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_unstable();
        let mut redacted = String::with_capacity(text.len());
        let mut copied = 0;
        let mut spans = spans.into_iter().peekable();
        while let Some((start, mut end)) = spans.next() {
            // Merge every span that overlaps or touches this one.
            while let Some(&(next_start, next_end)) = spans.peek() {
                if next_start > end {
                    break;
                }
                end = end.max(next_end);
                spans.next();
            }
            redacted.push_str(&text[copied..start]);
            redacted.push_str(REDACTED);
            copied = end;
        }
        redacted.push_str(&text[copied..]);
        Cow::Owned(redacted)
    }

    /// `value` with every string redacted, object keys included. A number whose text holds a
    /// secret becomes the string [`REDACTED`].
    pub fn redact_json(&self, value: Value) -> Value {
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(text) => Value::String(self.redact_owned(text)),
            Value::Number(number) => {
                let text = number.to_string();
                match self.redact(&text) {
                    Cow::Borrowed(_) => Value::Number(number),
                    Cow::Owned(_) => Value::String(REDACTED.to_owned()),
                }
            }
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|item| self.redact_json(item))
                    .collect(),
            ),
            Value::Object(object) => {
                // Two keys that redact to the same text collapse into one; the secret is gone
                // either way.
                let object: Map<String, Value> = object
                    .into_iter()
                    .map(|(key, value)| (self.redact_owned(key), self.redact_json(value)))
                    .collect();
                Value::Object(object)
            }
            other @ (Value::Null | Value::Bool(_)) => other,
        }
    }

    /// `completion` with its result JSON or its error message redacted.
    pub fn redact_completion(&self, completion: Completion) -> Completion {
        match completion {
            Completion::Succeeded { result } => Completion::Succeeded {
                result: self.redact_json(result),
            },
            Completion::ToolError { result } => Completion::ToolError {
                result: self.redact_json(result),
            },
            Completion::Failed { mut error } => {
                error.message = self.redact_owned(error.message);
                Completion::Failed { error }
            }
            Completion::Unknown { mut error } => {
                error.message = self.redact_owned(error.message);
                Completion::Unknown { error }
            }
        }
    }

    /// Like [`Redactor::redact`], keeping the allocation when nothing matched.
    fn redact_owned(&self, text: String) -> String {
        match self.redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }
}

/// The end of a process's stderr, redacted, for a log line or an error message: at most
/// `limit` bytes, cut at a line start when one is near. Redaction comes first, so a secret
/// cut by the limit cannot leave a fragment behind.
pub fn stderr_excerpt(redactor: &Redactor, tail: &str, limit: usize) -> String {
    let redacted = redactor.redact(tail);
    let text = redacted.trim_end();
    let mut start = text.len().saturating_sub(limit);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let excerpt = &text[start..];
    // Drop a partial first line, unless it is all there is.
    let cut_mid_line = start > 0 && text.as_bytes()[start - 1] != b'\n';
    let excerpt = match excerpt.find('\n') {
        Some(newline) if cut_mid_line => &excerpt[newline + 1..],
        _ => excerpt,
    };
    excerpt.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_protocol::api::{CallError, ConnectorSpec};

    fn redactor(secrets: &[&str]) -> Redactor {
        Redactor::new(secrets.iter().map(|secret| (*secret).to_owned()))
    }

    #[test]
    fn replaces_every_occurrence() {
        let redactor = redactor(&["hunter22"]);
        assert_eq!(
            redactor.redact("a hunter22 b hunter22hunter22"),
            "a [REDACTED] b [REDACTED]"
        );
    }

    #[test]
    fn text_without_secrets_is_borrowed_unchanged() {
        let redactor = redactor(&["hunter22"]);
        assert!(matches!(
            redactor.redact("nothing here"),
            Cow::Borrowed("nothing here")
        ));
    }

    #[test]
    fn overlapping_secrets_leave_no_fragment() {
        let redactor = redactor(&["abcdef", "defghi"]);
        assert_eq!(redactor.redact("xxabcdefghixx"), "xx[REDACTED]xx");
        let redactor = self::redactor(&["aaaa"]);
        assert_eq!(redactor.redact("aaaaa b"), "[REDACTED] b");
    }

    #[test]
    fn multibyte_text_is_handled_at_character_boundaries() {
        let redactor = redactor(&["clé-secrète"]);
        assert_eq!(redactor.redact("é clé-secrète é"), "é [REDACTED] é");
    }

    #[test]
    fn a_launch_contributes_env_values_header_values_and_prefixed_parts() {
        let launch = SessionLaunch {
            spec: ConnectorSpec::Http {
                url: "https://mcp.example/mcp".to_owned(),
            },
            env: vec![("API_KEY".to_owned(), "env-secret-1".to_owned())],
            headers: vec![
                ("Authorization".to_owned(), "Bearer tok-1234".to_owned()),
                ("X-Short".to_owned(), "Bearer abc".to_owned()),
            ],
        };
        let redactor = Redactor::for_launch(&launch);

        assert_eq!(
            redactor.redact("env-secret-1 / Bearer tok-1234 / tok-1234 / abc / Bearer abc"),
            "[REDACTED] / [REDACTED] / [REDACTED] / abc / [REDACTED]"
        );
    }

    #[test]
    fn json_strings_keys_and_numbers_are_redacted_recursively() {
        let redactor = redactor(&["s3cr3t", "424242"]);
        let value = json!({
            "content": [{ "type": "text", "text": "token=s3cr3t" }],
            "s3cr3t": { "nested": ["s3cr3t", 424242, 7, true, null] },
        });

        assert_eq!(
            redactor.redact_json(value),
            json!({
                "content": [{ "type": "text", "text": "token=[REDACTED]" }],
                "[REDACTED]": { "nested": ["[REDACTED]", "[REDACTED]", 7, true, null] },
            })
        );
    }

    #[test]
    fn completions_are_redacted_in_results_and_error_messages() {
        let redactor = redactor(&["s3cr3t"]);
        let succeeded = Completion::Succeeded {
            result: json!({ "content": [{ "type": "text", "text": "s3cr3t" }] }),
        };
        let unknown = Completion::Unknown {
            error: CallError {
                code: "transport_closed".to_owned(),
                message: "died saying s3cr3t".to_owned(),
            },
        };

        assert_eq!(
            redactor.redact_completion(succeeded),
            Completion::Succeeded {
                result: json!({ "content": [{ "type": "text", "text": "[REDACTED]" }] }),
            }
        );
        match redactor.redact_completion(unknown) {
            Completion::Unknown { error } => {
                assert_eq!(error.code, "transport_closed");
                assert_eq!(error.message, "died saying [REDACTED]");
            }
            other => panic!("expected unknown, got {other:?}"),
        }
    }

    #[test]
    fn empty_values_are_ignored_and_debug_hides_values() {
        let redactor = redactor(&["", "visible-secret"]);
        assert_eq!(redactor.redact("abc"), "abc");
        assert!(!format!("{redactor:?}").contains("visible-secret"));
    }

    #[test]
    fn stderr_excerpts_redact_before_cutting() {
        let redactor = redactor(&["0123456789"]);
        let tail = "first line\nkey 0123456789\nlast line\n";

        assert_eq!(
            stderr_excerpt(&redactor, tail, 1000),
            "first line\nkey [REDACTED]\nlast line"
        );
        // A limit that would cut through the secret cannot reveal part of it.
        assert_eq!(
            stderr_excerpt(&redactor, tail, 24),
            "key [REDACTED]\nlast line"
        );
        assert_eq!(stderr_excerpt(&redactor, tail, 4), "line");
    }
}
