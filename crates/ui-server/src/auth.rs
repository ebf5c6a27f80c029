//! Who is asking: the [`Principal`] of a request, found by a pluggable [`Authenticator`].
//! The demo's [`DemoAuth`] keeps cookie sessions for two fixed users so that per-user
//! isolation can be seen and tested.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use indexmap::IndexMap;
use serde::Serialize;
use ui_core::SyncLimits;
use ui_sync::{Audience, AudienceSet};

use crate::error::{ApiError, ErrorCode};
use crate::limits::{AUTH_TIMEOUT, MAX_DEMO_SESSIONS};
use crate::routes::LoggedUser;
use crate::state::AppState;

/// A signed-in person: their id, the organisations and projects they belong to (projects
/// most recently used first), and the session the request came with (streams and poll
/// rates are counted per session).
///
/// Build one with [`Principal::new`] (and [`Principal::with_orgs`]): the struct is
/// `#[non_exhaustive]`, so what it learns to carry later does not break an authenticator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Principal {
    /// The user id.
    pub user_id: String,
    /// The organisations the user is a member of: change events of audience `org:<id>`
    /// reach the user (`sync.md` §5.1). Authorization of reads and chats goes by projects.
    /// Sent to clients only when there are some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orgs: Vec<String>,
    /// The projects the user is a member of.
    pub projects: Vec<String>,
    /// The session id (never sent back to clients).
    #[serde(skip)]
    pub session: String,
}

impl Principal {
    /// `user_id`, a member of `projects` (most recently used first) and of no organisation,
    /// signed in with `session`.
    pub fn new(
        user_id: impl Into<String>,
        projects: Vec<String>,
        session: impl Into<String>,
    ) -> Self {
        Principal {
            user_id: user_id.into(),
            orgs: Vec::new(),
            projects,
            session: session.into(),
        }
    }

    /// The same principal, a member of the organisations `orgs`.
    #[must_use]
    pub fn with_orgs(mut self, orgs: Vec<String>) -> Self {
        self.orgs = orgs;
        self
    }

    /// The audience set of `sync.md` §5.1: `user:<self>`, `org:<id>` for each organisation,
    /// `project:<id>` for each project, and `global`, at most `audienceEntries` entries
    /// (projects beyond that are left out, the least recently used first).
    pub fn audiences(&self, limits: &SyncLimits) -> AudienceSet {
        let max = usize::try_from(limits.audience_entries()).unwrap_or(usize::MAX);
        AudienceSet::new(
            std::iter::once(Audience::user(&self.user_id))
                .chain(self.orgs.iter().map(|o| Audience::org(o)))
                .chain(self.projects.iter().map(|p| Audience::project(p))),
            max,
        )
    }

    /// Whether the user belongs to `project`.
    pub fn in_project(&self, project: &str) -> bool {
        self.projects.iter().any(|p| p == project)
    }
}

/// Finds the principal of a request. A host mounts the router with its own implementation
/// (cookie, bearer token, reverse-proxy header …); `None` answers `401 unauthenticated`.
///
/// Membership changes reach open event streams in log order: after committing a change of
/// a user's projects the host calls [`crate::AppState::membership_changed`], which records
/// an `audience-changed` event for that user (`sync.md` §4.2); each of the user's open
/// streams, on reaching that event, asks [`Authenticator::refresh`] for the user's current
/// projects and applies them to every later row.
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    /// The principal of the request whose head is `parts`, or `None`. Bounded by
    /// [`crate::limits::AUTH_TIMEOUT`]: a slower answer is dropped and the request answers
    /// `503 unavailable` (with `Retry-After`).
    async fn principal(&self, parts: &Parts) -> Option<Principal>;

    /// `principal` with its memberships re-resolved now (same user and session), or `None`
    /// when they cannot be re-resolved; the stream then rotates (so does one that gets no
    /// answer within [`crate::limits::AUTH_TIMEOUT`]).
    async fn refresh(&self, _principal: &Principal) -> Option<Principal> {
        None
    }
}

/// An authenticator that knows nobody: every request is `401` (a server started without
/// the demo and without a host authenticator).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAuth;

#[async_trait]
impl Authenticator for NoAuth {
    async fn principal(&self, _: &Parts) -> Option<Principal> {
        None
    }
}

impl<S> FromRequestParts<S> for Principal
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        // Polled once first: an authenticator that answers at once (a cookie looked up in
        // memory, the usual case) arms no timer on this path every request takes.
        let answered = {
            let mut call = std::pin::pin!(state.authenticator().principal(parts));
            let first =
                std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx))).await;
            match first {
                std::task::Poll::Ready(principal) => Ok(principal),
                std::task::Poll::Pending => tokio::time::timeout(AUTH_TIMEOUT, call).await,
            }
        };
        let principal = match answered {
            Ok(principal) => principal.ok_or_else(ApiError::unauthenticated)?,
            Err(_) => {
                tracing::warn!(
                    method = %parts.method,
                    path = parts.uri.path(),
                    timeout_ms = u64::try_from(AUTH_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
                    "the authenticator did not answer in time; the request is refused"
                );
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    "The sign-in could not be checked in time.",
                )
                .with_retry_after(AUTH_TIMEOUT.as_secs()));
            }
        };
        if let Some(logged) = parts.extensions.get::<LoggedUser>() {
            logged.0.get_or_init(|| principal.user_id.clone());
        }
        Ok(principal)
    }
}

/// The host namespace of `audience-changed` events: one with audience `user:<id>` says
/// that user's memberships changed (see [`crate::AppState::membership_changed`]).
pub const MEMBERS_SOURCE: &str = "host.members";

/// The cookie that carries a demo session.
pub const SESSION_COOKIE: &str = "uiblocks_session";

/// One demo user and their projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoUser {
    /// The user id (also the login name).
    pub id: &'static str,
    /// The projects.
    pub projects: &'static [&'static str],
}

/// The two demo users: `alice` in project `web`, `bob` in project `ops`.
pub const DEMO_USERS: &[DemoUser] = &[
    DemoUser {
        id: "alice",
        projects: &["web"],
    },
    DemoUser {
        id: "bob",
        projects: &["ops"],
    },
];

/// Cookie sessions for [`DEMO_USERS`], kept in memory (a restart signs everyone out).
/// Session ids are random UUIDs; at most [`MAX_DEMO_SESSIONS`] are kept, the oldest
/// signed out first. The users' projects start as [`DEMO_USERS`] says and change with
/// [`DemoAuth::set_member`] (the demo's `POST /api/demo/members`).
#[derive(Debug, Default)]
pub struct DemoAuth {
    sessions: Mutex<IndexMap<String, &'static DemoUser>>,
    /// Projects of each user whose membership changed, most recently joined first.
    projects: Mutex<HashMap<&'static str, Vec<String>>>,
}

impl DemoAuth {
    /// No sessions yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn principal_of(&self, user: &DemoUser, session: &str) -> Principal {
        let projects = self
            .projects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(user.id)
            .cloned()
            .unwrap_or_else(|| user.projects.iter().map(|p| (*p).to_owned()).collect());
        Principal::new(user.id, projects, session)
    }

    /// Adds the demo user `user` to `project` (`member`) or removes them from it; whether
    /// anything changed. `None` for an unknown user. The caller records the change with
    /// [`crate::AppState::membership_changed`] so open streams follow it.
    pub fn set_member(&self, user: &str, project: &str, member: bool) -> Option<bool> {
        let user = DEMO_USERS.iter().find(|u| u.id == user)?;
        let mut all = self.projects.lock().unwrap_or_else(PoisonError::into_inner);
        let projects = all
            .entry(user.id)
            .or_insert_with(|| user.projects.iter().map(|p| (*p).to_owned()).collect());
        let at = projects.iter().position(|p| p == project);
        Some(match (at, member) {
            (None, true) => {
                projects.insert(0, project.to_owned());
                true
            }
            (Some(i), false) => {
                projects.remove(i);
                true
            }
            _ => false,
        })
    }

    /// Starts a session for the demo user `user`: its principal (with the new session id),
    /// or `None` for an unknown user. Returns the sessions it pushed out, if any.
    pub fn login(&self, user: &str) -> Option<(Principal, Vec<String>)> {
        let user = DEMO_USERS.iter().find(|u| u.id == user)?;
        let session = uuid::Uuid::new_v4().simple().to_string();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut evicted = Vec::new();
        while sessions.len() >= MAX_DEMO_SESSIONS {
            match sessions.shift_remove_index(0) {
                Some((old, _)) => evicted.push(old),
                None => break,
            }
        }
        sessions.insert(session.clone(), user);
        drop(sessions);
        Some((self.principal_of(user, &session), evicted))
    }

    /// Ends `session`; whether it existed.
    pub fn logout(&self, session: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shift_remove(session)
            .is_some()
    }

    /// The `Set-Cookie` value that carries `session`; `Secure` when the server is reached
    /// over HTTPS (`secure`).
    pub fn cookie(session: &str, secure: bool) -> String {
        let secure = if secure { "; Secure" } else { "" };
        format!("{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict{secure}")
    }

    /// The `Set-Cookie` value that removes the session cookie (`Secure` as [`Self::cookie`]).
    pub fn expired_cookie(secure: bool) -> String {
        let secure = if secure { "; Secure" } else { "" };
        format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
    }
}

/// The value of the cookie `name` in the request's `Cookie` headers.
pub fn cookie_value<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[async_trait]
impl Authenticator for DemoAuth {
    async fn principal(&self, parts: &Parts) -> Option<Principal> {
        let session = cookie_value(parts, SESSION_COOKIE)?;
        let user = *self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)?;
        Some(self.principal_of(user, session))
    }

    async fn refresh(&self, principal: &Principal) -> Option<Principal> {
        let user = DEMO_USERS.iter().find(|u| u.id == principal.user_id)?;
        Some(self.principal_of(user, &principal.session))
    }
}

/// The token of `Authorization: Bearer <token>`, trimmed: the scheme in any case
/// (RFC 9110 §11.1: `bearer`, `BEARER`), `None` without one. Every route that takes a
/// bearer token (JWT sign-in, `POST /ui/changes`, `GET /metrics`) reads it here.
pub(crate) fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let req = axum::http::Request::builder()
            .header("cookie", "a=1; uiblocks_session=abc ; b=2")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        assert_eq!(cookie_value(&parts, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie_value(&parts, "c"), None);
    }

    #[test]
    fn cookies_are_secure_behind_https() {
        assert!(!DemoAuth::cookie("s", false).contains("Secure"));
        assert!(DemoAuth::cookie("s", true).ends_with("; Secure"));
        assert!(DemoAuth::expired_cookie(true).ends_with("; Secure"));
    }

    #[test]
    fn the_audience_set_holds_the_user_the_orgs_the_projects_and_global() {
        let principal = Principal::new("dave", vec!["web".into(), "ops".into(), "db".into()], "s")
            .with_orgs(vec!["acme".into(), "globex".into()]);
        let all = principal.audiences(&SyncLimits::DEFAULT);
        for audience in [
            Audience::user("dave"),
            Audience::org("acme"),
            Audience::org("globex"),
            Audience::project("web"),
            Audience::project("db"),
            Audience::global(),
        ] {
            assert!(all.contains(&audience), "{audience}");
        }
        assert_eq!(all.len(), 7);
        assert!(!all.contains(&Audience::project("acme")));
        assert!(!all.contains(&Audience::user("acme")));
        // Over `audienceEntries`, the least recently used projects go first; orgs stay.
        let limits = SyncLimits::DEFAULT.with("audienceEntries", 5).unwrap();
        let cut = principal.audiences(&limits);
        assert_eq!(cut.len(), 5);
        assert!(cut.contains(&Audience::org("globex")));
        assert!(cut.contains(&Audience::project("web")));
        assert!(!cut.contains(&Audience::project("ops")));
    }

    #[test]
    fn demo_logins_know_two_users() {
        let auth = DemoAuth::new();
        let (alice, _) = auth.login("alice").unwrap();
        assert_eq!(alice.projects, ["web"]);
        assert!(alice.orgs.is_empty());
        assert!(auth.login("mallory").is_none());
        assert!(auth.logout(&alice.session));
        assert!(!auth.logout(&alice.session));
    }

    #[tokio::test]
    async fn demo_memberships_change_and_refresh_sees_them() {
        let auth = DemoAuth::new();
        let (alice, _) = auth.login("alice").unwrap();
        assert_eq!(auth.set_member("alice", "ops", true), Some(true));
        assert_eq!(auth.set_member("alice", "ops", true), Some(false));
        assert_eq!(auth.refresh(&alice).await.unwrap().projects, ["ops", "web"]);
        assert_eq!(auth.set_member("alice", "web", false), Some(true));
        let now = auth.refresh(&alice).await.unwrap();
        assert_eq!(
            (now.projects, now.session),
            (vec!["ops".to_owned()], alice.session)
        );
        assert_eq!(auth.set_member("mallory", "ops", true), None);
    }

    #[test]
    fn demo_sessions_are_bounded() {
        let auth = DemoAuth::new();
        let (first, _) = auth.login("alice").unwrap();
        for _ in 1..MAX_DEMO_SESSIONS {
            let (_, evicted) = auth.login("bob").unwrap();
            assert!(evicted.is_empty());
        }
        let (_, evicted) = auth.login("bob").unwrap();
        assert_eq!(evicted, vec![first.session.clone()]);
        assert!(!auth.logout(&first.session));
    }
}
