//! A link sealed for a field the job's own user can write (`comment`): a placeholder allocated as
//! its tenant may not carry an administrator's field, so until the host writes its `admin_comment`
//! the job names its pod here. The seal is an HMAC of the link and the uid it was allocated as, keyed
//! from the cluster's JWT key, which tenants never hold: a tenant can copy a seal onto another job
//! of the same user, never make one for another pod or user. What follows the seal's tag is the
//! job-mapper's own comment ([`carried`]), given back when the host writes the link.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::vocabulary::{SEAL_MARK, SEALED_UID_MARK};

/// A tag's length in hex digits (HMAC-SHA256).
const TAG_HEX: usize = 64;

/// What seals and opens links; without a key it does neither.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Seal {
    key: Option<[u8; 32]>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.key.is_some() { "Seal(keyed)" } else { "Seal(none)" })
    }
}

impl Seal {
    /// A seal keyed from `secret` (the cluster's JWT key), never the secret itself.
    pub fn keyed_from(secret: &[u8]) -> Self {
        let mut derive = mac(secret);
        derive.update(b"sunk placeholder seal v1");
        Self { key: Some(derive.finalize().into_bytes().into()) }
    }

    /// Whether it has a key to seal with.
    pub fn can_seal(&self) -> bool {
        self.key.is_some()
    }

    /// `link` sealed for a job that runs as `uid`; `None` without a key.
    pub fn seal(&self, link: &str, uid: u32) -> Option<String> {
        let body = format!("{link}{SEALED_UID_MARK}{uid}");
        let tag = self.tag(&body)?;
        Some(format!("{body}{SEAL_MARK}{}", hex(&tag)))
    }

    /// The link `comment` seals, if it is sealed by this key for a job running as `uid`.
    pub fn open(&self, comment: &str, uid: Option<u32>) -> Option<String> {
        let (body, tag, _) = parts(comment)?;
        let (link, sealed_uid) = body.rsplit_once(SEALED_UID_MARK)?;
        if sealed_uid.parse::<u32>().ok() != uid || uid.is_none() {
            return None;
        }
        let mut check = mac(self.key.as_ref()?);
        check.update(body.as_bytes());
        check.verify_slice(&unhex(tag)?).ok()?;
        Some(link.to_owned())
    }

    fn tag(&self, body: &str) -> Option<Vec<u8>> {
        let mut tag = mac(self.key.as_ref()?);
        tag.update(body.as_bytes());
        Some(tag.finalize().into_bytes().to_vec())
    }
}

/// The text a sealed comment carries after its seal's tag (the job-mapper's comment), empty for none.
pub fn carried(comment: &str) -> &str {
    parts(comment).map_or("", |(_, _, carried)| carried)
}

/// A sealed comment's parts: what the tag covers (the link and uid), the tag, and what follows it.
fn parts(comment: &str) -> Option<(&str, &str, &str)> {
    let (body, rest) = comment.split_once(SEAL_MARK)?;
    Some((body, rest.get(..TAG_HEX)?, rest.get(TAG_HEX..)?))
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_opens_for_its_link_and_uid_under_its_key_alone() {
        let seal = Seal::keyed_from(b"jwt key");
        let link = "sunk.dev/pod=ml/a/u1;by=sunk@cluster";
        let sealed = seal.seal(link, 1000).expect("keyed");
        assert_eq!(seal.open(&sealed, Some(1000)).as_deref(), Some(link));
        let carrying = format!("{sealed}team=ml;seal=x");
        assert_eq!(seal.open(&carrying, Some(1000)).as_deref(), Some(link), "the policy's comment after it");
        assert_eq!((carried(&carrying), carried(&sealed), carried(link)), ("team=ml;seal=x", "", ""));
        let forged_pod = sealed.replace("ml/a/u1", "ml/b/u2");
        let forged_uid = sealed.replace(";as=1000", ";as=0");
        let rows = [
            ("another uid runs it (slurmctld's nobody)", seal.open(&sealed, Some(99))),
            ("no uid listed", seal.open(&sealed, None)),
            ("another pod named", seal.open(&forged_pod, Some(1000))),
            ("another uid named", seal.open(&forged_uid, Some(0))),
            ("another key", Seal::keyed_from(b"other").open(&sealed, Some(1000))),
            ("no key", Seal::default().open(&sealed, Some(1000))),
            ("not sealed", seal.open(link, Some(1000))),
            ("a tag cut short", seal.open(&sealed[..sealed.len() - 1], Some(1000))),
            ("a tag not hex", seal.open(&format!("{link};as=1000;seal=zz"), Some(1000))),
        ];
        for (name, opened) in rows {
            assert_eq!(opened, None, "{name}");
        }
        assert_eq!(Seal::default().seal(link, 1000), None, "no key, no seal");
        assert!(!format!("{seal:?}").contains("key:"), "the key is never printed");
    }
}
