//! What the CLI prints on stdout: the server's JSON (with `--json`) or short human text.
//!
//! With `--json` the answer is printed exactly as the server sent it — same keys, same order,
//! same numbers — only re-indented. Human text is built from the protocol types by the
//! commands, with the small layout helpers here.

use crate::client::Reply;
use crate::error::CliError;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Short, aligned text for people.
    Human,
    /// The API's JSON, pretty-printed.
    Json,
}

/// Prints results to stdout in the chosen [`Format`].
#[derive(Clone, Copy, Debug)]
pub struct Output {
    format: Format,
}

impl Output {
    /// An output in `format`.
    pub fn new(format: Format) -> Output {
        Output { format }
    }

    /// Whether `--json` was given.
    pub fn is_json(&self) -> bool {
        self.format == Format::Json
    }

    /// Prints `reply`: its JSON with `--json`, otherwise `human` of its parsed body.
    pub fn reply<T: DeserializeOwned>(
        &self,
        reply: &Reply,
        human: impl FnOnce(T) -> String,
    ) -> Result<(), CliError> {
        match self.format {
            Format::Json => print_json(reply),
            Format::Human => print_text(&human(reply.parse()?)),
        }
        Ok(())
    }
}

/// Prints a reply's JSON, re-indented.
pub fn print_json(reply: &Reply) {
    println!("{}", pretty(reply.text()));
}

/// Prints human text, adding the final newline if it is missing; nothing for empty text.
pub fn print_text(text: &str) {
    if text.is_empty() {
        return;
    }
    if text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
}

/// Re-indents valid JSON text (two spaces, `"key": value`) without reordering or rewriting any
/// token, so `--json` shows the server's answer as it was sent.
pub fn pretty(json: &str) -> String {
    fn newline(out: &mut String, depth: usize) {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    }
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.next_if(|c| is_space(*c)).is_some() {}
                // An empty container stays on one line: `{}`, `[]`.
                if let Some(close) = chars.next_if(|c| matches!(c, '}' | ']')) {
                    out.push(close);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if is_space(c) => {}
            c => out.push(c),
        }
    }
    out
}

/// A table with a header row; columns are aligned, the last one is not padded.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<const N: usize>(headers: [&str; N]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row (as many cells as headers).
    pub fn row<const N: usize>(&mut self, cells: [String; N]) {
        self.rows.push(cells.into());
    }

    /// The aligned text, or `empty` when there are no rows.
    pub fn render_or(&self, empty: &str) -> String {
        if self.rows.len() <= 1 {
            return empty.to_owned();
        }
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 < row.len() {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
                } else {
                    line.push_str(cell);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Aligned `key  value` lines.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

/// A timestamp for people: UTC, to the second.
pub fn time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Whether an object is in service (`active`) or retired (`retired <time>`), for a table's
/// STATE column.
pub fn retired_state(retired: Option<&switchyard_protocol::api::RetiredView>) -> String {
    match retired {
        Some(retired) => format!("retired {}", time(&retired.at)),
        None => "active".to_owned(),
    }
}

/// An optional timestamp; `-` when absent.
pub fn opt_time(at: Option<&DateTime<Utc>>) -> String {
    at.map(time).unwrap_or_else(|| "-".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_matches_serde_json_layout_and_keeps_order() {
        // Keys already sorted, so serde_json's (sorted) pretty output is the reference.
        let compact = r#"{"a":[1,{"b":"x,\"}:[","c":null}],"d":{},"e":[],"f":-1.5}"#;
        let value: serde_json::Value = serde_json::from_str(compact).expect("json");
        assert_eq!(
            pretty(compact),
            serde_json::to_string_pretty(&value).expect("pretty")
        );
        // Order is the server's, not sorted.
        assert_eq!(pretty(r#"{"z":1,"a":2}"#), "{\n  \"z\": 1,\n  \"a\": 2\n}");
        // Already-pretty input comes out the same.
        let again = pretty(&pretty(compact));
        assert_eq!(again, pretty(compact));
        assert_eq!(
            pretty(r#"{ "s": "a \\\" b" , "n" : 1.50e3, "t" : [ ] }"#),
            "{\n  \"s\": \"a \\\\\\\" b\",\n  \"n\": 1.50e3,\n  \"t\": []\n}"
        );
    }

    #[test]
    fn table_aligns_columns() {
        let mut table = Table::new(["NAME", "ID"]);
        table.row(["demo".into(), "1".into()]);
        table.row(["a".into(), "22".into()]);
        assert_eq!(table.render_or("none"), "NAME  ID\ndemo  1\na     22\n");
        assert_eq!(Table::new(["NAME"]).render_or("none"), "none");
    }
}
