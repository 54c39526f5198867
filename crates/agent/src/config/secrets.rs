//! Finding secrets written into the file: every string in the document is checked before it
//! is read as configuration, so a token pasted in by mistake is refused with its position
//! whatever key it sits under — even a key the file may not have.

use super::Issue;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The literal secrets in a document: where each is, and the literals themselves (so that no
/// other message about the file repeats one).
pub(super) struct Found {
    /// One issue per secret, naming its key, never its value.
    pub issues: Vec<Issue>,
    /// The secrets as written.
    pub literals: Vec<String>,
}

/// Every literal secret in `table`, with where it is.
pub(super) fn literal_secrets(text: &str, table: &DeTable<'_>) -> Found {
    let mut found = Found {
        issues: Vec::new(),
        literals: Vec::new(),
    };
    walk_table(text, table, &mut Vec::new(), &mut found);
    found
}

fn walk_table<'t>(text: &str, table: &'t DeTable<'_>, path: &mut Vec<&'t str>, found: &mut Found) {
    for (key, value) in table {
        path.push(key.get_ref());
        walk_value(text, value, path, found);
        path.pop();
    }
}

fn walk_value<'t>(
    text: &str,
    value: &'t Spanned<DeValue<'_>>,
    path: &mut Vec<&'t str>,
    found: &mut Found,
) {
    match value.get_ref() {
        DeValue::String(literal) => {
            if let Some(why) = why_secret(path.last().copied().unwrap_or(""), literal) {
                found.literals.push(literal.to_string());
                found.issues.push(Issue::at(
                    text,
                    value.span().start,
                    format!(
                        "`{}` holds {why}: the file keeps names and references, never secrets; \
                         point at the value instead (e.g. \"env:NAME\")",
                        path.join(".")
                    ),
                ));
            }
        }
        DeValue::Array(items) => {
            for item in items {
                walk_value(text, item, path, found);
            }
        }
        DeValue::Table(table) => walk_table(text, table, path, found),
        DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) | DeValue::Datetime(_) => {}
    }
}

/// Whether a reference (`env:NAME`, `keyring:ACCOUNT`, `file:KEY`, `stored`) rather than a
/// value.
pub(super) fn is_reference(literal: &str) -> bool {
    literal == super::STORED_REFERENCE
        || ["env:", "keyring:", "file:"].iter().any(|scheme| {
            literal.strip_prefix(scheme).is_some_and(|name| {
                !name.is_empty()
                    && name.len() <= 128
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            })
        })
}

/// Key names whose literal string values are secrets (the `*_env` keys name variables).
const SECRET_KEYS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "private_key",
    "access_key",
    "client_secret",
    "access_token",
    "refresh_token",
    "bearer",
];

/// Prefixes that well-known issuers put on their tokens and keys.
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "npm_",
    "pypi-",
    "shpat_",
    "sntrys_",
    "lin_api_",
];

/// Why `literal` under `key` is a secret, or `None`.
fn why_secret(key: &str, literal: &str) -> Option<&'static str> {
    if is_reference(literal) {
        return None;
    }
    let key = key.to_ascii_lowercase();
    if !key.ends_with("_env") && SECRET_KEYS.iter().any(|k| key.contains(k)) {
        return Some("a literal secret");
    }
    let value = literal.trim();
    if value.contains("-----BEGIN") {
        return Some("a key (PEM)");
    }
    if value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("Basic "))
        .is_some_and(|rest| !rest.trim().is_empty())
    {
        return Some("a literal credential (an Authorization value)");
    }
    if TOKEN_PREFIXES.iter().any(|prefix| {
        value
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.len() >= 12 && rest.bytes().all(is_token_byte))
    }) {
        return Some("a token-shaped value");
    }
    if is_jwt(value) {
        return Some("a token-shaped value (a JWT)");
    }
    if url_has_secret(value) {
        return Some("a URL carrying a password or token");
    }
    if is_random_key(value) {
        return Some("a key-shaped value");
    }
    None
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-".contains(&b)
}

/// `eyJ…`.`…`.`…`: a JSON Web Token.
fn is_jwt(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts[..2].iter().all(|part| part.len() >= 8)
        && parts.iter().all(|part| part.bytes().all(is_token_byte))
}

/// `https://user:pass@host` or a query parameter that names a credential.
fn url_has_secret(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority
        .split_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    {
        return true;
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|pair| {
        let name = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        [
            "token",
            "key",
            "secret",
            "password",
            "api_key",
            "access_token",
            "sig",
        ]
        .contains(&name.as_str())
    })
}

/// A long run of mixed-case letters and digits with nothing a word, path or digest would hold:
/// what generated keys look like (a hex digest, one case only, is not one).
fn is_random_key(value: &str) -> bool {
    value.len() >= 32
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=_-".contains(&b))
        && !value.starts_with('/')
        && value.bytes().any(|b| b.is_ascii_digit())
        && value.bytes().any(|b| b.is_ascii_lowercase())
        && value.bytes().any(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_plain_settings_are_not_secrets() {
        for (key, value) in [
            ("API_TOKEN", "env:GITHUB_TOKEN"),
            ("token", "keyring:github"),
            ("client_secret_env", "LINEAR_CLIENT_SECRET"),
            ("url", "https://mcp.sentry.dev/mcp"),
            ("url", "https://example.com/mcp?tenant=acme"),
            ("command", "npx"),
            ("args", "@modelcontextprotocol/server-github"),
            (
                "args",
                "--sha256=0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
            ("header", "Authorization"),
            ("credential", "shared"),
            ("include", "issues_*"),
        ] {
            assert_eq!(why_secret(key, value), None, "{key} = {value}");
        }
    }

    #[test]
    fn tokens_keys_and_passwords_are_secrets_whatever_their_key() {
        for (key, value) in [
            ("token", "abc"),
            ("password", "hunter22"),
            ("api_key", "anything"),
            ("args", "ghp_0123456789abcdefABCDEF0123456789"),
            ("args", "sk-proj-0123456789abcdefghij"),
            ("args", "xoxb-1234567890-abcdefghijkl"),
            ("args", "AKIAIOSFODNN7EXAMPLE"),
            (
                "args",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",
            ),
            ("header", "Bearer 0123456789"),
            ("url", "https://me:pa55@example.com/mcp"),
            ("url", "https://example.com/mcp?api_key=abc"),
            ("args", "q8ZrT3mW9xLp2VbN7cKd4FgH6jS1aYe0"),
            ("args", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ] {
            assert!(why_secret(key, value).is_some(), "{key} = {value}");
        }
    }
}
