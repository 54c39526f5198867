//! What a completion looks like once stored: bounded retained output.

use serde_json::{Value, json};

/// Largest retained result, in bytes of JSON.
pub const RESULT_LIMIT: usize = 1024 * 1024;

/// Bounds a `CallToolResult` to `limit` bytes of JSON. An oversized result is replaced by its
/// text content cut to fit, followed by a marker saying how much was kept; returns whether it
/// was cut.
pub fn bound_result(result: Value, limit: usize) -> (Value, bool) {
    let (bounded, original) = bound_keeping_original(result, limit);
    (bounded, original.is_some())
}

/// [`bound_result`], handing back the result as it was when it was cut (`None` when it fit).
pub fn bound_keeping_original(result: Value, limit: usize) -> (Value, Option<Value>) {
    let size = result.to_string().len();
    if size <= limit {
        return (result, None);
    }
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut text: String = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    // Leave room for the marker and JSON escaping of the worst case (every byte escaped
    // as \u00XX is six bytes; in practice far less, but the bound must hold).
    let budget = (limit.saturating_sub(512)) / 6;
    let budget = budget.max(
        limit.saturating_sub(512).min(text.len())
            * usize::from(text.is_ascii() && !needs_escape(&text)),
    );
    cut_at_char_boundary(&mut text, budget);
    let marker = format!(
        "\n[truncated by Switchyard: kept {} of {size} bytes]",
        text.len()
    );
    text.push_str(&marker);
    (
        json!({"content": [{"type": "text", "text": text}], "isError": is_error}),
        Some(result),
    )
}

fn needs_escape(text: &str) -> bool {
    text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
}

fn cut_at_char_boundary(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_result(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}], "isError": false})
    }

    #[test]
    fn small_results_are_kept_whole() {
        let result = text_result("hello");
        assert_eq!(bound_result(result.clone(), RESULT_LIMIT), (result, false));
    }

    #[test]
    fn big_results_are_cut_with_a_marker_and_fit() {
        let (bounded, cut) = bound_result(text_result(&"x".repeat(3 * RESULT_LIMIT)), RESULT_LIMIT);
        assert!(cut);
        assert!(bounded.to_string().len() <= RESULT_LIMIT);
        let text = bounded["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with(&format!(
            "of {} bytes]",
            text_result(&"x".repeat(3 * RESULT_LIMIT)).to_string().len()
        )));
        assert!(text.len() > RESULT_LIMIT / 2, "keeps most of what fits");
    }

    #[test]
    fn escaped_and_multibyte_text_still_fits() {
        let nasty = "\"é\u{1}".repeat(RESULT_LIMIT);
        let (bounded, cut) = bound_result(text_result(&nasty), RESULT_LIMIT);
        assert!(cut);
        assert!(bounded.to_string().len() <= RESULT_LIMIT);
    }
}
