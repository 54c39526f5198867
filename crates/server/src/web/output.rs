//! How a call's retained output is shown: each MCP content item as text, pretty-printed JSON
//! or an image (only raster types, as `data:` URLs, which the page's policy allows for images
//! alone), structured content as JSON, and the call's attempts, observations, reconciliation
//! lineage and resolution whenever the call view carries them (as pretty-printed JSON, so the
//! inspector shows whatever those records hold).

use serde_json::Value;

/// One content item of a result.
#[derive(Debug, PartialEq)]
pub struct OutputItem {
    /// `text`, `json`, `image` or `other`.
    pub kind: &'static str,
    /// A caption: the content type and anything notable.
    pub label: String,
    /// Text to show (text, JSON, or a description of other content).
    pub body: String,
    /// For images: the `data:` URL.
    pub src: String,
}

/// Image types shown inline; anything else (SVG included) is described, not rendered.
const INLINE_IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

fn is_base64(data: &str) -> bool {
    !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The content items of a `CallToolResult`.
pub fn content_items(result: &Value) -> Vec<OutputItem> {
    let Some(items) = result.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| content_item(i + 1, item))
        .collect()
}

fn content_item(n: usize, item: &Value) -> OutputItem {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |kind, label: String, body: String| OutputItem {
        kind,
        label,
        body,
        src: String::new(),
    };
    match kind {
        "text" => {
            let body = item.get("text").and_then(Value::as_str).unwrap_or("");
            match serde_json::from_str::<Value>(body) {
                Ok(json @ (Value::Object(_) | Value::Array(_))) => text(
                    "json",
                    format!("Content {n}: text holding JSON"),
                    pretty(&json),
                ),
                _ => text("text", format!("Content {n}: text"), body.to_owned()),
            }
        }
        "image" => {
            let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
            let data = item.get("data").and_then(Value::as_str).unwrap_or("");
            if INLINE_IMAGES.contains(&mime) && is_base64(data) {
                OutputItem {
                    kind: "image",
                    label: format!("Content {n}: image ({mime})"),
                    body: String::new(),
                    src: format!("data:{mime};base64,{data}"),
                }
            } else {
                text(
                    "other",
                    format!("Content {n}: image ({mime}), not shown inline"),
                    format!("{} bytes of base64 data", data.len()),
                )
            }
        }
        "resource" => {
            let resource = item.get("resource").unwrap_or(&Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => text(
                    "text",
                    format!("Content {n}: resource {uri}"),
                    body.to_owned(),
                ),
                None => text(
                    "other",
                    format!("Content {n}: resource {uri}"),
                    "binary contents, not shown".to_owned(),
                ),
            }
        }
        _ => text(
            "other",
            format!(
                "Content {n}: {}",
                if kind.is_empty() {
                    "unknown content"
                } else {
                    kind
                }
            ),
            pretty(item),
        ),
    }
}

/// The result's structured content, pretty-printed.
pub fn structured(result: &Value) -> Option<String> {
    result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .map(pretty)
}

/// A section of the call view shown only when the call has it.
#[derive(Debug, PartialEq)]
pub struct LaterSection {
    /// Heading.
    pub title: &'static str,
    /// Its JSON, pretty-printed.
    pub body: String,
}

/// The call view's fields shown as their own sections when present and not empty.
const LATER_SECTIONS: &[(&str, &str)] = &[
    ("attempts", "Attempts"),
    ("observations", "Observations"),
    ("lineage", "Reconciliation: lookups, receipts and evidence"),
    ("resolution", "Resolution"),
];

/// The later sections present in a serialized call view.
pub fn later_sections(call: &Value) -> Vec<LaterSection> {
    LATER_SECTIONS
        .iter()
        .filter_map(|(key, title)| {
            call.get(*key)
                .filter(|value| !is_blank(value))
                .map(|value| LaterSection {
                    title,
                    body: pretty(value),
                })
        })
        .collect()
}

/// Null, an empty list, or an object of nothing but blanks: nothing to show.
fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.values().all(is_blank),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_is_shown_by_type() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "text", "text": "{\"a\":1}"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="},
            {"type": "image", "mimeType": "image/png", "data": "\"><script>"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}},
            {"type": "audio", "data": "AAAA"}
        ], "structuredContent": {"b": 2}});
        let items = content_items(&result);
        let kinds: Vec<&str> = items.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            ["text", "json", "image", "other", "other", "text", "other"]
        );
        assert_eq!(items[1].body, "{\n  \"a\": 1\n}");
        assert_eq!(items[2].src, "data:image/png;base64,iVBORw0KGgo=");
        assert!(
            items[4].src.is_empty(),
            "data that is not base64 never reaches an attribute"
        );
        assert_eq!(structured(&result).as_deref(), Some("{\n  \"b\": 2\n}"));
    }

    #[test]
    fn later_sections_appear_only_when_present() {
        assert!(later_sections(&json!({"state": "unknown"})).is_empty());
        assert!(later_sections(&json!({"attempts": [], "resolution": null, "lineage": {"receipt_ids": [], "evidence_ids": []}})).is_empty());
        let sections = later_sections(
            &json!({"attempts": [{"n": 1}], "lineage": {"lookup_call_ids": ["x"]}, "resolution": {"outcome": "applied"}}),
        );
        let titles: Vec<&str> = sections.iter().map(|s| s.title).collect();
        assert_eq!(
            titles,
            [
                "Attempts",
                "Reconciliation: lookups, receipts and evidence",
                "Resolution"
            ]
        );
    }
}
