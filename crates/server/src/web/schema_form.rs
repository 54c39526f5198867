//! The Run tool form, generated from a tool's input JSON schema, and the arguments read back
//! from it.
//!
//! Supported: `string`, `number`, `integer`, `boolean`, `enum` (any JSON values), nested
//! `object`s with `properties` (up to [`MAX_DEPTH`] levels) and `array`s of scalars (one item per
//! line). Anything else — `anyOf`, `$ref`, arrays of objects, deeper nesting — becomes a JSON
//! text field for that argument; a schema that is not an object of properties leaves only the
//! raw JSON editor. Arguments marked `writeOnly` or `format: password` are secrets: the form
//! never takes them (arguments are retained and shown to readers), so they are shown disabled.
//!
//! Field names are `arg` followed by the argument's path, each segment escaped as in a JSON
//! pointer, so any property name round-trips.

use super::session::FormFields;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Nesting depth beyond which objects are edited as JSON text.
pub const MAX_DEPTH: usize = 4;

/// One entry of a generated form, in document order.
#[derive(Debug)]
pub enum Item {
    /// A nested object begins: a fieldset.
    Open(Group),
    /// The innermost open object ends.
    Close,
    /// An input.
    Field(Field),
}

/// A nested object's fieldset.
#[derive(Debug)]
pub struct Group {
    /// Its legend: the property name.
    pub legend: String,
    /// The schema's description.
    pub description: Option<String>,
    /// Whether the object is required.
    pub required: bool,
}

/// Which control a field uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Widget {
    /// A text input.
    Text,
    /// A number input (`step` 1 for integers).
    Number,
    /// A checkbox (required booleans).
    Checkbox,
    /// A select of choices (enums, and optional booleans: not set / true / false).
    Select,
    /// A textarea, one item per line (arrays of scalars).
    Lines,
    /// A textarea holding JSON.
    Json,
    /// A disabled input: a secret the form never takes.
    Secret,
}

impl Widget {
    /// The control's name, for templates.
    pub fn as_str(self) -> &'static str {
        match self {
            Widget::Text => "text",
            Widget::Number => "number",
            Widget::Checkbox => "checkbox",
            Widget::Select => "select",
            Widget::Lines => "lines",
            Widget::Json => "json",
            Widget::Secret => "secret",
        }
    }
}

/// One input of the form.
#[derive(Debug)]
pub struct Field {
    /// Form field name.
    pub name: String,
    /// HTML id.
    pub id: String,
    /// The property name.
    pub label: String,
    /// The schema's description.
    pub description: Option<String>,
    /// The control.
    pub widget: Widget,
    /// Whether the argument is required.
    pub required: bool,
    /// `step` of a number input: `1` or `any`.
    pub step: &'static str,
    /// A short note on the expected input (type, one per line, JSON).
    pub hint: String,
    /// The current text value.
    pub value: String,
    /// Whether a checkbox is checked.
    pub checked: bool,
    /// Choices of a select.
    pub choices: Vec<Choice>,
    /// Why the submitted value was refused.
    pub error: Option<String>,
}

impl Field {
    /// The id of the field's help text, for `aria-describedby`.
    pub fn help_id(&self) -> String {
        format!("{}-help", self.id)
    }
}

/// One option of a select.
#[derive(Debug)]
pub struct Choice {
    /// The submitted value: an index into the enum, or `true`/`false`.
    pub value: String,
    /// What it shows.
    pub label: String,
    /// Whether it is selected.
    pub selected: bool,
}

/// What the schema says an argument is.
#[derive(Debug)]
enum Spec<'a> {
    Text,
    Number { integer: bool },
    Boolean,
    Enum(&'a [Value]),
    Lines(Scalar),
    Json,
    Object(Vec<Prop<'a>>),
    Secret,
}

/// The item type of an array edited one item per line.
#[derive(Clone, Copy, Debug)]
enum Scalar {
    Text,
    Number { integer: bool },
    Boolean,
}

#[derive(Debug)]
struct Prop<'a> {
    name: &'a str,
    description: Option<&'a str>,
    default: Option<&'a Value>,
    required: bool,
    spec: Spec<'a>,
}

/// The one non-null JSON type a schema names, if it names exactly one.
fn single_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(types) => {
            let mut named = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null");
            match (named.next(), named.next()) {
                (Some(t), None) => Some(t),
                _ => None,
            }
        }
        _ => None,
    }
}

fn spec_of(schema: &Value, depth: usize) -> Spec<'_> {
    if schema.get("writeOnly") == Some(&Value::Bool(true))
        || schema.get("format").and_then(Value::as_str) == Some("password")
    {
        return Spec::Secret;
    }
    if let Some(values) = schema
        .get("enum")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
    {
        return Spec::Enum(values);
    }
    if ["anyOf", "oneOf", "allOf", "$ref", "not"]
        .iter()
        .any(|k| schema.get(*k).is_some())
    {
        return Spec::Json;
    }
    match single_type(schema) {
        Some("string") => Spec::Text,
        Some("number") => Spec::Number { integer: false },
        Some("integer") => Spec::Number { integer: true },
        Some("boolean") => Spec::Boolean,
        Some("array") => match schema.get("items").map(|items| spec_of(items, depth + 1)) {
            Some(Spec::Text) => Spec::Lines(Scalar::Text),
            Some(Spec::Number { integer }) => Spec::Lines(Scalar::Number { integer }),
            Some(Spec::Boolean) => Spec::Lines(Scalar::Boolean),
            _ => Spec::Json,
        },
        Some("object")
            if depth < MAX_DEPTH && schema.get("properties").is_some_and(Value::is_object) =>
        {
            Spec::Object(props(schema, depth + 1))
        }
        _ => Spec::Json,
    }
}

fn props(schema: &Value, depth: usize) -> Vec<Prop<'_>> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, prop)| Prop {
                    name,
                    description: prop.get("description").and_then(Value::as_str),
                    default: prop.get("default"),
                    required: required.contains(&name.as_str()),
                    spec: spec_of(prop, depth),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The top-level arguments, when the schema is an object the form can show.
fn top_level(schema: &Value) -> Option<Vec<Prop<'_>>> {
    let is_object = single_type(schema) == Some("object")
        || (schema.get("type").is_none() && schema.get("properties").is_some());
    (is_object
        && !["anyOf", "oneOf", "allOf", "$ref"]
            .iter()
            .any(|k| schema.get(*k).is_some()))
    .then(|| props(schema, 0))
}

fn field_name(parent: &str, name: &str) -> String {
    format!("{parent}/{}", name.replace('~', "~0").replace('/', "~1"))
}

/// The root of every field name.
pub const ROOT: &str = "arg";

/// The form for `schema`, filled from `submitted` (a refused submission) or else from the
/// schema's defaults; `None` when only the raw JSON editor can express the arguments.
pub fn items(
    schema: &Value,
    submitted: Option<&FormFields>,
    errors: &HashMap<String, String>,
) -> Option<Vec<Item>> {
    let props = top_level(schema)?;
    let mut out = Vec::new();
    let mut counter = 0;
    render(&props, ROOT, submitted, errors, &mut counter, &mut out);
    Some(out)
}

fn render(
    props: &[Prop<'_>],
    parent: &str,
    submitted: Option<&FormFields>,
    errors: &HashMap<String, String>,
    counter: &mut usize,
    out: &mut Vec<Item>,
) {
    for prop in props {
        let name = field_name(parent, prop.name);
        if let Spec::Object(children) = &prop.spec {
            out.push(Item::Open(Group {
                legend: prop.name.to_owned(),
                description: prop.description.map(str::to_owned),
                required: prop.required,
            }));
            render(children, &name, submitted, errors, counter, out);
            out.push(Item::Close);
            continue;
        }
        *counter += 1;
        let posted = submitted.map(|form| form.get(&name).unwrap_or(""));
        out.push(Item::Field(field(
            prop,
            name.clone(),
            format!("arg-{counter}"),
            posted,
            errors.get(&name).cloned(),
        )));
    }
}

fn default_text(default: Option<&Value>) -> String {
    match default {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn field(
    prop: &Prop<'_>,
    name: String,
    id: String,
    posted: Option<&str>,
    error: Option<String>,
) -> Field {
    let mut f = Field {
        name,
        id,
        label: prop.name.to_owned(),
        description: prop.description.map(str::to_owned),
        widget: Widget::Text,
        required: prop.required,
        step: "any",
        hint: String::new(),
        value: String::new(),
        checked: false,
        choices: Vec::new(),
        error,
    };
    let initial = posted.map(str::to_owned);
    match &prop.spec {
        Spec::Text => {
            f.hint = "text".to_owned();
            f.value = initial.unwrap_or_else(|| default_text(prop.default));
        }
        Spec::Number { integer } => {
            f.widget = Widget::Number;
            f.step = if *integer { "1" } else { "any" };
            f.hint = if *integer { "whole number" } else { "number" }.to_owned();
            f.value = initial.unwrap_or_else(|| default_text(prop.default));
        }
        Spec::Boolean if prop.required => {
            f.widget = Widget::Checkbox;
            f.hint = "true when checked".to_owned();
            f.checked = match posted {
                Some(value) => value == "true",
                None => prop.default == Some(&Value::Bool(true)),
            };
        }
        Spec::Boolean => {
            f.widget = Widget::Select;
            f.hint = "true, false or not set".to_owned();
            let current = initial.unwrap_or_else(|| default_text(prop.default));
            f.choices = [("", "(not set)"), ("true", "true"), ("false", "false")]
                .into_iter()
                .map(|(value, label)| Choice {
                    value: value.to_owned(),
                    label: label.to_owned(),
                    selected: current == value,
                })
                .collect();
        }
        Spec::Enum(values) => {
            f.widget = Widget::Select;
            f.hint = "one of the listed values".to_owned();
            let current = initial.unwrap_or_else(|| {
                prop.default
                    .and_then(|d| values.iter().position(|v| v == d))
                    .map(|i| i.to_string())
                    .unwrap_or_default()
            });
            let unset = (!prop.required).then(|| Choice {
                value: String::new(),
                label: "(not set)".to_owned(),
                selected: current.is_empty(),
            });
            f.choices = unset
                .into_iter()
                .chain(values.iter().enumerate().map(|(i, v)| Choice {
                    value: i.to_string(),
                    label: match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                    selected: current == i.to_string(),
                }))
                .collect();
        }
        Spec::Lines(scalar) => {
            f.widget = Widget::Lines;
            f.hint = match scalar {
                Scalar::Text => "list: one text per line",
                Scalar::Number { integer: true } => "list: one whole number per line",
                Scalar::Number { integer: false } => "list: one number per line",
                Scalar::Boolean => "list: one true or false per line",
            }
            .to_owned();
            f.value = initial.unwrap_or_else(|| match prop.default {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| default_text(Some(v)))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            });
        }
        Spec::Json | Spec::Object(_) => {
            f.widget = Widget::Json;
            f.hint = "JSON value".to_owned();
            f.value = initial.unwrap_or_else(|| {
                prop.default
                    .map(|d| serde_json::to_string_pretty(d).unwrap_or_default())
                    .unwrap_or_default()
            });
        }
        Spec::Secret => {
            f.widget = Widget::Secret;
            f.required = false;
            f.hint =
                "a secret: bind it as a credential reference instead; it cannot be entered here"
                    .to_owned();
        }
    }
    f
}

/// A submitted field that could not be read, by field name.
pub type FieldErrors = HashMap<String, String>;

/// Reads the arguments object from a submitted form, or says which fields are wrong.
pub fn arguments(schema: &Value, form: &FormFields) -> Result<Value, FieldErrors> {
    let Some(props) = top_level(schema) else {
        return Err(FieldErrors::from([(
            ROOT.to_owned(),
            "this tool's arguments can only be given as raw JSON".to_owned(),
        )]));
    };
    let mut errors = FieldErrors::new();
    let object = read_object(&props, ROOT, form, &mut errors);
    if errors.is_empty() {
        Ok(Value::Object(object))
    } else {
        Err(errors)
    }
}

fn read_object(
    props: &[Prop<'_>],
    parent: &str,
    form: &FormFields,
    errors: &mut FieldErrors,
) -> Map<String, Value> {
    let mut object = Map::new();
    for prop in props {
        let name = field_name(parent, prop.name);
        let value = match &prop.spec {
            Spec::Object(children) => {
                let inner = read_object(children, &name, form, errors);
                (prop.required || !inner.is_empty()).then_some(Value::Object(inner))
            }
            spec => match read_field(spec, prop.required, form.get(&name).unwrap_or("")) {
                Ok(value) => value,
                Err(message) => {
                    errors.insert(name, message);
                    None
                }
            },
        };
        if let Some(value) = value {
            object.insert(prop.name.to_owned(), value);
        }
    }
    object
}

/// One field's value: `None` leaves an optional argument out.
fn read_field(spec: &Spec<'_>, required: bool, text: &str) -> Result<Option<Value>, String> {
    let trimmed = text.trim();
    let missing = || {
        if required {
            Err("this argument is required".to_owned())
        } else {
            Ok(None)
        }
    };
    match spec {
        Spec::Text if text.is_empty() && !required => Ok(None),
        Spec::Text => Ok(Some(Value::String(text.to_owned()))),
        Spec::Number { .. } | Spec::Json if trimmed.is_empty() => missing(),
        Spec::Number { integer } => scalar(Scalar::Number { integer: *integer }, trimmed).map(Some),
        Spec::Boolean if required => Ok(Some(Value::Bool(text == "true"))),
        Spec::Boolean => match text {
            "" => Ok(None),
            "true" => Ok(Some(Value::Bool(true))),
            "false" => Ok(Some(Value::Bool(false))),
            _ => Err("choose true, false or not set".to_owned()),
        },
        Spec::Enum(values) => match text {
            "" => missing(),
            index => index
                .parse::<usize>()
                .ok()
                .and_then(|i| values.get(i))
                .map(|v| Some(v.clone()))
                .ok_or_else(|| "choose one of the listed values".to_owned()),
        },
        Spec::Lines(item) => {
            let items = text
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(|line| scalar(*item, line))
                .collect::<Result<Vec<_>, _>>()?;
            if items.is_empty() && !required {
                Ok(None)
            } else {
                Ok(Some(Value::Array(items)))
            }
        }
        Spec::Json => serde_json::from_str(trimmed)
            .map(Some)
            .map_err(|e| format!("not valid JSON (line {}, column {})", e.line(), e.column())),
        Spec::Secret if required => {
            Err("this argument is a secret; it cannot be given through the form".to_owned())
        }
        Spec::Secret => Ok(None),
        Spec::Object(_) => Ok(None),
    }
}

fn scalar(kind: Scalar, text: &str) -> Result<Value, String> {
    match kind {
        Scalar::Text => Ok(Value::String(text.to_owned())),
        Scalar::Number { integer: true } => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{text}` is not a whole number")),
        Scalar::Number { integer: false } => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{text}` is not a number")),
        Scalar::Boolean => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not true or false")),
        },
    }
}

/// A starting point for the raw JSON editor: the required arguments with empty values.
pub fn skeleton(schema: &Value) -> String {
    fn empty(prop: &Prop<'_>) -> Value {
        match &prop.spec {
            Spec::Text | Spec::Secret => Value::String(String::new()),
            Spec::Number { .. } => Value::from(0),
            Spec::Boolean => Value::Bool(false),
            Spec::Enum(values) => values[0].clone(),
            Spec::Lines(_) => Value::Array(Vec::new()),
            Spec::Json => Value::Null,
            Spec::Object(children) => Value::Object(
                children
                    .iter()
                    .filter(|c| c.required)
                    .map(|c| (c.name.to_owned(), empty(c)))
                    .collect(),
            ),
        }
    }
    let object: Map<String, Value> = top_level(schema)
        .unwrap_or_default()
        .iter()
        .filter(|p| p.required)
        .map(|p| {
            (
                p.name.to_owned(),
                p.default.cloned().unwrap_or_else(|| empty(p)),
            )
        })
        .collect();
    serde_json::to_string_pretty(&Value::Object(object)).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(pairs: &[(&str, &str)]) -> FormFields {
        FormFields(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["text", "count", "loud", "mode", "target"],
            "properties": {
                "text": {"type": "string", "description": "What to say"},
                "count": {"type": "integer"},
                "ratio": {"type": ["number", "null"]},
                "loud": {"type": "boolean"},
                "quiet": {"type": "boolean"},
                "mode": {"enum": ["fast", 2, null]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "sizes": {"type": "array", "items": {"type": "integer"}},
                "target": {"type": "object", "required": ["host"], "properties": {
                    "host": {"type": "string"},
                    "a/b~c": {"type": "number"}
                }},
                "extra": {"anyOf": [{"type": "string"}, {"type": "object"}]},
                "token": {"type": "string", "writeOnly": true}
            }
        })
    }

    fn fields(items: &[Item]) -> Vec<&Field> {
        items
            .iter()
            .filter_map(|i| {
                if let Item::Field(f) = i {
                    Some(f)
                } else {
                    None
                }
            })
            .collect()
    }

    #[test]
    fn every_supported_type_gets_its_control() {
        let schema = schema();
        let items = items(&schema, None, &HashMap::new()).unwrap();
        let widget = |label: &str| {
            fields(&items)
                .into_iter()
                .find(|f| f.label == label)
                .map(|f| f.widget)
        };
        assert_eq!(widget("text"), Some(Widget::Text));
        assert_eq!(widget("count"), Some(Widget::Number));
        assert_eq!(widget("ratio"), Some(Widget::Number));
        assert_eq!(widget("loud"), Some(Widget::Checkbox));
        assert_eq!(widget("quiet"), Some(Widget::Select));
        assert_eq!(widget("mode"), Some(Widget::Select));
        assert_eq!(widget("tags"), Some(Widget::Lines));
        assert_eq!(widget("host"), Some(Widget::Text));
        assert_eq!(widget("extra"), Some(Widget::Json));
        assert_eq!(widget("token"), Some(Widget::Secret));
        assert!(
            matches!(&items.iter().find(|i| matches!(i, Item::Open(_))), Some(Item::Open(g)) if g.legend == "target")
        );
    }

    #[test]
    fn a_filled_form_reads_back_as_typed_arguments() {
        let schema = schema();
        let submitted = form(&[
            ("arg/text", "hello"),
            ("arg/count", "3"),
            ("arg/ratio", "0.5"),
            ("arg/loud", "true"),
            ("arg/quiet", "false"),
            ("arg/mode", "1"),
            ("arg/tags", "a\n\n b \n"),
            ("arg/sizes", ""),
            ("arg/target/host", "example.test"),
            ("arg/target/a~1b~0c", "2.5"),
            ("arg/extra", "{\"k\": [1]}"),
            ("arg/token", "hunter22"),
        ]);
        assert_eq!(
            arguments(&schema, &submitted).unwrap(),
            json!({"text": "hello", "count": 3, "ratio": 0.5, "loud": true, "quiet": false, "mode": 2,
                   "tags": ["a", "b"], "target": {"host": "example.test", "a/b~c": 2.5}, "extra": {"k": [1]}})
        );
    }

    #[test]
    fn optional_arguments_left_empty_are_left_out() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"},
            "o": {"type": "object", "properties": {"x": {"type": "integer"}}}}});
        assert_eq!(
            arguments(&schema, &form(&[("arg/a", ""), ("arg/b", "")])).unwrap(),
            json!({})
        );
    }

    #[test]
    fn bad_values_are_reported_per_field() {
        let schema = schema();
        let errors = arguments(
            &schema,
            &form(&[
                ("arg/count", "2.5"),
                ("arg/mode", "9"),
                ("arg/extra", "{"),
                ("arg/sizes", "1\nx"),
            ]),
        )
        .unwrap_err();
        for name in ["arg/count", "arg/mode", "arg/extra", "arg/sizes"] {
            assert!(errors.contains_key(name), "{name}: {errors:?}");
        }
        let refilled = items(&schema, Some(&form(&[("arg/count", "2.5")])), &errors).unwrap();
        let count = fields(&refilled)
            .into_iter()
            .find(|f| f.label == "count")
            .unwrap();
        assert_eq!((count.value.as_str(), count.error.is_some()), ("2.5", true));
    }

    #[test]
    fn only_object_schemas_get_a_form() {
        assert!(items(&json!({"type": "string"}), None, &HashMap::new()).is_none());
        assert!(
            items(
                &json!({"oneOf": [{"type": "object"}]}),
                None,
                &HashMap::new()
            )
            .is_none()
        );
        let none = items(&json!({"type": "object"}), None, &HashMap::new()).unwrap();
        assert!(none.is_empty());
        assert_eq!(
            arguments(&json!({"type": "object", "properties": {}}), &form(&[])).unwrap(),
            json!({})
        );
    }

    #[test]
    fn the_skeleton_lists_required_arguments() {
        let skeleton: Value = serde_json::from_str(&skeleton(&schema())).unwrap();
        assert_eq!(
            skeleton,
            json!({"text": "", "count": 0, "loud": false, "mode": "fast", "target": {"host": ""}})
        );
    }
}
