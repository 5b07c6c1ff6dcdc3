//! Self-signed HS256 tokens for slurmrestd's `auth/jwt`.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{EncodingKey, Header, encode};
use serde::Serialize;

use super::SlurmError;

/// Signs tokens for one Slurm user with the cluster's JWT key and reuses each token for
/// four fifths of its lifetime.
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

    /// A valid token, freshly signed when the cached one is within a fifth of its lifetime of expiring.
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
        *cached = Some((token.clone(), now + lifetime * 4 / 5));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_token_until_it_nears_expiry() {
        let signer = TokenSigner::new(b"secret", "root", Duration::from_secs(900));
        let first = signer.token().unwrap();
        assert_eq!(first, signer.token().unwrap());
        let claims = first.split('.').nth(1).unwrap();
        assert!(!claims.is_empty());
    }
}
