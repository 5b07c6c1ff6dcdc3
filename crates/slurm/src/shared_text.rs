//! Text that many records share: a job array's `admin_comment` names every pod of the array (100
//! links, about 5 KB) and is copied to each of its tasks. Cloning shares it instead of copying it, so
//! 10,000 pending tasks hold 100 comments, not 10,000.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string whose clones share one allocation. Reads as a `str`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedText(Option<Arc<str>>);

impl SharedText {
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }
}

impl Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> Self {
        Self((!text.is_empty()).then(|| Arc::from(text)))
    }
}

impl From<&str> for SharedText {
    fn from(text: &str) -> Self {
        Self((!text.is_empty()).then(|| Arc::from(text)))
    }
}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SharedText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_text_and_read_as_it() {
        let text = SharedText::from("sunk.dev/array=ml/a:u0,b:u1");
        let copy = text.clone();
        assert!(std::ptr::eq(text.as_str(), copy.as_str()), "one allocation");
        assert_eq!(copy, "sunk.dev/array=ml/a:u0,b:u1");
        assert!(copy.starts_with("sunk.dev/array="));
        assert_eq!(SharedText::default(), "");
        assert_eq!(SharedText::from(String::new()), SharedText::default());
        let json = serde_json::to_string(&text).unwrap();
        assert_eq!(serde_json::from_str::<SharedText>(&json).unwrap(), text);
    }
}
