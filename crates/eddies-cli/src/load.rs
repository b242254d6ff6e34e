//! From scene text and `--set` overrides to a checked [`Scene`], with every error located at the file, line
//! and column of the key it is about (or at the `--set` flag that supplied the value).
//!
//! The pipeline: parse the text with `toml_edit` (syntax errors have a span); apply the overrides to an editable
//! copy; deserialise the edited text with serde (unknown keys and wrong types have a span in the edited text,
//! which we turn into a key path); fill in defaults and check ranges (errors carry a key path). A key path is
//! then looked up in the original document for its position, unless an override supplied it.

use std::fmt;
use std::ops::Range;

use toml_edit::{Document, DocumentMut, InlineTable, Item, Table, TableLike, Value};

use crate::keypath::{KeyPath, Seg};
use crate::scene::{BadValue, Scene};

/// Where scene text came from.
#[derive(Clone, Debug)]
pub struct SceneSource {
    /// How error messages name it: a file path, or `builtin:NAME.toml`.
    pub label: String,
    /// Short name for the default output folder (file stem or built-in name).
    pub name: String,
    /// The TOML text.
    pub text: String,
}

/// A value supplied on the command line for one key (`--set`, `--frames`, `--steps-per-frame`).
#[derive(Clone, Debug)]
pub struct Override {
    /// The key it sets.
    pub path: KeyPath,
    /// The value.
    pub value: Value,
    /// The flag as the user typed it, for error messages (`--set time.fps=0`).
    pub origin: String,
}

impl Override {
    /// Parses `--set key=value`: the value is read as TOML (number, boolean, array, inline table, quoted
    /// string) and, failing that, taken as a bare string.
    pub fn parse_set(arg: &str) -> Result<Self, SceneError> {
        let origin = format!("--set {arg}");
        let flag_error = |what: String, allowed: &str| SceneError {
            location: origin.clone(),
            key: String::new(),
            what,
            allowed: Some(allowed.to_string()),
            context: Vec::new(),
        };
        let Some((key, raw)) = arg.split_once('=') else {
            return Err(flag_error(
                "expected KEY=VALUE".into(),
                "e.g. --set reint.viscosity=0.001",
            ));
        };
        let path = KeyPath::parse(key.trim())
            .map_err(|e| flag_error(e, "a dotted key such as time.fps or region.0.density"))?;
        let raw = raw.trim();
        let mut value = raw.parse::<Value>().unwrap_or_else(|_| Value::from(raw));
        value.decor_mut().clear();
        Ok(Self {
            path,
            value,
            origin,
        })
    }

    /// An override from a dedicated flag such as `--frames 10`.
    pub fn flag(path: KeyPath, value: Value, origin: String) -> Self {
        Self {
            path,
            value,
            origin,
        }
    }
}

/// A problem with a scene, located for the user.
#[derive(Clone, Debug, PartialEq)]
pub struct SceneError {
    /// `FILE:LINE:COL`, or the command-line flag that supplied the value.
    pub location: String,
    /// The key (`domain.resolution`), empty for syntax errors.
    pub key: String,
    /// What is wrong.
    pub what: String,
    /// What would be accepted, where that can be said.
    pub allowed: Option<String>,
    /// Lines printed after the error line: the source line with a caret, hints.
    pub context: Vec<String>,
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.location)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        write!(f, "{}", self.what)?;
        if let Some(a) = &self.allowed {
            write!(f, "; allowed: {a}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SceneError {}

/// Finds where keys are in the original scene text.
#[derive(Clone, Debug)]
pub struct Locator {
    label: String,
    text: String,
    doc: Option<Document<String>>,
    overrides: Vec<Override>,
}

/// A scene that deserialised and passed every check, with the means to locate later errors in its source.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The resolved scene (defaults filled in, overrides applied).
    pub scene: Scene,
    /// Where its keys came from.
    pub locator: Locator,
}

/// Loads, resolves and checks a scene; see the module documentation.
pub fn load(src: &SceneSource, overrides: &[Override]) -> Result<Loaded, SceneError> {
    let original =
        Document::parse(src.text.clone()).map_err(|e| syntax_error(&src.label, &src.text, &e))?;
    let locator = Locator {
        label: src.label.clone(),
        text: src.text.clone(),
        doc: Some(original.clone()),
        overrides: overrides.to_vec(),
    };

    // The effective text: the original with the overrides applied. Without overrides it is the original.
    let effective = if overrides.is_empty() {
        src.text.clone()
    } else {
        let mut doc = original.into_mut();
        for ov in overrides {
            apply(&mut doc, ov).map_err(|e| SceneError {
                location: ov.origin.clone(),
                key: ov.path.to_string(),
                what: e,
                allowed: None,
                context: Vec::new(),
            })?;
        }
        doc.to_string()
    };
    let eff_doc = Document::parse(effective.clone()).map_err(|e| SceneError {
        location: "--set".into(),
        key: String::new(),
        what: format!(
            "the scene with the overrides applied does not parse: {}",
            e.message()
        ),
        allowed: None,
        context: Vec::new(),
    })?;

    let mut scene: Scene = toml::from_str(&effective).map_err(|e| {
        let path = e
            .span()
            .and_then(|s| path_at_table(eff_doc.as_table(), s.start, &KeyPath::root()))
            .unwrap_or_default();
        let (path, message) = narrow_to_key(eff_doc.as_table(), path, e.message());
        let message = name_the_variants(&eff_doc, &path, message);
        let (what, allowed) = explain(&message);
        let allowed = match allowed {
            Some(a) if !a.is_empty() => a,
            _ if what.starts_with("unknown key") => {
                let table = KeyPath(path.0[..path.0.len().saturating_sub(1)].to_vec());
                crate::scene::keys_of(&table)
                    .map(|k| k.join(", "))
                    .unwrap_or_default()
            }
            _ => allowed.unwrap_or_default(),
        };
        locator.error(BadValue {
            path,
            what,
            allowed,
        })
    })?;
    scene.resolve().map_err(|e| locator.error(e))?;
    scene.validate().map_err(|e| locator.error(e))?;
    Ok(Loaded { scene, locator })
}

impl Locator {
    /// Locates `invalid` at the flag that supplied its key, or at the key (or its nearest enclosing table)
    /// in the source.
    pub fn error(&self, invalid: BadValue) -> SceneError {
        let BadValue {
            path,
            what,
            allowed,
        } = invalid;
        let allowed = (!allowed.is_empty()).then_some(allowed);
        let from_flag = |ov: &Override| SceneError {
            location: ov.origin.clone(),
            key: path.to_string(),
            what: what.clone(),
            allowed: allowed.clone(),
            context: vec![format!(
                "  the value comes from {}; the scene is {}",
                ov.origin, self.label
            )],
        };
        if let Some(ov) = self
            .overrides
            .iter()
            .rev()
            .find(|o| o.path.is_prefix_of(&path))
        {
            return from_flag(ov);
        }
        let (span, found) = match &self.doc {
            Some(doc) => span_of(doc.as_table(), &path),
            None => (None, false),
        };
        if !found {
            if let Some(ov) = self
                .overrides
                .iter()
                .rev()
                .find(|o| path.is_prefix_of(&o.path))
            {
                return from_flag(ov);
            }
        }
        let span = span.unwrap_or(0..0);
        let (line, col, context) = source_context(&self.text, &span);
        let mut context = context;
        if !found && !path.0.is_empty() {
            context.push(format!(
                "  `{path}` is not in the file; its default value is used"
            ));
        }
        SceneError {
            location: format!("{}:{line}:{col}", self.label),
            key: path.to_string(),
            what,
            allowed,
            context,
        }
    }
}

fn syntax_error(label: &str, text: &str, e: &toml_edit::TomlError) -> SceneError {
    let span = e.span().unwrap_or(0..0);
    let (line, col, context) = source_context(text, &span);
    SceneError {
        location: format!("{label}:{line}:{col}"),
        key: String::new(),
        what: format!(
            "TOML syntax error: {}",
            e.message().trim_end().replace('\n', "; ")
        ),
        allowed: None,
        context,
    }
}

/// Line and column (1-based, in characters) of `span.start`, and context lines showing the source line with
/// a caret under the span.
fn source_context(text: &str, span: &Range<usize>) -> (usize, usize, Vec<String>) {
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[..start].matches('\n').count() + 1;
    let col = text[line_start..start].chars().count() + 1;
    let line_text = text[line_start..line_end].trim_end_matches('\r');
    if text.is_empty() {
        return (1, 1, Vec::new());
    }
    let width = text[start..span.end.clamp(start, line_end)]
        .chars()
        .count()
        .max(1);
    let gutter = " ".repeat(line.to_string().len());
    let context = vec![
        format!(" {gutter} |"),
        format!(" {line} | {line_text}"),
        format!(" {gutter} | {}{}", " ".repeat(col - 1), "^".repeat(width)),
    ];
    (line, col, context)
}

/// Turns a serde/toml deserialisation message into "what is wrong" and "what is allowed".
fn explain(message: &str) -> (String, Option<String>) {
    let message = message.trim();
    let ticked = |s: &str| -> Vec<String> {
        s.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (name, expected) = rest.split_once(", ").unwrap_or((rest, ""));
        let allowed = if expected.starts_with("there are no fields") {
            "no keys here".to_string()
        } else {
            ticked(expected).join(", ")
        };
        return (format!("unknown key {name}"), Some(allowed));
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, expected) = rest.split_once(", ").unwrap_or((rest, ""));
        let name = name.trim_matches('`');
        let allowed: Vec<_> = ticked(expected)
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect();
        return (
            format!("unknown value \"{name}\""),
            Some(allowed.join(", ")),
        );
    }
    for prefix in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((found, expected)) = rest.rsplit_once(", expected ") {
                let expected = expected_in_words(expected);
                let found = if prefix == "invalid length " {
                    format!("{found} elements")
                } else {
                    found.to_string()
                };
                return (
                    format!("expected {expected}, found {found}"),
                    Some(expected),
                );
            }
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return (format!("missing key {rest}"), None);
    }
    if let Some(rest) = message.strip_prefix("duplicate field ") {
        return (
            format!("key {rest} given twice"),
            Some("each key once".into()),
        );
    }
    (message.to_string(), None)
}

/// serde's names of expected types, in the words of a scene file.
fn expected_in_words(expected: &str) -> String {
    let e = expected.trim();
    match e {
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number ≥ 0".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        "a boolean" => "a boolean (true or false)".into(),
        "enum ShapeSpec" => format!("a shape table with one of {}", crate::scene::SHAPE_KINDS),
        _ if e.starts_with("one of ") => e.into(),
        _ if e.starts_with("struct ") => "a table".into(),
        _ if e.starts_with("an array of length") || e.starts_with("a tuple") => e.into(),
        _ => e.into(),
    }
}

/// The key an error reported at the table `path` is about. Keys that a table takes from a library type
/// (`[vpm]`'s parameters) are read through serde's `flatten`, whose errors name the table, not the key: an
/// unknown key is named in the message, and a bad value is found by reading the table's keys one at a time.
fn narrow_to_key(root: &Table, path: KeyPath, message: &str) -> (KeyPath, String) {
    let Some(Item::Table(table)) = item_at(root, &path) else {
        return (path, message.to_string());
    };
    if let Some(name) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        if table.contains_key(name) {
            return (path.key(name), message.to_string());
        }
    }
    let header: Vec<String> = path
        .0
        .iter()
        .map(|seg| match seg {
            Seg::Key(k) => k.clone(),
            Seg::Index(i) => i.to_string(),
        })
        .collect();
    if header.len() != 1 {
        return (path, message.to_string());
    }
    for (name, item) in table.iter() {
        let Item::Value(v) = item else { continue };
        let alone = format!("[{}]\n{name} = {}\n", header[0], v.to_string().trim());
        if let Err(e) = toml::from_str::<Scene>(&alone) {
            return (path.key(name), e.message().to_string());
        }
    }
    (path, message.to_string())
}

/// A message that expects an enum (`invalid type: integer `3`, expected enum Eos`), with the enum's values
/// spelt out: they are learnt from the scene format itself, by asking for a value no enum has at `path`, so
/// that no list of values is written twice (a new equation of state, say, is named here by itself).
fn name_the_variants(doc: &Document<String>, path: &KeyPath, message: String) -> String {
    // An enum given a value of the wrong type: serde names the enum, toml and serde's `flatten` only the
    // types it could have been read from.
    let (head, ty) = match message.rsplit_once(", expected enum ") {
        Some((head, ty)) => (head.to_string(), ty),
        None if message.trim() == "wanted string or table"
            || message.ends_with("expected string or map") =>
        {
            let Some(Item::Value(v)) = item_at(doc.as_table(), path) else {
                return message;
            };
            (format!("invalid type: {}", v.to_string().trim()), "")
        }
        None => return message,
    };
    if ty == "ShapeSpec" {
        // A shape is a table, not a string: `expected_in_words` says so.
        return message;
    }
    let mut probe = doc.clone().into_mut();
    let bogus = Override::flag(path.clone(), Value::from("\u{1}"), String::new());
    if apply(&mut probe, &bogus).is_err() {
        return message;
    }
    match toml::from_str::<Scene>(&probe.to_string()) {
        // serde lists the values as "expected one of `a`, `b`, `c`", or "expected `a` or `b`" for two.
        Err(e) => match e.message().split_once(", expected ") {
            Some((_, values)) if e.message().starts_with("unknown variant") => {
                let values: Vec<String> = values
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(|v| format!("\"{v}\""))
                    .collect();
                format!("{head}, expected one of {}", values.join(", "))
            }
            _ => message,
        },
        Ok(_) => message,
    }
}

/// The item at `path` (keys only), if there is one.
fn item_at<'a>(root: &'a Table, path: &KeyPath) -> Option<&'a Item> {
    let mut item: Option<&Item> = None;
    let mut table: &dyn TableLike = root;
    for seg in &path.0 {
        let Seg::Key(k) = seg else { return None };
        let next = table.get(k)?;
        item = Some(next);
        if let Some(t) = next.as_table_like() {
            table = t;
        }
    }
    item
}

fn contains(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| offset >= s.start && offset < s.end.max(s.start + 1))
}

/// The path of the innermost key or value whose text contains byte `offset`.
fn path_at_table(t: &dyn TableLike, offset: usize, path: &KeyPath) -> Option<KeyPath> {
    for (name, item) in t.iter() {
        let here = path.key(name);
        if contains(t.key(name).and_then(|k| k.span()), offset) {
            return Some(here);
        }
        if let Some(p) = path_at_item(item, offset, &here) {
            return Some(p);
        }
    }
    None
}

fn path_at_item(item: &Item, offset: usize, path: &KeyPath) -> Option<KeyPath> {
    match item {
        Item::Table(t) => path_at_table(t, offset, path)
            .or_else(|| contains(t.span(), offset).then(|| path.clone())),
        Item::ArrayOfTables(a) => a.iter().enumerate().find_map(|(i, t)| {
            let here = path.index(i);
            path_at_table(t, offset, &here).or_else(|| contains(t.span(), offset).then_some(here))
        }),
        Item::Value(v) => path_at_value(v, offset, path),
        Item::None => None,
    }
}

fn path_at_value(v: &Value, offset: usize, path: &KeyPath) -> Option<KeyPath> {
    if !contains(v.span(), offset) {
        return None;
    }
    let inner = match v {
        Value::InlineTable(t) => path_at_table(t, offset, path),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| path_at_value(v, offset, &path.index(i))),
        _ => None,
    };
    Some(inner.unwrap_or_else(|| path.clone()))
}

/// The span of the key at `path` in a parsed document (of its key, for table keys; of the element, for array
/// elements), or of the deepest part of the path that exists; and whether the whole path exists.
fn span_of(root: &Table, path: &KeyPath) -> (Option<Range<usize>>, bool) {
    enum TomlNode<'a> {
        Table(&'a dyn TableLike),
        Tables(&'a toml_edit::ArrayOfTables),
        Array(&'a toml_edit::Array),
        Leaf,
    }
    fn node(item: &Item) -> TomlNode<'_> {
        match item {
            Item::Table(t) => TomlNode::Table(t),
            Item::ArrayOfTables(a) => TomlNode::Tables(a),
            Item::Value(v) => value_node(v),
            Item::None => TomlNode::Leaf,
        }
    }
    fn value_node(v: &Value) -> TomlNode<'_> {
        match v {
            Value::InlineTable(t) => TomlNode::Table(t),
            Value::Array(a) => TomlNode::Array(a),
            _ => TomlNode::Leaf,
        }
    }
    let mut cur = TomlNode::Table(root);
    let mut best = None;
    for seg in &path.0 {
        let next = match (&cur, seg) {
            (TomlNode::Table(t), Seg::Key(k)) => t.get_key_value(k).map(|(key, item)| {
                best = key.span().or(best.clone());
                node(item)
            }),
            (TomlNode::Tables(a), Seg::Index(i)) => a.get(*i).map(|t| {
                best = t.span().or(best.clone());
                TomlNode::Table(t)
            }),
            (TomlNode::Array(a), Seg::Index(i)) => a.get(*i).map(|v| {
                best = v.span().or(best.clone());
                value_node(v)
            }),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return (best, false),
        }
    }
    (best, true)
}

/// Sets the value of `ov` in `doc`, creating tables on the way.
fn apply(doc: &mut DocumentMut, ov: &Override) -> Result<(), String> {
    set_in_table(
        doc.as_table_mut(),
        false,
        &ov.path.0,
        &ov.value,
        &KeyPath::root(),
    )
}

fn set_in_table(
    t: &mut dyn TableLike,
    inline: bool,
    segs: &[Seg],
    v: &Value,
    done: &KeyPath,
) -> Result<(), String> {
    let Some((first, rest)) = segs.split_first() else {
        return Err("the key is empty".into());
    };
    let Seg::Key(k) = first else {
        return Err(format!("`{done}` is a table, not an array"));
    };
    let here = done.key(k);
    if rest.is_empty() {
        t.insert(k, Item::Value(v.clone()));
        return Ok(());
    }
    if !t.contains_key(k) {
        // Create what the next step of the path needs: a table for a key, a list for index 0 (an array of
        // tables such as `[[emitter]]` at the top level, an inline array inside inline tables).
        let new = match (&rest[0], inline) {
            (Seg::Key(_), true) => Item::Value(Value::InlineTable(InlineTable::new())),
            (Seg::Key(_), false) => {
                let mut table = Table::new();
                table.set_implicit(true);
                Item::Table(table)
            }
            (Seg::Index(0), true) => Item::Value(Value::Array(toml_edit::Array::new())),
            (Seg::Index(0), false) => Item::ArrayOfTables(toml_edit::ArrayOfTables::new()),
            (Seg::Index(i), _) => {
                return Err(format!(
                    "`{here}` is not in the scene, so it has no element [{i}]; start at [0]"
                ))
            }
        };
        t.insert(k, new);
    }
    match t.get_mut(k) {
        Some(item) => set_in_item(item, rest, v, &here),
        None => Err(format!("cannot create `{here}`")),
    }
}

fn set_in_item(item: &mut Item, segs: &[Seg], v: &Value, done: &KeyPath) -> Result<(), String> {
    match item {
        Item::Table(t) => set_in_table(t, false, segs, v, done),
        Item::Value(val) => set_in_value(val, segs, v, done),
        Item::ArrayOfTables(a) => {
            let Some((Seg::Index(i), rest)) = segs.split_first() else {
                return Err(format!(
                    "`{done}` is an array of tables: give an index, e.g. `{done}[0]`"
                ));
            };
            let len = a.len();
            if *i > len {
                return Err(format!(
                    "`{done}` has {len} entries (indices 0 to {}); index {i} is out of range",
                    len.max(1) - 1
                ));
            }
            if *i == len {
                a.push(Table::new());
            }
            let here = done.index(*i);
            let Some(t) = a.get_mut(*i) else {
                return Err(format!("cannot reach `{here}`"));
            };
            if rest.is_empty() {
                let Value::InlineTable(new) = v else {
                    return Err(format!(
                        "`{here}` is a table; give an inline table such as {{ density = 0.5 }}"
                    ));
                };
                *t = new.clone().into_table();
                return Ok(());
            }
            set_in_table(t, false, rest, v, &here)
        }
        Item::None => Err(format!("`{done}` does not exist")),
    }
}

fn set_in_value(val: &mut Value, segs: &[Seg], v: &Value, done: &KeyPath) -> Result<(), String> {
    match val {
        Value::InlineTable(t) => set_in_table(t, true, segs, v, done),
        Value::Array(a) => {
            let Some((Seg::Index(i), rest)) = segs.split_first() else {
                return Err(format!(
                    "`{done}` is an array: give an index, e.g. `{done}[0]`"
                ));
            };
            let len = a.len();
            if *i > len {
                return Err(format!(
                    "`{done}` has {len} elements; index {i} is out of range"
                ));
            }
            if rest.is_empty() {
                if *i == len {
                    a.push(v.clone());
                } else {
                    a.replace(*i, v.clone());
                }
                return Ok(());
            }
            match a.get_mut(*i) {
                Some(elem) => set_in_value(elem, rest, v, &done.index(*i)),
                None => Err(format!(
                    "`{done}` has {len} elements; index {i} is out of range"
                )),
            }
        }
        other => Err(format!(
            "`{done}` is a {}, so it has no key `{}`",
            other.type_name(),
            KeyPath(segs.to_vec())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> SceneSource {
        SceneSource {
            label: "s.toml".into(),
            name: "s".into(),
            text: text.into(),
        }
    }

    fn err(text: &str) -> SceneError {
        load(&src(text), &[]).unwrap_err()
    }

    #[test]
    fn unknown_key_is_located_at_the_key() {
        let e = err("dim = 2\n[domain]\nresolutoin = [64, 64]\n");
        assert_eq!(e.location, "s.toml:3:1");
        assert_eq!(e.key, "domain.resolutoin");
        assert!(e.what.contains("unknown key"), "{e}");
        assert!(e.allowed.as_deref().unwrap().contains("resolution"), "{e}");
        assert_eq!(e.context[1], " 3 | resolutoin = [64, 64]");
        assert_eq!(e.context[2], "   | ^^^^^^^^^^");
    }

    /// `[vpm]`'s parameter keys come from the library's `VpmParams` through serde's `flatten`, whose errors
    /// name the table: they are still located at the key, with what the key accepts.
    #[test]
    fn errors_in_the_library_keys_of_vpm_are_located_at_the_key() {
        let vpm = "method = \"vpm\"\ndim = 3\n[vpm]\nviscosity = 0.0\n";
        let e = err(&format!("{vpm}theta = \"x\"\n"));
        assert_eq!(
            (e.key.as_str(), e.location.as_str()),
            ("vpm.theta", "s.toml:5:1"),
            "{e}"
        );
        assert!(e.what.contains("expected a number"), "{e}");
        let e = err(&format!("{vpm}thetta = 0.5\n"));
        assert_eq!(
            (e.key.as_str(), e.location.as_str()),
            ("vpm.thetta", "s.toml:5:1"),
            "{e}"
        );
        let allowed = e.allowed.unwrap();
        assert!(
            allowed.contains("theta") && allowed.contains("ring"),
            "{allowed}"
        );
        let e = err(&format!("{vpm}leaf_size = -1\n"));
        assert_eq!(e.key, "vpm.leaf_size");
        assert!(e.what.contains("a whole number ≥ 0"), "{e}");
    }

    /// An enum given a value of the wrong type names its values, learnt from the format itself.
    #[test]
    fn an_enum_of_the_wrong_type_names_its_values() {
        let e = err("[reint]\neos = 3\n");
        assert_eq!(e.key, "reint.eos");
        let allowed = e.allowed.unwrap();
        // Every law, as the library names them (a new one joins the list by itself).
        assert!(allowed.starts_with("one of "), "{allowed}");
        for law in ["\"quadratic\"", "\"tait\"", "\"ideal-gas\""] {
            assert!(allowed.contains(law), "{allowed}");
        }
        let e = err("method = \"vpm\"\ndim = 3\n[vpm]\nvelocity = 4\n");
        assert_eq!(e.key, "vpm.velocity");
        assert!(e.allowed.unwrap().contains("\"poisson\""));
        let e = err("[output]\nview = 2\n");
        assert_eq!(
            e.allowed.as_deref(),
            Some("one of \"render\", \"projection\", \"slice\"")
        );
    }

    #[test]
    fn wrong_type_is_located_at_the_value() {
        let e = err("[time]\nfps = \"fast\"\n");
        assert_eq!(e.key, "time.fps");
        assert_eq!(e.location, "s.toml:2:1");
        assert!(e.what.contains("expected a number"), "{e}");
    }

    #[test]
    fn type_error_inside_an_array_names_the_element() {
        let e = err("[domain]\nresolution = [64, \"x\"]\n");
        assert_eq!(e.key, "domain.resolution[1]");
        assert_eq!(e.location, "s.toml:2:19");
    }

    #[test]
    fn range_error_is_located_after_deserialising() {
        let e = err("# a scene\n\n[domain]\nresolution = [-64, 64]\n");
        assert_eq!(e.key, "domain.resolution[0]");
        assert_eq!(e.location, "s.toml:4:15");
        assert!(e.allowed.is_some());
    }

    #[test]
    fn error_in_array_of_tables_names_the_entry() {
        let text = "[[region]]\nshape = { sphere = { center = [0.5, 0.5], radius = 0.1 } }\n\
                    [[region]]\nshape = { sphere = { center = [0.5, 0.5], radius = -0.1 } }\n";
        let e = err(text);
        assert_eq!(e.key, "region[1].shape.sphere.radius");
        assert_eq!(e.location, "s.toml:4:43");
    }

    #[test]
    fn unknown_shape_kind() {
        let e = err("[[region]]\nshape = { ball = { center = [0.5, 0.5], radius = 0.1 } }\n");
        assert!(e.key.starts_with("region[0].shape"), "{e}");
        assert!(e.allowed.as_deref().unwrap().contains("\"sphere\""), "{e}");
    }

    #[test]
    fn syntax_error_has_a_position() {
        let e = err("dim = 2\n[domain\n");
        assert!(e.location.starts_with("s.toml:2:"), "{e}");
        assert!(e.what.starts_with("TOML syntax error"));
    }

    #[test]
    fn set_overrides_and_errors_name_the_flag() {
        let text = "[domain]\nresolution = [64, 64]\n[[region]]\nshape = { box = { min = [0.0, 0.0], max = [0.5, 0.5] } }\n";
        let ovs = [
            Override::parse_set("domain.resolution=[32,32]").unwrap(),
            Override::parse_set("region.0.density=0.5").unwrap(),
            Override::parse_set("reint.eos=tait").unwrap(),
        ];
        let loaded = load(&src(text), &ovs).unwrap();
        assert_eq!(loaded.scene.domain.resolution, Some(vec![32, 32]));
        assert_eq!(loaded.scene.region[0].density, 0.5);
        assert_eq!(loaded.scene.reint.eos, eddies::reint::Eos::Tait);

        let bad = Override::parse_set("time.fps=-1").unwrap();
        let e = load(&src(text), &[bad]).unwrap_err();
        assert_eq!(e.location, "--set time.fps=-1");
        assert_eq!(e.key, "time.fps");

        let typo = Override::parse_set("time.fsp=10").unwrap();
        let e = load(&src(text), &[typo]).unwrap_err();
        assert_eq!(e.location, "--set time.fsp=10");
        assert!(e.what.contains("unknown key"), "{e}");

        // Appending to an array of tables, and creating one.
        let ovs = [
            Override::parse_set("region.1.shape={sphere={center=[0.5,0.5],radius=0.1}}").unwrap(),
            Override::parse_set("emitter[0].shape={box={min=[0.4,0.8],max=[0.6,0.9]}}").unwrap(),
            Override::parse_set("emitter[0].velocity=[0.0,-1.0]").unwrap(),
        ];
        let scene = load(&src(text), &ovs).unwrap().scene;
        assert_eq!(scene.region.len(), 2);
        assert_eq!(scene.emitter.len(), 1);
        assert_eq!(scene.emitter[0].velocity, Some(vec![0.0, -1.0]));

        let e = load(
            &src(text),
            &[Override::parse_set("region.5.density=1").unwrap()],
        )
        .unwrap_err();
        assert!(e.what.contains("out of range"), "{e}");
        assert!(Override::parse_set("novalue").is_err());
    }

    #[test]
    fn explain_rewrites_serde_messages() {
        let (what, allowed) = explain("unknown field `fsp`, expected one of `frames`, `fps`");
        assert_eq!(what, "unknown key `fsp`");
        assert_eq!(allowed.unwrap(), "frames, fps");
        let (what, allowed) = explain("invalid type: string \"a\", expected f64");
        assert_eq!(what, "expected a number, found string \"a\"");
        assert_eq!(allowed.unwrap(), "a number");
    }

    #[test]
    fn source_context_counts_characters() {
        let (line, col, ctx) = source_context("a = 1\nβ = \"x\"\n", &(11..14));
        assert_eq!((line, col), (2, 5));
        assert_eq!(ctx[2], "   |     ^^^");
    }
}
