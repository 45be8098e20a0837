//! JSON Web Tokens for slurmrestd: HS256 over the cluster's shared key, with the claims Slurm
//! reads (`exp`, `iat`, `sun`), and the token source that renews them before they expire.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::Auth;
use crate::SlurmError;

/// A signed token for `user`, valid from `now_s` for `lifespan_s` seconds.
pub fn mint(key: &[u8], user: &str, now_s: u64, lifespan_s: u64) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = serde_json::json!({ "exp": now_s + lifespan_s, "iat": now_s, "sun": user });
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{body}");
    let signature = URL_SAFE_NO_PAD.encode(hmac_sha256(key, signing_input.as_bytes()));
    format!("{signing_input}.{signature}")
}

pub(crate) fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else { return Vec::new() };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Where tokens come from, and the one in use with its expiry (seconds since the epoch).
pub(crate) struct Tokens {
    auth: Auth,
    user: String,
    current: Option<(String, u64)>,
}

/// Operator-given tokens are re-read this often (their expiry is not ours to know).
const REREAD_S: u64 = 300;

impl Tokens {
    pub fn new(auth: Auth, user: String) -> Tokens {
        Tokens { auth, user, current: None }
    }

    /// The token to send now: the current one, or a fresh one once less than a third of its
    /// life (at most a minute) is left.
    pub fn token(&mut self, now_s: u64) -> Result<String, SlurmError> {
        if let Some((t, renew_at)) = &self.current {
            if now_s < *renew_at {
                return Ok(t.clone());
            }
        }
        let (token, renew_at) = match &self.auth {
            Auth::JwtKey { key_file, lifespan } => {
                let key = std::fs::read(key_file).map_err(|e| SlurmError::Credentials {
                    what: format!("jwt_key file {}", key_file.display()),
                    message: e.to_string(),
                })?;
                if key.len() < 16 {
                    return Err(SlurmError::Credentials {
                        what: format!("jwt_key file {}", key_file.display()),
                        message: format!("{} bytes: too short for an HS256 key", key.len()),
                    });
                }
                let life = lifespan.as_secs().max(60);
                let renew = (life / 3).min(60);
                (mint(&key, &self.user, now_s, life), now_s + life - renew)
            }
            Auth::TokenFile(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| SlurmError::Credentials {
                    what: format!("token file {}", path.display()),
                    message: e.to_string(),
                })?;
                (clean(&text), now_s + REREAD_S)
            }
            Auth::TokenEnv(var) => {
                let text = std::env::var(var).map_err(|_| SlurmError::Credentials {
                    what: format!("environment variable {var}"),
                    message: "not set (or not UTF-8)".into(),
                })?;
                (clean(&text), now_s + REREAD_S)
            }
        };
        if token.is_empty() {
            return Err(SlurmError::Credentials {
                what: self.describe(),
                message: "the token is empty".into(),
            });
        }
        self.current = Some((token.clone(), renew_at));
        Ok(token)
    }

    /// Drops the token in use (slurmrestd refused it), so the next request makes or reads another.
    pub fn invalidate(&mut self) {
        self.current = None;
    }

    pub fn describe(&self) -> String {
        match &self.auth {
            Auth::JwtKey { key_file, .. } => format!("tokens minted with {}", key_file.display()),
            Auth::TokenFile(p) => format!("the token in {}", p.display()),
            Auth::TokenEnv(v) => format!("the token in ${v}"),
        }
    }
}

/// A token file may hold `SLURM_JWT=…` (what `scontrol token` prints) or the bare token.
fn clean(text: &str) -> String {
    let t = text.trim();
    t.strip_prefix("SLURM_JWT=").unwrap_or(t).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn a_minted_token_carries_slurms_claims() {
        let t = mint(b"0123456789abcdef0123456789abcdef", "alice", 1_000, 600);
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims, serde_json::json!({"exp": 1600, "iat": 1000, "sun": "alice"}));
        let sig =
            hmac_sha256(b"0123456789abcdef0123456789abcdef", format!("{}.{}", parts[0], parts[1]).as_bytes());
        assert_eq!(URL_SAFE_NO_PAD.encode(sig), parts[2]);
    }

    #[test]
    fn tokens_are_renewed_before_they_expire() {
        let dir = std::env::temp_dir().join(format!("weir-slurm-jwt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key");
        std::fs::write(&key, [7u8; 32]).unwrap();
        let mut t = Tokens::new(
            Auth::JwtKey { key_file: key, lifespan: std::time::Duration::from_secs(600) },
            "root".into(),
        );
        let a = t.token(1_000).unwrap();
        assert_eq!(t.token(1_500).unwrap(), a, "still fresh");
        assert_ne!(t.token(1_550).unwrap(), a, "renewed a minute before expiry");
    }

    #[test]
    fn a_token_file_may_hold_what_scontrol_prints() {
        assert_eq!(clean("SLURM_JWT=abc.def.ghi\n"), "abc.def.ghi");
        assert_eq!(clean(" abc \n"), "abc");
    }
}
