//! Validation of user-chosen names and canonical JSON for idempotency digests.

use crate::error::{AppError, AppResult};
use serde_json::Value;
use sha2::{Digest, Sha256};
use switchyard_protocol::ErrorCode;

/// Longest accepted name.
const MAX_NAME: usize = 64;

/// Checks a name for a workspace, environment, connector, connection, profile or user:
/// 1–64 characters from `[A-Za-z0-9._-]`, starting with a letter or digit, and not a UUID
/// (names and ids share the same path slots).
pub fn validate_name(kind: &str, name: &str) -> AppResult<()> {
    let well_formed = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if !well_formed {
        return Err(AppError::refused(
            ErrorCode::InvalidName,
            format!(
                "{kind} name `{name}` is not valid: use 1–{MAX_NAME} characters from A–Z, a–z, 0–9, `.`, `_`, `-`, starting with a letter or digit"
            ),
        ));
    }
    if uuid::Uuid::parse_str(name).is_ok() {
        return Err(AppError::refused(
            ErrorCode::InvalidName,
            format!("{kind} name `{name}` looks like a UUID; choose a name that does not"),
        ));
    }
    Ok(())
}

/// Shortest and longest namespace slug.
const NAMESPACE_LEN: std::ops::RangeInclusive<usize> = 2..=24;

/// Checks a connection's namespace slug: 2–24 characters of `[a-z0-9_]`.
pub fn validate_namespace(namespace: &str) -> AppResult<()> {
    let well_formed = NAMESPACE_LEN.contains(&namespace.len())
        && namespace
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if well_formed {
        return Ok(());
    }
    Err(AppError::refused(
        ErrorCode::InvalidNamespace,
        format!(
            "namespace `{namespace}` is not valid: use 2–24 characters from a–z, 0–9 and `_` \
             (e.g. `{}`), or leave it out to derive one from the name",
            derive_namespace(namespace)
        ),
    ))
}

/// The namespace derived from a connection's name, as migration 0021 derives it: lower-cased,
/// every run of other characters turned into `_`, cut to 24 characters, padded with `_` to 2.
pub fn derive_namespace(name: &str) -> String {
    let mut slug = String::new();
    let mut replacing = false;
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            slug.push(c);
            replacing = false;
        } else if !replacing {
            slug.push('_');
            replacing = true;
        }
    }
    let mut slug: String = slug.chars().take(*NAMESPACE_LEN.end()).collect();
    while slug.len() < *NAMESPACE_LEN.start() {
        slug.push('_');
    }
    slug
}

/// The first of `base`, `base_2`, `base_3`, … (cut to fit 24 characters) that `taken` does not
/// hold, as migration 0021 de-duplicates.
pub fn free_namespace(base: &str, taken: &[String]) -> String {
    let mut candidate = base.to_owned();
    let mut n = 1u32;
    while taken.contains(&candidate) {
        n += 1;
        let suffix = format!("_{n}");
        let keep = NAMESPACE_LEN.end() - suffix.len();
        candidate = format!("{}{suffix}", &base[..base.len().min(keep)]);
    }
    candidate
}

/// Longest accepted `client_session_id`.
pub const MAX_CLIENT_SESSION_ID: usize = 128;

/// Checks a `client_session_id` (a warm session's key, chosen by the client): 1–128 characters
/// from `[A-Za-z0-9._:-]`, so that it is bounded in memory and safe in logs and pages.
pub fn validate_client_session_id(id: &str) -> AppResult<()> {
    let well_formed = !id.is_empty()
        && id.len() <= MAX_CLIENT_SESSION_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if well_formed {
        return Ok(());
    }
    // Not echoed: what was sent may be long, or meant for a page.
    Err(AppError::refused(
        ErrorCode::InvalidRequest,
        format!(
            "`client_session_id` is not valid ({} characters): use 1–{MAX_CLIENT_SESSION_ID} characters from A–Z, a–z, 0–9, `.`, `_`, `:`, `-`",
            id.chars().count()
        ),
    ))
}

/// Serializes JSON with object keys sorted at every level, so equal values give equal text.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// SHA-256 of the canonical JSON of a value.
pub fn digest(value: &Value) -> Vec<u8> {
    Sha256::digest(canonical_json(value).as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaces_are_checked_derived_and_made_unique() {
        for good in ["gh", "github_prod", "a1_b2", "abcdefghijklmnopqrstuvwx"] {
            assert!(validate_namespace(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a",
            "GitHub",
            "git-hub",
            "git hub",
            "abcdefghijklmnopqrstuvwxy",
            "é_x",
        ] {
            let message = validate_namespace(bad).unwrap_err().to_string();
            assert!(message.contains("2–24 characters"), "{bad}: {message}");
        }
        for (name, derived) in [
            ("GitHub", "github"),
            ("github-prod.eu", "github_prod_eu"),
            ("a", "a_"),
            ("x_-y", "x__y"),
            ("a--..b", "a_b"),
            (
                "a-very-long-connection-name-indeed",
                "a_very_long_connection_n",
            ),
        ] {
            assert_eq!(derive_namespace(name), derived, "{name}");
            assert!(
                validate_namespace(&derive_namespace(name)).is_ok(),
                "{name}"
            );
        }
        let taken = ["github".to_owned(), "github_2".to_owned()];
        assert_eq!(free_namespace("github", &taken), "github_3");
        assert_eq!(free_namespace("gitlab", &taken), "gitlab");
        let long = "abcdefghijklmnopqrstuvwx";
        assert_eq!(
            free_namespace(long, &[long.to_owned()]),
            "abcdefghijklmnopqrstuv_2"
        );
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 1}], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, {"p": 1, "q": 2}]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":"s","y":[1,{"p":1,"q":2}]},"b":1}"#
        );
        assert_ne!(digest(&a), digest(&json!({"b": 2})));
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("workspace", "demo-1.x_y").is_ok());
        for bad in [
            "",
            "-x",
            "a b",
            "a/b",
            &"x".repeat(65),
            "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e",
        ] {
            assert!(validate_name("workspace", bad).is_err(), "{bad:?}");
        }
    }
}
