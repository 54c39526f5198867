//! The rules destinations, sources and resolved values must follow, whatever the provider.

use super::error::{BindingSite, CredentialError};
use reqwest::header::{HeaderName, HeaderValue};

/// Shortest accepted value, in bytes: anything shorter is a placeholder, not a credential.
const MIN_VALUE_BYTES: usize = 4;
/// Longest accepted value, in bytes.
const MAX_VALUE_BYTES: usize = 16_384;

/// Headers the MCP transport and HTTP itself own: binding them would corrupt or hijack the
/// exchange. Compared ignoring case.
const RESERVED_HEADERS: &[&str] = &[
    "Host",
    "Content-Length",
    "Content-Type",
    "Transfer-Encoding",
    "Connection",
    "Accept",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
];

/// Whether header `name` may not be bound.
pub(super) fn is_reserved_header(name: &str) -> bool {
    RESERVED_HEADERS
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
}

/// Whether `name` is a syntactically valid HTTP header name.
pub(super) fn is_valid_header_name(name: &str) -> bool {
    HeaderName::from_bytes(name.as_bytes()).is_ok()
}

/// Whether `name` is part of the runner's own configuration, which must never be read as a
/// credential and handed to an MCP server.
pub(super) fn is_runner_configuration(name: &str) -> bool {
    name == "DATABASE_URL" || name.starts_with("SWITCHYARD_")
}

/// Whether `prefix` can start an HTTP header value.
pub(super) fn is_valid_prefix(prefix: &str) -> bool {
    HeaderValue::from_str(prefix).is_ok()
}

/// Checks a resolved value for a header and returns the header value (`prefix` + value).
pub(super) fn header_value(
    site: &BindingSite,
    prefix: Option<&str>,
    value: &str,
) -> Result<String, CredentialError> {
    check_value(site, value)?;
    let invalid = |problem| CredentialError::ValueCharacters {
        site: Box::new(site.clone()),
        problem,
    };
    if value.contains(['\r', '\n']) {
        return Err(invalid(
            "contains a CR or LF character, which a header cannot carry",
        ));
    }
    let full = format!("{}{value}", prefix.unwrap_or_default());
    if HeaderValue::from_str(&full).is_err() {
        return Err(invalid(
            "contains a control character, which a header cannot carry",
        ));
    }
    Ok(full)
}

/// The rules every value follows (all an environment value must): 4–16,384 bytes, no NUL.
pub(super) fn check_value(site: &BindingSite, value: &str) -> Result<(), CredentialError> {
    if !(MIN_VALUE_BYTES..=MAX_VALUE_BYTES).contains(&value.len()) {
        return Err(CredentialError::ValueLength {
            site: Box::new(site.clone()),
            length: value.len(),
        });
    }
    if value.contains('\0') {
        return Err(CredentialError::ValueCharacters {
            site: Box::new(site.clone()),
            problem: "contains a NUL byte",
        });
    }
    Ok(())
}
