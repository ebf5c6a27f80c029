//! The component catalog (`catalog.md`, catalog version [`CATALOG_VERSION`]): the 36
//! components a block may use, their [`Group`]s, props, placement rules, bindings and actions.
//!
//! Everything comes from one static table. From it this module answers lookups
//! ([`lookup`], [`components`]), validates props strictly ([`Component::validate`], with the
//! one coercion of `File.line`), and builds the texts shown to the agent ([`catalog_text`],
//! [`compact_catalog`], [`session_note`], [`reference_text`], [`example`]) and the longer
//! writing [`guide`].
//!
//! ```
//! use ui_core::catalog::{self, Group};
//! use ui_core::{Code, Value};
//!
//! let slider = catalog::lookup("Slider").unwrap();
//! assert_eq!(slider.group(), Group::Inputs);
//! assert_eq!(slider.binding(), Some("value"));
//! assert_eq!(slider.prop_list(), ["value", "min", "max", "step?", "unit?"]);
//!
//! let props = Value::from_json_str(r#"{"value": 12, "min": 0, "max": 10}"#).unwrap();
//! let error = slider.validate(props.as_record().unwrap()).unwrap_err();
//! assert_eq!(error.code(), Code::InvalidProps);
//!
//! assert!(catalog::lookup("summary").is_none());
//! assert!(catalog::compact_catalog().starts_with("Summary: tone?,badge? · Callout"));
//! ```
//!
//! [`CATALOG_VERSION`]: crate::CATALOG_VERSION

use std::fmt;

use crate::code::Code;
use crate::diag::Failure;
use crate::props::ReadProps;
use crate::value::{Record, Value};

mod check;
mod guide;
mod table;
mod texts;

pub use guide::guide;
pub use texts::{catalog_text, compact_catalog, example, reference_text, session_note};

/// The seven groups of the catalog, in the order the reference text lists them
/// (`catalog.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Group {
    /// `status`: outcomes and progress.
    Status,
    /// `data`: numbers and records.
    Data,
    /// `structure`: tabs and sections.
    Structure,
    /// `content`: code, images and sources.
    Content,
    /// `links`: resources the host owns.
    Links,
    /// `inputs`: controls over block state, Button, Show and Each.
    Inputs,
    /// `choices`: the next steps on offer.
    Choices,
}

impl Group {
    /// Every group, in catalog order.
    pub const ALL: &'static [Group] = &[
        Group::Status,
        Group::Data,
        Group::Structure,
        Group::Content,
        Group::Links,
        Group::Inputs,
        Group::Choices,
    ];

    /// The group id: `status`, `data`, `structure`, `content`, `links`, `inputs` or
    /// `choices`.
    pub const fn id(self) -> &'static str {
        match self {
            Group::Status => "status",
            Group::Data => "data",
            Group::Structure => "structure",
            Group::Content => "content",
            Group::Links => "links",
            Group::Inputs => "inputs",
            Group::Choices => "choices",
        }
    }

    /// The one-line description shown to the agent.
    pub const fn description(self) -> &'static str {
        match self {
            Group::Status => "Report an outcome or how far work has got.",
            Group::Data => "Put numbers and records side by side.",
            Group::Structure => "Split separate topics apart.",
            Group::Content => "Embed code, chat attachments and cited sources.",
            Group::Links => "Point at a resource the host owns.",
            Group::Inputs => "Edit state that lives in the block.",
            Group::Choices => "Let the person pick what happens next.",
        }
    }

    /// The rules line shown to the agent.
    pub const fn rules(self) -> &'static str {
        match self {
            Group::Status => {
                "Start the block with exactly one Summary. Put only inline prose inside these \
                 components — no headings, no tables."
            }
            Group::Data => {
                "Write numeric values as numbers. A tone states what a value means; never derive \
                 it from a rise or fall."
            }
            Group::Structure => {
                "Put competing alternatives in Tabs and unrelated topics in Sections."
            }
            Group::Content => {
                "For an Image, name a chat attachment or write generated=\"latest\"; web \
                 addresses and file paths are not accepted."
            }
            Group::Links => {
                "Only name targets; the host verifies each one, and nothing navigates or reads \
                 files on its own."
            }
            Group::Inputs => {
                "Connect a control to state with value={$name}. Buttons use \
                 action={@Set($name, value)} with a literal value, or {@Reset($name)} / \
                 {@Reset()} to go back to defaults. Nothing leaves the block until a Choice \
                 sends its visible context."
            }
            Group::Choices => {
                "Keep each label short and its visible context precise. A Choice can be sent \
                 once, and only after the reply has finished streaming."
            }
        }
    }

    /// The name the docs use: Status, Data, Structure, Content, Host links, Local inputs,
    /// Choices.
    pub const fn display_name(self) -> &'static str {
        match self {
            Group::Status => "Status",
            Group::Data => "Data",
            Group::Structure => "Structure",
            Group::Content => "Content",
            Group::Links => "Host links",
            Group::Inputs => "Local inputs",
            Group::Choices => "Choices",
        }
    }
}

impl fmt::Display for Group {
    /// Writes the group [id](Group::id).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// The shape a prop value must have (`catalog.md` §1 and §4). Lengths count UTF-16 units.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PropKind {
    /// `Text`: a string of 0 ..= 16,384 characters (code points).
    Text,
    /// `Name`: a string of 1 ..= 256 characters (code points).
    Name,
    /// A `Name` that also matches `^[A-Za-z_][A-Za-z0-9_]*$` (`Each.as`).
    Identifier,
    /// A finite number, bounded below when `min` is set.
    Number {
        /// The lower bound, if any.
        min: Option<f64>,
        /// Whether the bound itself is excluded (`> min` rather than `>= min`).
        exclusive: bool,
    },
    /// `true` or `false`.
    Bool,
    /// `Scalar`: a `Text`, a number, a boolean or null.
    Scalar,
    /// `Tone`: one of `neutral`, `info`, `success`, `warning`, `danger`.
    Tone,
    /// One of the listed strings, case-sensitive.
    Enum(&'static [&'static str]),
    /// `Rows`: at most 1,000 records with unrestricted values.
    Rows,
    /// `Chart.data`: at most 1,000 records whose values are `Scalar`s.
    ChartData,
    /// At most 1,000 `Scalar`s (`Checklist.value`).
    ScalarList,
    /// At most 1,000 values of any kind (`Each.items`).
    AnyList,
    /// `File.line`: JavaScript `Number(x)`, then an integer in 1 ..= 10,000,000. The only
    /// kind that changes the value (to the number).
    FileLine,
    /// `Commit.sha`: 7 ..= 64 ASCII hex digits.
    Sha,
    /// `Source.url`: a `Text` that starts with `http://` or `https://`, ASCII
    /// case-insensitive.
    HttpUrl,
    /// Only the literal string `"latest"` (`Image.generated`).
    Latest,
}

impl fmt::Display for PropKind {
    /// A short description of the shape, for people.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropKind::Text => f.write_str("text"),
            PropKind::Name => f.write_str("name"),
            PropKind::Identifier => f.write_str("identifier"),
            PropKind::Number { min: None, .. } => f.write_str("number"),
            PropKind::Number {
                min: Some(min),
                exclusive,
            } => {
                let op = if *exclusive { ">" } else { ">=" };
                write!(f, "number {op} {}", crate::value::number_text(*min))
            }
            PropKind::Bool => f.write_str("boolean"),
            PropKind::Scalar => f.write_str("scalar"),
            PropKind::Tone => f.write_str("tone"),
            PropKind::Enum(options) => write!(f, "one of {}", options.join("|")),
            PropKind::Rows => f.write_str("array of records"),
            PropKind::ChartData => f.write_str("array of records of scalars"),
            PropKind::ScalarList => f.write_str("array of scalars"),
            PropKind::AnyList => f.write_str("array"),
            PropKind::FileLine => f.write_str("line number"),
            PropKind::Sha => f.write_str("commit hash"),
            PropKind::HttpUrl => f.write_str("http(s) address"),
            PropKind::Latest => f.write_str("\"latest\""),
        }
    }
}

/// One declared prop of a component.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropSpec {
    name: &'static str,
    kind: PropKind,
    required: bool,
    when_absent: Option<&'static str>,
}

impl PropSpec {
    /// The prop name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The shape its value must have.
    pub const fn kind(&self) -> PropKind {
        self.kind
    }

    /// Whether the prop must be present.
    pub const fn required(&self) -> bool {
        self.required
    }

    /// What a renderer or the runtime does when this optional prop is left out (the
    /// "semantic default" of `catalog.md` §4), for people and agents: the prop itself stays
    /// absent, there are no schema defaults. `None` for a required prop, and for `Image`'s
    /// `attachment`/`generated`, of which exactly one is given.
    pub const fn when_absent(&self) -> Option<&'static str> {
        self.when_absent
    }

    /// Whether `value` has the prop's shape: what [`Component::check`] asks of each prop
    /// on its own.
    #[inline]
    pub fn accepts(&self, value: &Value) -> bool {
        check::passes(self.kind, value)
    }
}

/// A cross-prop rule, checked after every prop passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refinement {
    /// Exactly one of `attachment` and `generated` is truthy.
    Image,
    /// `min < max` and `min <= value <= max`.
    Slider,
}

impl Refinement {
    /// The rule in words, for references and agents.
    const fn rule(self) -> &'static str {
        match self {
            Refinement::Image => "exactly one of `attachment` and `generated`",
            Refinement::Slider => "`min < max` and `min <= value <= max`",
        }
    }
}

/// One entry of the catalog: static data, see [`components`] and [`lookup`].
#[derive(Debug, PartialEq)]
pub struct Component {
    name: &'static str,
    group: Group,
    description: &'static str,
    props: &'static [PropSpec],
    refinement: Option<Refinement>,
    parent: Option<&'static str>,
    children: Option<&'static [&'static str]>,
    binding: Option<&'static str>,
    action: Option<&'static str>,
    pass_through: bool,
}

impl Component {
    /// The tag name, e.g. `Summary`.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The group the component belongs to.
    pub const fn group(&self) -> Group {
        self.group
    }

    /// The rule between its props that is checked once each prop passed, in words
    /// (`Image`: one of `attachment` and `generated`; `Slider`: `min < max` around
    /// `value`), or `None`.
    pub fn cross_prop_rule(&self) -> Option<&'static str> {
        self.refinement.map(Refinement::rule)
    }

    /// The one-line description shown to the agent.
    pub const fn description(&self) -> &'static str {
        self.description
    }

    /// The schema props in declaration order. Button's action prop is not among them.
    pub const fn props(&self) -> &'static [PropSpec] {
        self.props
    }

    /// Whether `name` is a schema prop (Button's action prop is not one).
    pub fn has_prop(&self, name: &str) -> bool {
        self.prop(name).is_some()
    }

    /// The schema prop called `name`.
    #[inline]
    pub fn prop(&self, name: &str) -> Option<&'static PropSpec> {
        self.props
            .iter()
            .find(|p| crate::props::same_name(p.name, name))
    }

    /// The only component this one may stand in (through Show and Each), if restricted.
    pub const fn parent(&self) -> Option<&'static str> {
        self.parent
    }

    /// The only component types this container accepts as element children (besides Show
    /// and Each), if restricted.
    pub const fn children(&self) -> Option<&'static [&'static str]> {
        self.children
    }

    /// The prop a bare `{$name}` binds to local state: `Some("value")` for Checklist,
    /// Switch, Slider and Segmented.
    pub const fn binding(&self) -> Option<&'static str> {
        self.binding
    }

    /// The prop holding an unevaluated state action: `Some("action")` for Button only.
    pub const fn action(&self) -> Option<&'static str> {
        self.action
    }

    /// Whether the component hands its own effective parent to its children and has no
    /// view node of its own (Show and Each).
    pub const fn is_pass_through(&self) -> bool {
        self.pass_through
    }

    /// The prop list of the agent texts (`catalog.md` §6.3): the action prop first, then the
    /// schema props in order, each optional one suffixed with `?`.
    pub fn prop_list(&self) -> Vec<String> {
        self.action
            .iter()
            .map(|a| (*a).to_owned())
            .chain(self.props.iter().map(|p| {
                if p.required {
                    p.name.to_owned()
                } else {
                    format!("{}?", p.name)
                }
            }))
            .collect()
    }

    /// Checks `props` against the strict schema and returns the normalised props.
    ///
    /// The schema props are checked in declaration order, then undeclared keys (an action
    /// prop counts as undeclared: callers pass props without it), then the component's
    /// refinement. The first failure is returned. The output holds the present props in
    /// declaration order; only `File.line` changes (coerced to a number). There are no
    /// defaults: an absent optional prop stays absent.
    pub fn validate(&self, props: &impl ReadProps) -> Result<Record, PropsError> {
        let mut out = crate::value::record_with_capacity(props.prop_count());
        self.check_props(props, Some(&mut out))?;
        Ok(out)
    }

    /// The verdict of [`Component::check`] when it is a pass, found by walking the props
    /// instead of hashing every schema name: `false` sends the caller down the ordered walk
    /// that finds the first failure.
    fn props_pass(&self, props: &impl ReadProps) -> bool {
        let mut required = 0;
        for (key, value) in props.prop_entries() {
            let Some(spec) = self.prop(key) else {
                return false;
            };
            if !spec.accepts(value) {
                return false;
            }
            required += usize::from(spec.required);
        }
        self.passes_accepted(props, required)
    }

    /// [`Component::check`]'s verdict on `props` whose keys are all schema props and whose
    /// values each [`PropSpec::accepts`], `required` of them required props: whether every
    /// required prop is there and the cross-prop rule holds. For a caller that checked each
    /// prop as it built the record; on `false`, [`Component::check`] names the failure.
    pub fn passes_accepted(&self, props: &impl ReadProps, required: usize) -> bool {
        required == self.props.iter().filter(|p| p.required).count()
            && self
                .refinement
                .is_none_or(|refinement| check::refine(refinement, props).is_ok())
    }

    /// Whether `props` pass the schema: [`Component::validate`] without building the
    /// normalised record, for callers that only need the verdict (the compiler).
    pub fn check(&self, props: &impl ReadProps) -> Result<(), PropsError> {
        self.check_props(props, None)
    }

    fn check_props(
        &self,
        props: &impl ReadProps,
        mut out: Option<&mut Record>,
    ) -> Result<(), PropsError> {
        if out.is_none() && self.props_pass(props) {
            return Ok(());
        }
        let mut seen = 0;
        for spec in self.props {
            match props.get_prop(spec.name) {
                None if spec.required => {
                    return Err(PropsError::at(spec.name, String::new(), "required"));
                }
                None => {}
                Some(value) => {
                    seen += 1;
                    let checked = check::check(spec.kind, value)
                        .map_err(|issue| PropsError::at(spec.name, issue.path, &issue.reason))?;
                    if let Some(out) = out.as_deref_mut() {
                        out.insert(
                            spec.name.to_owned(),
                            checked.unwrap_or_else(|| value.clone()),
                        );
                    }
                }
            }
        }
        // Every key was a schema prop when as many were found as there are keys.
        if seen != props.prop_count()
            && let Some(key) = props
                .prop_entries()
                .map(|(k, _)| k)
                .find(|k| !self.has_prop(k))
        {
            let reason = if self.props.is_empty() {
                format!("unknown prop; {} takes no props", self.name)
            } else {
                let names: Vec<&str> = self.props.iter().map(|p| p.name).collect();
                format!("unknown prop; {} takes {}", self.name, names.join(", "))
            };
            return Err(PropsError::at(key, String::new(), &reason));
        }
        if let Some(refinement) = self.refinement {
            // Refinements read no prop that validation coerces (only `File.line` changes).
            let refined = match out {
                Some(out) => check::refine(refinement, &*out),
                None => check::refine(refinement, props),
            };
            refined.map_err(|issue| PropsError {
                prop: None,
                message: issue.reason.into(),
            })?;
        }
        Ok(())
    }
}

/// Props that fail a component's schema. Its code is always [`Code::InvalidProps`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PropsError {
    prop: Option<Box<str>>,
    message: Box<str>,
}

impl PropsError {
    fn at(prop: &str, path: String, reason: &str) -> Self {
        PropsError {
            prop: Some(prop.into()),
            message: format!("{prop}{path}: {reason}").into(),
        }
    }

    /// Always [`Code::InvalidProps`].
    pub fn code(&self) -> Code {
        Code::InvalidProps
    }

    /// What failed, naming the prop path first (`tone: expected one of …`,
    /// `rows[3]: expected record, received array`); a refinement failure names no prop.
    /// Not part of the contract.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The top-level prop that failed, or `None` for a refinement failure.
    pub fn prop(&self) -> Option<&str> {
        self.prop.as_deref()
    }
}

impl From<PropsError> for Failure {
    fn from(error: PropsError) -> Self {
        Failure::new(Code::InvalidProps, error.message)
    }
}

/// The component named `name`: exact and case-sensitive (`summary`, `toString` and
/// `__proto__` are not components).
///
/// One probe of a table built at compile time (the compiler looks up every tag, often
/// more than once), then one comparison.
#[inline]
pub fn lookup(name: &str) -> Option<&'static Component> {
    let slot = SLOTS[name_slot(name.as_bytes())];
    let component = table::COMPONENTS.get(usize::from(slot))?;
    crate::props::same_name(component.name, name).then_some(component)
}

/// The number of [`SLOTS`]: a power of two.
const SLOT_COUNT: usize = 128;

/// An empty slot of [`SLOTS`].
const NO_COMPONENT: u8 = u8::MAX;

/// The slot of a name: a hash of its length and three of its bytes, which tells the 36
/// component names apart (checked when [`SLOTS`] is built).
#[inline]
const fn name_slot(name: &[u8]) -> usize {
    let n = name.len();
    if n == 0 {
        return 0;
    }
    let mix = n + name[0] as usize * 13 + name[n - 1] as usize * 3 + name[n / 2] as usize * 5;
    mix % SLOT_COUNT
}

/// Each component's index in the catalog at its name's slot; [`NO_COMPONENT`] elsewhere.
/// Building it fails the build if two names share a slot.
static SLOTS: [u8; SLOT_COUNT] = {
    let mut slots = [NO_COMPONENT; SLOT_COUNT];
    let mut i = 0;
    while i < table::COMPONENTS.len() {
        let slot = name_slot(table::COMPONENTS[i].name.as_bytes());
        assert!(
            slots[slot] == NO_COMPONENT,
            "two component names share a slot"
        );
        slots[slot] = i as u8;
        i += 1;
    }
    slots
};

/// All 36 components in catalog order.
pub fn components() -> &'static [Component] {
    &table::COMPONENTS
}
