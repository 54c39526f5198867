//! Local inputs given as `FILE|-`: reading them and checking that they hold one JSON object.
//!
//! Only the shape is checked here (valid JSON, an object); the server validates the content.
//! The bytes are sent on exactly as read, so nothing is reordered or reinterpreted locally.

use crate::error::CliError;
use serde_json::Value;
use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::path::PathBuf;

/// Where a `FILE|-` argument reads from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSource {
    /// `-`: standard input.
    Stdin,
    /// A file path.
    File(PathBuf),
}

impl From<OsString> for InputSource {
    fn from(arg: OsString) -> Self {
        if arg == "-" {
            InputSource::Stdin
        } else {
            InputSource::File(PathBuf::from(arg))
        }
    }
}

impl fmt::Display for InputSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputSource::Stdin => f.write_str("<stdin>"),
            InputSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Reads `source` and checks it is one JSON object; returns the bytes as read.
pub fn read_json_object(source: &InputSource) -> Result<Vec<u8>, CliError> {
    let bytes = match source {
        InputSource::Stdin => {
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).map(|_| bytes)
        }
        InputSource::File(path) => std::fs::read(path),
    }
    .map_err(|source_error| CliError::ReadInput {
        name: source.to_string(),
        source: source_error,
    })?;
    check_json_object(&source.to_string(), &bytes)?;
    Ok(bytes)
}

/// Checks that `bytes` parse as a single JSON object; `name` labels errors.
fn check_json_object(name: &str, bytes: &[u8]) -> Result<(), CliError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|source| CliError::InvalidJson {
        name: name.to_owned(),
        source,
    })?;
    let found = match value {
        Value::Object(_) => return Ok(()),
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    Err(CliError::NotAnObject {
        name: name.to_owned(),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_means_stdin() {
        assert_eq!(InputSource::from(OsString::from("-")), InputSource::Stdin);
        assert_eq!(
            InputSource::from(OsString::from("call.json")),
            InputSource::File(PathBuf::from("call.json"))
        );
        assert_eq!(InputSource::Stdin.to_string(), "<stdin>");
    }

    #[test]
    fn invalid_json_names_file_line_and_column() {
        let err = check_json_object("call.json", b"{\n  \"a\": 1,\n  oops\n}").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("call.json"), "{text}");
        assert!(text.contains("line 3 column 3"), "{text}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn only_objects_are_accepted() {
        assert!(check_json_object("x", br#"{"a": [1]}"#).is_ok());
        let err = check_json_object("x", b"[1, 2]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "error: x: expected a JSON object, found an array"
        );
        assert_eq!(err.exit_code(), 2);
    }
}
