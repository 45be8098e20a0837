//! Bearer tokens: 32 random bytes, shown once, stored as SHA-256, compared in constant time;
//! grants of a role per project (or `*`). A project grant covers its sub-projects
//! (`ads` covers `ads.ranking`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use weir_api::{Grant, Role};
use weir_store::{JobStore, TokenRow};

use crate::error::{ApiError, ServerError};
use crate::time::now_ms;

/// How long a looked-up token is trusted before the store is asked again (so a revocation
/// takes effect within this time).
const CACHE_MS: i64 = 5_000;

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub token_id: String,
    pub grants: Vec<Grant>,
    /// The scheduler user its submissions run as.
    pub user: String,
    /// Other users its submissions may name (`*`: any).
    pub act_as: Vec<String>,
}

impl Principal {
    /// The scheduler user of a submission that asks for `wanted` (`None`: the token's own):
    /// the token's user, or one the token may act as.
    pub fn user_for(&self, wanted: Option<&str>) -> Result<String, ApiError> {
        match wanted {
            None => Ok(self.user.clone()),
            Some(u) if u == self.user || self.act_as.iter().any(|a| a == "*" || a == u) => Ok(u.to_string()),
            Some(u) => Err(ApiError::forbidden(format!(
                "token {} submits as user `{}` and may not act as `{u}` (an admin can allow it: act_as)",
                self.token_id, self.user
            ))
            .field("workflow.user")),
        }
    }

    /// Whether the caller holds at least `role` on `project`.
    pub fn can(&self, project: &str, role: Role) -> bool {
        self.grants.iter().any(|g| g.role >= role && covers(&g.project, project))
    }

    /// Whether the caller is an admin of everything.
    pub fn is_global_admin(&self) -> bool {
        self.can_all(Role::Admin)
    }

    /// Whether `role` holds on every project (`*`).
    pub fn can_all(&self, role: Role) -> bool {
        self.grants.iter().any(|g| g.role >= role && g.project == "*")
    }

    /// Projects the caller may read, or `None` for all.
    pub fn readable(&self) -> Option<Vec<String>> {
        if self.can_all(Role::Viewer) {
            None
        } else {
            Some(self.grants.iter().map(|g| g.project.clone()).collect())
        }
    }

    pub fn require(&self, project: &str, role: Role) -> Result<(), ApiError> {
        if self.can(project, role) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "token {} is not a {} of project `{project}`",
                self.token_id,
                role_name(role)
            )))
        }
    }
}

/// Whether a grant on `grant` covers `project` (itself or a sub-project).
pub fn covers(grant: &str, project: &str) -> bool {
    grant == "*" || grant == project || project.strip_prefix(grant).is_some_and(|rest| rest.starts_with('.'))
}

pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Viewer => "viewer",
        Role::Submitter => "submitter",
        Role::Admin => "admin",
    }
}

/// A new secret: `weir_` and 64 hex digits of 32 random bytes.
pub fn new_token() -> Result<String, getrandom::Error> {
    Ok(format!("weir_{}", random_hex()?))
}

/// 64 hex digits of 32 random bytes (session ids, login form nonces).
pub(crate) fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

/// The header through which the dashboard's session middleware hands a `/v1` read the hash of
/// the token its session logged in with. It is removed from every incoming request before the
/// middleware looks at the cookie (see `dashboard::cookie_for_reads`), so a client cannot send
/// it; only GET and HEAD requests ever get it.
pub(crate) const SESSION_TOKEN_HASH: &str = "x-weir-session-token-hash";

/// Hex SHA-256 of a secret: what the store keeps.
pub fn hash_token(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Lower-case hex of `bytes` (a table lookup per digit: this runs for every request's token).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The admin token file of a data directory (mode 0600).
pub fn admin_token_path(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.token")
}

/// On a store without tokens, create a global admin token and write it to the data
/// directory's `admin.token`, readable only by its owner. Returns the secret if it made one.
pub(crate) async fn ensure_admin_token(
    store: &dyn JobStore,
    data_dir: &Path,
) -> Result<Option<String>, ServerError> {
    if !store.tokens().await?.is_empty() {
        return Ok(None);
    }
    let path = admin_token_path(data_dir);
    let io = |action, source| ServerError::Io { action, path: path.clone(), source };
    let secret =
        new_token().map_err(|e| io("make a random token for", std::io::Error::other(e.to_string())))?;
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io("write", e))?;
        writeln!(f, "{secret}").map_err(|e| io("write", e))?;
    }
    let grants = vec![Grant { project: "*".into(), role: Role::Admin }];
    let row = TokenRow {
        id: "admin".to_string(),
        name: "admin (created at first start)".to_string(),
        hash: hash_token(&secret),
        grants: serde_json::to_string(&grants).unwrap_or_default(),
        created_ms: now_ms(),
        revoked_ms: None,
        user: Some("admin".to_string()),
        act_as: "[\"*\"]".to_string(),
    };
    store.create_token(&row).await?;
    Ok(Some(secret))
}

/// Token lookups, cached briefly; failures counted in `/metrics`. The cache is read under a
/// shared lock, so concurrent requests (most of them of a few tokens) do not queue behind
/// each other; only a lookup that went to the store takes it exclusively, to insert.
#[derive(Default)]
pub struct Authenticator {
    cache: RwLock<HashMap<String, (i64, Option<Principal>)>>,
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
}

/// The token of an `Authorization` header value: `Bearer <token>`, the scheme in any case
/// (RFC 9110 §11.1: auth schemes are case-insensitive).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Authenticator {
    pub fn new(metrics: std::sync::Arc<crate::metrics::Metrics>) -> Authenticator {
        Authenticator { cache: RwLock::default(), metrics: Some(metrics) }
    }

    fn failed(&self, reason: &str) {
        if let Some(m) = &self.metrics {
            m.auth_failed(reason);
        }
    }

    /// The caller of a request, from `Authorization: Bearer <token>`.
    pub async fn principal(&self, store: &dyn JobStore, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let Some(header) = headers.get(axum::http::header::AUTHORIZATION) else {
            if let Some(hash) = headers.get(SESSION_TOKEN_HASH).and_then(|v| v.to_str().ok()) {
                return self.principal_by_hash(store, hash.to_string()).await;
            }
            self.failed("missing");
            return Err(ApiError::unauthorized("no token: send `Authorization: Bearer <token>`"));
        };
        let Some(secret) = header.to_str().ok().and_then(bearer) else {
            self.failed("malformed");
            return Err(ApiError::unauthorized("the Authorization header is not `Bearer <token>`"));
        };
        self.principal_of(store, secret).await
    }

    /// The holder of a token secret (the dashboard's login).
    pub async fn principal_of(&self, store: &dyn JobStore, secret: &str) -> Result<Principal, ApiError> {
        self.principal_by_hash(store, hash_token(secret)).await
    }

    /// The holder of the token with this hash (a dashboard session's).
    pub async fn principal_by_hash(&self, store: &dyn JobStore, hash: String) -> Result<Principal, ApiError> {
        let now = now_ms();
        let cached = self.cache.read().ok().and_then(|c| c.get(&hash).cloned());
        let principal = match cached {
            Some((at, p)) if now - at < CACHE_MS => p,
            _ => {
                // A token cannot be revoked while the store is unreachable (revoking writes
                // it), so a principal seen before stays valid until the store answers again:
                // `/metrics` can then still report `weir_store_up 0`.
                let row = match store.token_by_hash(&hash).await {
                    Ok(row) => row,
                    Err(e) => match cached {
                        Some((_, p)) => return p.ok_or_else(|| ApiError::from(e)),
                        None => return Err(e.into()),
                    },
                };
                let p = row
                    .filter(|r| {
                        r.revoked_ms.is_none() && bool::from(r.hash.as_bytes().ct_eq(hash.as_bytes()))
                    })
                    .map(|r| Principal {
                        user: r.user.clone().unwrap_or_else(|| r.id.clone()),
                        act_as: serde_json::from_str(&r.act_as).unwrap_or_default(),
                        token_id: r.id,
                        grants: serde_json::from_str(&r.grants).unwrap_or_default(),
                    });
                if let Ok(mut c) = self.cache.write() {
                    if c.len() > 10_000 {
                        c.clear();
                    }
                    c.insert(hash, (now, p.clone()));
                }
                p
            }
        };
        principal.ok_or_else(|| {
            self.failed("unknown");
            ApiError::unauthorized("unknown or revoked token")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(grants: &[(&str, Role)]) -> Principal {
        Principal {
            token_id: "t".into(),
            grants: grants.iter().map(|(p, r)| Grant { project: p.to_string(), role: *r }).collect(),
            user: "t".into(),
            act_as: Vec::new(),
        }
    }

    #[test]
    fn roles_are_ordered_and_projects_cover_sub_projects() {
        let sub = p(&[("ads", Role::Submitter)]);
        assert!(sub.can("ads", Role::Viewer));
        assert!(sub.can("ads.ranking", Role::Submitter));
        assert!(!sub.can("adsx", Role::Viewer));
        assert!(!sub.can("ads", Role::Admin));
        assert!(!sub.can("search", Role::Viewer));
        assert_eq!(sub.readable(), Some(vec!["ads".to_string()]));
        let admin = p(&[("*", Role::Admin)]);
        assert!(admin.is_global_admin() && admin.can("anything", Role::Admin) && admin.readable().is_none());
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn a_token_acts_as_its_own_user_or_those_it_may() {
        let mut p = p(&[("ads", Role::Submitter)]);
        p.user = "alice".into();
        assert_eq!(p.user_for(None).ok().as_deref(), Some("alice"));
        assert_eq!(p.user_for(Some("alice")).ok().as_deref(), Some("alice"));
        assert!(p.user_for(Some("bob")).is_err());
        p.act_as = vec!["bob".into()];
        assert_eq!(p.user_for(Some("bob")).ok().as_deref(), Some("bob"));
        assert!(p.user_for(Some("carol")).is_err());
        p.act_as = vec!["*".into()];
        assert!(p.user_for(Some("carol")).is_ok());
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token().unwrap_or_default(), new_token().unwrap_or_default());
        assert_ne!(a, b);
        assert_eq!(a.len(), 5 + 64);
        assert_eq!(hash_token(&a).len(), 64);
        assert_ne!(hash_token(&a), hash_token(&b));
        // SHA-256 of "abc"
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
