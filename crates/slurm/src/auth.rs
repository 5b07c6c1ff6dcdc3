//! Self-signed HS256 tokens for slurmrestd's `auth/jwt`.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{EncodingKey, Header, encode};
use serde::Serialize;

use super::SlurmError;

/// How long the host's tokens live: two minutes, of which each token is handed out for the first
/// (and a fresh one signed after), so that every request leaves with at least a minute to go. A
/// request is answered within [`REQUEST_TIMEOUT`](crate::REQUEST_TIMEOUT) (30 s) of leaving, and
/// slurmctld checks the token (its `exp` only) on every call slurmrestd makes for it; the other 30 s
/// are for the host's clock being behind slurmctld's. Signing is one HMAC: a shorter life would cost
/// nothing but that margin.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(120);

/// Signs tokens for one Slurm user with the cluster's JWT key and hands each token out for the first
/// half of its lifetime.
pub struct TokenSigner {
    key: EncodingKey,
    user: String,
    lifetime: Duration,
    cached: Mutex<Option<(String, u64)>>,
}

#[derive(Serialize)]
struct Claims<'a> {
    iat: u64,
    exp: u64,
    sun: &'a str,
}

impl TokenSigner {
    pub fn new(key: &[u8], user: impl Into<String>, lifetime: Duration) -> Self {
        Self { key: EncodingKey::from_secret(key), user: user.into(), lifetime, cached: Mutex::new(None) }
    }

    /// A valid token with at least half its lifetime to go: freshly signed once the cached one has
    /// lived half of it.
    pub fn token(&self) -> Result<String, SlurmError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let mut cached = self.cached.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((token, refresh_at)) = cached.as_ref()
            && now < *refresh_at
        {
            return Ok(token.clone());
        }
        let lifetime = self.lifetime.as_secs().max(5);
        let claims = Claims { iat: now, exp: now + lifetime, sun: &self.user };
        let token = encode(&Header::default(), &claims, &self.key).map_err(SlurmError::Token)?;
        *cached = Some((token.clone(), now + lifetime / 2));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_token_until_it_nears_expiry() {
        let signer = TokenSigner::new(b"secret", "root", TOKEN_LIFETIME);
        let first = signer.token().unwrap();
        assert_eq!(first, signer.token().unwrap());
        let claims = first.split('.').nth(1).unwrap();
        assert!(!claims.is_empty());
    }

    #[test]
    fn a_token_lives_two_minutes_and_is_handed_out_for_the_first() {
        let signer = TokenSigner::new(b"secret", "root", TOKEN_LIFETIME);
        let token = signer.token().unwrap();
        let (issued, expires) = times(&token);
        assert_eq!(expires - issued, 120, "{token}");
        let (_, refresh_at) = signer.cached.lock().unwrap().clone().expect("the token is kept");
        assert_eq!(refresh_at, issued + 60, "a request leaves with a minute to go at least");
    }

    /// The `iat` and `exp` claims of a token signed with `secret`.
    fn times(token: &str) -> (u64, u64) {
        #[derive(serde::Deserialize)]
        struct Times {
            iat: u64,
            exp: u64,
        }
        let key = jsonwebtoken::DecodingKey::from_secret(b"secret");
        let validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        let times = jsonwebtoken::decode::<Times>(token, &key, &validation).expect("a valid token").claims;
        (times.iat, times.exp)
    }
}
