//! Who is asking: the [`Principal`] of a request, found by a pluggable [`Authenticator`].
//! The demo's [`DemoAuth`] keeps cookie sessions for two fixed users so that per-user
//! isolation can be seen and tested.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use indexmap::IndexMap;
use serde::Serialize;
use ui_core::SyncLimits;
use ui_sync::{Audience, AudienceSet};

use crate::error::ApiError;
use crate::limits::MAX_DEMO_SESSIONS;
use crate::routes::LoggedUser;
use crate::state::AppState;

/// A signed-in person: their id, the projects they belong to (most recently used first),
/// and the session the request came with (streams and poll rates are counted per session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The user id.
    pub user_id: String,
    /// The projects the user is a member of.
    pub projects: Vec<String>,
    /// The session id (never sent back to clients).
    #[serde(skip)]
    pub session: String,
}

impl Principal {
    /// The audience set of `sync.md` §5.1: `user:<self>`, `project:<id>` for each project,
    /// and `global`, at most `audienceEntries` entries.
    pub fn audiences(&self, limits: &SyncLimits) -> AudienceSet {
        let max = usize::try_from(limits.audience_entries()).unwrap_or(usize::MAX);
        AudienceSet::new(
            std::iter::once(Audience::user(&self.user_id))
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
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    /// The principal of the request whose head is `parts`, or `None`.
    async fn principal(&self, parts: &Parts) -> Option<Principal>;
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
        let principal = state
            .authenticator()
            .principal(parts)
            .await
            .ok_or_else(ApiError::unauthenticated)?;
        if let Some(logged) = parts.extensions.get::<LoggedUser>() {
            logged.0.get_or_init(|| principal.user_id.clone());
        }
        Ok(principal)
    }
}

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
/// signed out first.
#[derive(Debug, Default)]
pub struct DemoAuth {
    sessions: Mutex<IndexMap<String, &'static DemoUser>>,
}

impl DemoAuth {
    /// No sessions yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn principal_of(user: &DemoUser, session: &str) -> Principal {
        Principal {
            user_id: user.id.to_owned(),
            projects: user.projects.iter().map(|p| (*p).to_owned()).collect(),
            session: session.to_owned(),
        }
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
        Some((Self::principal_of(user, &session), evicted))
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
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let user = sessions.get(session)?;
        Some(Self::principal_of(user, session))
    }
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
    fn demo_logins_know_two_users() {
        let auth = DemoAuth::new();
        let (alice, _) = auth.login("alice").unwrap();
        assert_eq!(alice.projects, ["web"]);
        assert!(auth.login("mallory").is_none());
        assert!(auth.logout(&alice.session));
        assert!(!auth.logout(&alice.session));
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
