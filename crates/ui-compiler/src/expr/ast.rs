//! The expression AST ([`Expr`]) and its JSON wire shape (`language.md` §10.3).

use std::fmt;

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use ui_core::Value;

/// A parsed expression (`UiExpression`).
///
/// The serde form is exactly the wire shape of `language.md` §10.3: an object tagged by
/// `kind`. Reading is lenient so that a newer block degrades instead of being rejected: a node
/// whose `kind` is unknown, or whose fields do not have the expected shape, is kept as
/// [`Expr::Unknown`] and written back unchanged; evaluating it fails `invalid_expression`.
///
/// ```
/// use ui_compiler::expr::Expr;
///
/// let json = r#"{"kind":"member","object":{"kind":"reference","name":"$list"},"key":{"kind":"literal","value":"length"}}"#;
/// let expr: Expr = serde_json::from_str(json).unwrap();
/// assert_eq!(expr.as_reference(), None);
/// assert_eq!(serde_json::to_string(&expr).unwrap(), json);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Expr {
    /// `{"kind":"literal","value":…}`: a constant. The parser only produces scalars; a block
    /// read from the wire may hold any JSON value here.
    Literal(Value),
    /// `{"kind":"reference","name":…}`: a variable. The name keeps its `$` (`$rows`); bare
    /// names (`row`) are the locals of `Each` and `@Filter`.
    Reference(String),
    /// `{"kind":"array","items":[…]}`: an array literal.
    Array(Vec<Expr>),
    /// `{"kind":"object","entries":[{"key":…,"value":…}]}`: a record literal, keys in
    /// source order.
    Object(Vec<(String, Expr)>),
    /// `{"kind":"member","object":…,"key":…}`: own-field access; `.name` stores the key as
    /// the literal `"name"`.
    Member {
        /// The record or array read from.
        object: Box<Expr>,
        /// The field name or index.
        key: Box<Expr>,
    },
    /// `{"kind":"unary","operator":…,"value":…}`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        value: Box<Expr>,
    },
    /// `{"kind":"binary","operator":…,"left":…,"right":…}`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `{"kind":"call","name":…,"args":[…]}`: a helper call; the name has no `@`
    /// (`Count`, `Filter`, `Sum`, `Join`, `Round`, `Query`, `Set`, `Reset`; a block read from
    /// the wire may hold other names, which fail `refused_call` when evaluated).
    Call {
        /// The helper name without `@`.
        name: String,
        /// The arguments, unevaluated.
        args: Vec<Expr>,
    },
    /// A node read from the wire that this version does not understand, kept as raw JSON.
    Unknown(serde_json::Value),
}

/// A prefix operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryOp {
    /// `!`: boolean negation of truthiness.
    Not,
    /// `-`: numeric negation.
    Neg,
    /// `+`: numeric identity (fails for non-numbers).
    Plus,
}

impl UnaryOp {
    /// The operator as written: `!`, `-` or `+`.
    pub const fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Not => "!",
            UnaryOp::Neg => "-",
            UnaryOp::Plus => "+",
        }
    }

    /// The operator written as `text`.
    pub fn parse(text: &str) -> Option<UnaryOp> {
        Some(match text {
            "!" => UnaryOp::Not,
            "-" => UnaryOp::Neg,
            "+" => UnaryOp::Plus,
            _ => return None,
        })
    }
}

impl fmt::Display for UnaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An infix operator (`language.md` §10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `||`: the left operand when truthy, else the right one.
    Or,
    /// `&&`: the left operand when falsy, else the right one.
    And,
    /// `==`: strict identity (same as `===`).
    Eq,
    /// `!=`: strict non-identity (same as `!==`).
    Ne,
    /// `===`: strict identity.
    StrictEq,
    /// `!==`: strict non-identity.
    StrictNe,
    /// `<` on numbers.
    Lt,
    /// `<=` on numbers.
    Le,
    /// `>` on numbers.
    Gt,
    /// `>=` on numbers.
    Ge,
    /// `+`: addition, or concatenation when either side is a string.
    Add,
    /// `-` on numbers.
    Sub,
    /// `*` on numbers.
    Mul,
    /// `/` on numbers.
    Div,
    /// `%` on numbers (remainder with the sign of the dividend).
    Rem,
}

impl BinaryOp {
    /// Every operator, loosest first.
    pub const ALL: [BinaryOp; 15] = [
        BinaryOp::Or,
        BinaryOp::And,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::StrictEq,
        BinaryOp::StrictNe,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
    ];

    /// The operator as written (`||`, `===`, `%`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::StrictEq => "===",
            BinaryOp::StrictNe => "!==",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }

    /// The operator written as `text`.
    pub fn parse(text: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|op| op.as_str() == text)
    }

    /// The binding strength, from 1 (`||`, loosest) to 6 (`*` `/` `%`).
    pub const fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::StrictEq | BinaryOp::StrictNe => 3,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 4,
            BinaryOp::Add | BinaryOp::Sub => 5,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 6,
        }
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Expr {
    /// Whether this is a constant expression (`language.md` §10.3): a literal, an array of
    /// constants, a record of constant values, or a unary `-` or `+` of a constant.
    /// (`!true` and `1 + 2` are not constant.)
    #[inline]
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Literal(_) => true,
            _ => self.is_constant_compound(),
        }
    }

    /// [`Expr::is_constant`] of anything but a literal.
    fn is_constant_compound(&self) -> bool {
        match self {
            Expr::Literal(_) => true,
            Expr::Array(items) => items.iter().all(Expr::is_constant),
            Expr::Object(entries) => entries.iter().all(|(_, value)| value.is_constant()),
            Expr::Unary {
                op: UnaryOp::Neg | UnaryOp::Plus,
                value,
            } => value.is_constant(),
            _ => false,
        }
    }

    /// The variable name when this is a plain reference (`$rows` → `Some("$rows")`).
    pub fn as_reference(&self) -> Option<&str> {
        match self {
            Expr::Reference(name) => Some(name),
            _ => None,
        }
    }

    /// The value when this is a literal.
    pub fn as_literal(&self) -> Option<&Value> {
        match self {
            Expr::Literal(value) => Some(value),
            _ => None,
        }
    }

    /// The helper name (without `@`) and arguments when this is a call.
    pub fn as_call(&self) -> Option<(&str, &[Expr])> {
        match self {
            Expr::Call { name, args } => Some((name, args)),
            _ => None,
        }
    }

    /// Calls `f` with the name of every [`Expr::Reference`] anywhere inside this expression,
    /// in source order, including bare `@Filter` locals (`x` in `@Filter($l, x, x > 1)`).
    /// [`Expr::Unknown`] nodes are opaque and contribute nothing.
    pub fn visit_references(&self, f: &mut dyn FnMut(&str)) {
        walk_references(self, &mut |name| f(name));
    }

    /// The names of every reference inside this expression (see
    /// [`Expr::visit_references`]), in source order, repeats included.
    pub fn references(&self) -> impl Iterator<Item = &str> + '_ {
        let mut names: Vec<&str> = Vec::new();
        walk_references(self, &mut |name| names.push(name));
        names.into_iter()
    }
}

fn walk_references<'a>(expr: &'a Expr, f: &mut dyn FnMut(&'a str)) {
    match expr {
        Expr::Literal(_) | Expr::Unknown(_) => {}
        Expr::Reference(name) => f(name),
        Expr::Array(items) | Expr::Call { args: items, .. } => {
            for item in items {
                walk_references(item, f);
            }
        }
        Expr::Object(entries) => {
            for (_, value) in entries {
                walk_references(value, f);
            }
        }
        Expr::Member { object, key } => {
            walk_references(object, f);
            walk_references(key, f);
        }
        Expr::Unary { value, .. } => walk_references(value, f),
        Expr::Binary { left, right, .. } => {
            walk_references(left, f);
            walk_references(right, f);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Wire shape.

struct Items<'a>(&'a [Expr]);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(item)?;
        }
        seq.end()
    }
}

struct Entries<'a>(&'a [(String, Expr)]);

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (key, value) in self.0 {
            seq.serialize_element(&Entry { key, value })?;
        }
        seq.end()
    }
}

struct Entry<'a> {
    key: &'a str,
    value: &'a Expr,
}

impl Serialize for Entry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("key", self.key)?;
        map.serialize_entry("value", self.value)?;
        map.end()
    }
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Expr::Unknown(raw) = self {
            return raw.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        match self {
            Expr::Literal(value) => {
                map.serialize_entry("kind", "literal")?;
                map.serialize_entry("value", value)?;
            }
            Expr::Reference(name) => {
                map.serialize_entry("kind", "reference")?;
                map.serialize_entry("name", name)?;
            }
            Expr::Array(items) => {
                map.serialize_entry("kind", "array")?;
                map.serialize_entry("items", &Items(items))?;
            }
            Expr::Object(entries) => {
                map.serialize_entry("kind", "object")?;
                map.serialize_entry("entries", &Entries(entries))?;
            }
            Expr::Member { object, key } => {
                map.serialize_entry("kind", "member")?;
                map.serialize_entry("object", object)?;
                map.serialize_entry("key", key)?;
            }
            Expr::Unary { op, value } => {
                map.serialize_entry("kind", "unary")?;
                map.serialize_entry("operator", op.as_str())?;
                map.serialize_entry("value", value)?;
            }
            Expr::Binary { op, left, right } => {
                map.serialize_entry("kind", "binary")?;
                map.serialize_entry("operator", op.as_str())?;
                map.serialize_entry("left", left)?;
                map.serialize_entry("right", right)?;
            }
            Expr::Call { name, args } => {
                map.serialize_entry("kind", "call")?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("args", &Items(args))?;
            }
            Expr::Unknown(_) => {}
        }
        map.end()
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Expr {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expr".into()
    }

    /// Any JSON value: the tree `{kind, …}` its `Serialize` writes, or an expression this
    /// compiler does not know, kept as it came.
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!(true)
    }
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = serde_json::Value::deserialize(deserializer)?;
        Ok(read_wire(&raw, 0))
    }
}

/// Nesting beyond which wire nodes are kept as [`Expr::Unknown`] instead of being read
/// recursively (far above anything the depth budget lets evaluate).
const MAX_WIRE_DEPTH: usize = 256;

fn read_wire(raw: &serde_json::Value, depth: usize) -> Expr {
    if depth <= MAX_WIRE_DEPTH
        && let Some(expr) = read_known(raw, depth)
    {
        return expr;
    }
    Expr::Unknown(raw.clone())
}

fn read_known(raw: &serde_json::Value, depth: usize) -> Option<Expr> {
    let object = raw.as_object()?;
    let field = |name: &str| object.get(name);
    let child = |name: &str| field(name).map(|v| Box::new(read_wire(v, depth + 1)));
    let list = |name: &str| {
        field(name)?.as_array().map(|items| {
            items
                .iter()
                .map(|v| read_wire(v, depth + 1))
                .collect::<Vec<_>>()
        })
    };
    Some(match object.get("kind")?.as_str()? {
        "literal" => Expr::Literal(Value::deserialize(field("value")?).ok()?),
        "reference" => Expr::Reference(field("name")?.as_str()?.to_owned()),
        "array" => Expr::Array(list("items")?),
        "object" => {
            let entries = field("entries")?.as_array()?;
            let mut out = Vec::with_capacity(entries.len());
            for entry in entries {
                let entry = entry.as_object()?;
                let key = entry.get("key")?.as_str()?.to_owned();
                out.push((key, read_wire(entry.get("value")?, depth + 1)));
            }
            Expr::Object(out)
        }
        "member" => Expr::Member {
            object: child("object")?,
            key: child("key")?,
        },
        "unary" => Expr::Unary {
            op: UnaryOp::parse(field("operator")?.as_str()?)?,
            value: child("value")?,
        },
        "binary" => Expr::Binary {
            op: BinaryOp::parse(field("operator")?.as_str()?)?,
            left: child("left")?,
            right: child("right")?,
        },
        "call" => Expr::Call {
            name: field("name")?.as_str()?.to_owned(),
            args: list("args")?,
        },
        _ => return None,
    })
}
