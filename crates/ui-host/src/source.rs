//! What a host registers: [`UiSource`]s with argument and result schemas, `authorize` and
//! `read`; the [`Typed`] adapter for Rust hosts with serde + garde types; JSON Schema
//! sources for hosts without Rust types; and the [`UiHost`] that captures access and
//! resolves links (`host.md` §3).

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use ui_compiler::QuerySchemas;
use ui_core::{Record, Value};
use ui_links::LinkTarget;

use crate::changes::ChangeFeed;
use crate::reading::HostError;
use ui_compiler::JsonSchema;

/// What the host knows of a chat when it captures, authorizes, reads or links.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatInfo {
    /// The chat's id.
    pub chat_id: String,
    /// Whatever else the host application records about the chat (owner, project, …).
    pub data: Value,
}

/// A schema that validates a value and may transform it (fill defaults, strip fields): the
/// parsed output is what the host uses from then on.
pub trait ValueSchema: Send + Sync + 'static {
    /// The parsed value, or why `value` does not pass. A function of `value` alone: the
    /// service remembers the parsed arguments of a block revision's query for an input,
    /// and keys its cache and shared reads by them.
    ///
    /// # Errors
    /// A message naming what failed.
    fn parse(&self, value: &Value) -> Result<Value, String>;
}

impl ValueSchema for ui_compiler::JsonSchema {
    fn parse(&self, value: &Value) -> Result<Value, String> {
        self.check(value).map(|()| value.clone())
    }
}

/// The schema of a serde + garde type: deserialize, validate, serialize back. Use
/// `#[serde(deny_unknown_fields)]` for strict records and `#[serde(default)]` for defaults.
pub struct Typed<T>(PhantomData<fn() -> T>);

impl<T> Typed<T> {
    /// The schema of `T`.
    pub fn new() -> Self {
        Typed(PhantomData)
    }
}

impl<T> Default for Typed<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Typed<{}>", std::any::type_name::<T>())
    }
}

/// Deserializes and validates a `T` from a value.
fn decode<T>(value: &Value) -> Result<T, String>
where
    T: DeserializeOwned + garde::Validate,
    T::Context: Default,
{
    let typed: T =
        serde_json::from_value(serde_json::Value::from(value)).map_err(|e| e.to_string())?;
    typed.validate().map_err(|report| rules_broken(&report))?;
    Ok(typed)
}

/// What `report` says, on one line: each broken rule as `path: message` (the message alone
/// for the value as a whole), joined by `; ` — garde's own text ends every rule with a line
/// feed, which a diagnostic's message would carry.
fn rules_broken(report: &garde::Report) -> String {
    report
        .iter()
        .map(|(path, error)| {
            if path.is_empty() {
                error.to_string()
            } else {
                format!("{path}: {error}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Serializes a `T` back into a value.
fn encode<T: Serialize>(typed: &T) -> Result<Value, String> {
    let json = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    Ok(Value::from(&json))
}

impl<T> ValueSchema for Typed<T>
where
    T: DeserializeOwned + Serialize + garde::Validate + 'static,
    T::Context: Default,
{
    fn parse(&self, value: &Value) -> Result<Value, String> {
        encode(&decode::<T>(value)?)
    }
}

/// One read the host asks a source for.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    /// The chat's current info.
    pub info: Arc<ChatInfo>,
    /// The parsed arguments.
    pub args: Record,
    /// The access captured when the reply was written.
    pub access: Arc<Value>,
    /// Cancelled at the read timeout; the source should stop its work.
    pub cancel: CancellationToken,
}

/// A registered query source (`ChatUiSource`).
#[async_trait]
pub trait UiSource: Send + Sync + 'static {
    /// The argument schema: checked by the compiler and parsed before every read.
    fn args(&self) -> &dyn ValueSchema;
    /// The result schema: what `read` returns must pass it.
    fn result(&self) -> &dyn ValueSchema;
    /// Runs before every read and every cache hit; an error refuses.
    async fn authorize(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: &Record,
    ) -> Result<(), HostError>;
    /// Produces the result. Runs on its own task; it may outlive the request.
    async fn read(&self, request: ReadRequest) -> Result<Value, HostError>;
    /// The source's change feed, if its writes are recorded as change events.
    fn changes(&self) -> Option<&dyn ChangeFeed> {
        None
    }
}

/// A source with Rust types for its arguments and result (serde + garde), adapted to
/// [`UiSource`] by [`Typed`].
#[async_trait]
pub trait TypedSource: Send + Sync + 'static {
    /// The argument record.
    type Args: DeserializeOwned + Serialize + garde::Validate<Context = ()> + Send + Sync + 'static;
    /// The result.
    type Output: DeserializeOwned
        + Serialize
        + garde::Validate<Context = ()>
        + Send
        + Sync
        + 'static;
    /// Permits or refuses a read of `args` for the chat.
    async fn authorize(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: &Self::Args,
    ) -> Result<(), HostError>;
    /// Reads `args`; `cancel` fires at the timeout.
    async fn read(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: Self::Args,
        cancel: CancellationToken,
    ) -> Result<Self::Output, HostError>;
}

/// The [`UiSource`] of a [`TypedSource`].
#[derive(Debug)]
pub struct TypedAdapter<S: TypedSource> {
    source: S,
    args: Typed<S::Args>,
    result: Typed<S::Output>,
}

impl<S: TypedSource> TypedAdapter<S> {
    /// Adapts `source`.
    pub fn new(source: S) -> Self {
        TypedAdapter {
            source,
            args: Typed::new(),
            result: Typed::new(),
        }
    }
}

#[async_trait]
impl<S: TypedSource> UiSource for TypedAdapter<S> {
    fn args(&self) -> &dyn ValueSchema {
        &self.args
    }

    fn result(&self) -> &dyn ValueSchema {
        &self.result
    }

    async fn authorize(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: &Record,
    ) -> Result<(), HostError> {
        let args: S::Args = decode(&Value::record(args.clone())).map_err(HostError::Message)?;
        self.source.authorize(info, access, &args).await
    }

    async fn read(&self, request: ReadRequest) -> Result<Value, HostError> {
        let args: S::Args = decode(&Value::record(request.args)).map_err(HostError::Message)?;
        let out = self
            .source
            .read(&request.info, &request.access, args, request.cancel)
            .await?;
        encode(&out).map_err(HostError::Message)
    }
}

/// The boxed future of a [`FnSource`] callback.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

type AuthorizeFn =
    dyn Fn(Arc<ChatInfo>, Arc<Value>, Record) -> BoxFuture<Result<(), HostError>> + Send + Sync;
type CheckFn = dyn Fn(&ChatInfo, &Value, &Record) -> Result<(), HostError> + Send + Sync;
type ReadFn = dyn Fn(ReadRequest) -> BoxFuture<Result<Value, HostError>> + Send + Sync;

/// A [`FnSource`]'s permission check: a future of its own copies of the inputs, or a check
/// that runs in place.
enum Authorize {
    Async(Box<AuthorizeFn>),
    Check(Box<CheckFn>),
}

/// A source described by JSON Schemas (`driver.md` subset) with its callbacks as closures,
/// for hosts configured without Rust types.
pub struct FnSource {
    args: Arc<dyn ValueSchema>,
    result: Arc<dyn ValueSchema>,
    authorize: Authorize,
    read: Box<ReadFn>,
    changes: Option<Box<dyn ChangeFeed>>,
}

impl std::fmt::Debug for FnSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnSource").finish_non_exhaustive()
    }
}

impl FnSource {
    /// A source with these schemas that permits every read and reads with `read`.
    pub fn new<F, Fut>(args: impl ValueSchema, result: impl ValueSchema, read: F) -> Self
    where
        F: Fn(ReadRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, HostError>> + Send + 'static,
    {
        FnSource {
            args: Arc::new(args),
            result: Arc::new(result),
            authorize: Authorize::Check(Box::new(|_, _, _| Ok(()))),
            read: Box::new(move |request| Box::pin(read(request))),
            changes: None,
        }
    }

    /// A source whose schemas are JSON Schemas (`driver.md` subset).
    ///
    /// # Errors
    /// A message when a schema uses something outside the subset.
    pub fn from_json_schemas<F, Fut>(
        args: &serde_json::Value,
        result: &serde_json::Value,
        read: F,
    ) -> Result<Self, String>
    where
        F: Fn(ReadRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, HostError>> + Send + 'static,
    {
        Ok(FnSource::new(
            JsonSchema::new(args)?,
            JsonSchema::new(result)?,
            read,
        ))
    }

    /// The same source with a change feed: its readings follow change events.
    pub fn with_changes(mut self, changes: impl ChangeFeed) -> Self {
        self.changes = Some(Box::new(changes));
        self
    }

    /// The same source with `authorize` as its permission check.
    pub fn with_authorize<F, Fut>(mut self, authorize: F) -> Self
    where
        F: Fn(Arc<ChatInfo>, Arc<Value>, Record) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), HostError>> + Send + 'static,
    {
        self.authorize = Authorize::Async(Box::new(move |i, a, r| Box::pin(authorize(i, a, r))));
        self
    }

    /// The same source with `check` as its permission check, for a check that needs no I/O
    /// (fields of the access, the chat's project): it runs in place on every read and cache
    /// hit, without the copies of the chat, the access and the arguments that an
    /// [`FnSource::with_authorize`] future owns.
    pub fn with_authorize_check<F>(mut self, check: F) -> Self
    where
        F: Fn(&ChatInfo, &Value, &Record) -> Result<(), HostError> + Send + Sync + 'static,
    {
        self.authorize = Authorize::Check(Box::new(check));
        self
    }
}

#[async_trait]
impl UiSource for FnSource {
    fn args(&self) -> &dyn ValueSchema {
        &*self.args
    }

    fn result(&self) -> &dyn ValueSchema {
        &*self.result
    }

    async fn authorize(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: &Record,
    ) -> Result<(), HostError> {
        match &self.authorize {
            Authorize::Check(check) => check(info, access, args),
            Authorize::Async(authorize) => {
                authorize(
                    Arc::new(info.clone()),
                    Arc::new(access.clone()),
                    args.clone(),
                )
                .await
            }
        }
    }

    async fn read(&self, request: ReadRequest) -> Result<Value, HostError> {
        (self.read)(request).await
    }

    fn changes(&self) -> Option<&dyn ChangeFeed> {
        self.changes.as_deref()
    }
}

/// The registered sources by name. It gives the compiler its query schemas
/// ([`QuerySchemas`]): exactly each source's argument schema.
#[derive(Clone, Default)]
pub struct SourceRegistry {
    /// Names shared, not copied: every read of a source keeps its name in its share key.
    sources: BTreeMap<Arc<str>, Arc<dyn UiSource>>,
}

impl std::fmt::Debug for SourceRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.sources.keys()).finish()
    }
}

impl SourceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `source` under `name` (the literal agents write in `@Query("…")`).
    pub fn register(&mut self, name: impl Into<String>, source: impl UiSource) -> &mut Self {
        self.sources.insert(name.into().into(), Arc::new(source));
        self
    }

    /// Registers a source that is already shared under `name` (as [`Self::register`]).
    pub fn register_shared(
        &mut self,
        name: impl Into<String>,
        source: Arc<dyn UiSource>,
    ) -> &mut Self {
        self.sources.insert(name.into().into(), source);
        self
    }

    /// The source named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn UiSource>> {
        self.sources.get(name)
    }

    /// The source named `name` with its registered name, shared.
    pub(crate) fn named(&self, name: &str) -> Option<(&Arc<str>, &Arc<dyn UiSource>)> {
        self.sources.get_key_value(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(|name| &**name)
    }
}

impl QuerySchemas for SourceRegistry {
    fn check(&self, source: &str, args: &Value) -> Option<Result<(), String>> {
        self.sources
            .get(source)
            .map(|s| s.args().parse(args).map(|_| ()))
    }
}

/// Resolves link targets for a host (`link(info, access, target)`).
#[async_trait]
pub trait LinkResolver: Send + Sync + 'static {
    /// The resolution as raw JSON, so the service validates it exactly (`host.md` §13.5);
    /// build it with `serde_json::to_value(LinkResolution { .. })`.
    async fn link(
        &self,
        info: &ChatInfo,
        access: &Value,
        target: &LinkTarget,
    ) -> Result<serde_json::Value, HostError>;
}

/// The host application (`ChatUiHost`): captures access, owns the sources, may resolve
/// links.
#[async_trait]
pub trait UiHost: Send + Sync + 'static {
    /// Records what the writing chat may read; called at most once per reply.
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError>;
    /// The registered sources.
    fn sources(&self) -> &SourceRegistry;
    /// The link resolver, if the host resolves links.
    fn links(&self) -> Option<&dyn LinkResolver> {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::UiRefusal;

    fn source() -> FnSource {
        FnSource::from_json_schemas(&json!({"type": "object"}), &json!({}), |_| async {
            Ok(Value::Null)
        })
        .expect("schemas of the subset")
    }

    fn inputs(user: Option<&str>) -> (ChatInfo, Value, Record) {
        let mut access = Record::default();
        if let Some(user) = user {
            access.insert("user".to_owned(), Value::from(user));
        }
        let info = ChatInfo {
            chat_id: "c1".to_owned(),
            data: Value::Null,
        };
        (info, Value::record(access), Record::default())
    }

    /// Both forms of a permission check see the same inputs and answer alike; a source
    /// without one permits every read.
    #[tokio::test]
    async fn a_check_in_place_answers_as_a_future_does() {
        let rule = |info: &ChatInfo, access: &Value, _: &Record| -> Result<(), HostError> {
            match access.as_record().and_then(|a| a.get("user")) {
                Some(_) if info.chat_id == "c1" => Ok(()),
                _ => Err(UiRefusal::new("access-unavailable", "no user").into()),
            }
        };
        let checked = source().with_authorize_check(rule);
        let future = source()
            .with_authorize(move |info, access, args| async move { rule(&info, &access, &args) });
        for user in [Some("u1"), None] {
            let (info, access, args) = inputs(user);
            let a = checked.authorize(&info, &access, &args).await;
            let b = future.authorize(&info, &access, &args).await;
            assert_eq!(a.is_ok(), user.is_some());
            assert_eq!(a, b);
        }
        let (info, access, args) = inputs(None);
        assert!(source().authorize(&info, &access, &args).await.is_ok());
    }
}
