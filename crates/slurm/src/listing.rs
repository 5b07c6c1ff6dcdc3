//! Reading a listing (`{"jobs": [{...}, ...], "meta": ..., "errors": []}`) as it arrives: each
//! element of the list is parsed as soon as it is whole and its bytes let go, and the rest of the
//! answer, the list emptied, is kept for the envelope. A listing of 10,000 jobs is 56 MB of JSON
//! and 7 MB parsed; read whole first, the bytes were most of the host's memory at that scale.

use serde::de::DeserializeOwned;

/// Splits the answer's `key` list into parsed elements while bytes are fed in.
pub(crate) struct ListingSplitter<T> {
    key: &'static str,
    /// The answer without the list's elements (`{"jobs": [], ...}`).
    rest: Vec<u8>,
    /// The element being read (or whitespace between elements).
    element: Vec<u8>,
    items: Vec<T>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The latest string closed at the top level, while it may still be a key.
    last_string: Vec<u8>,
    place: Place,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Anywhere but in the list.
    Outside,
    /// After `"<key>":`, before its value.
    BeforeList,
    /// In the list (its elements are at depth 2).
    InList,
    /// The list has been read; a second one of that key is an error.
    AfterList,
}

impl<T: DeserializeOwned> ListingSplitter<T> {
    pub(crate) fn new(key: &'static str) -> Self {
        Self {
            key,
            rest: Vec::new(),
            element: Vec::new(),
            items: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            last_string: Vec::new(),
            place: Place::Outside,
        }
    }

    /// Reads the next bytes of the answer; an element that does not parse is an error.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), serde_json::Error> {
        let mut at = 0;
        while at < bytes.len() {
            if self.place == Place::InList && (self.depth > 2 || self.in_string) {
                let inside = self.inside_element(&bytes[at..]);
                self.element.extend_from_slice(&bytes[at..at + inside]);
                at += inside;
            } else {
                self.step(bytes[at])?;
                at += 1;
            }
        }
        Ok(())
    }

    /// How many of `bytes` belong to the element being read, up to its end or the next string
    /// ending at the list's level: the bulk of a listing, so skipped through, not stepped.
    fn inside_element(&mut self, bytes: &[u8]) -> usize {
        let mut at = 0;
        while at < bytes.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    at += 1;
                    continue;
                }
                let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at..]) else {
                    return bytes.len();
                };
                at += found + 1;
                match bytes[at - 1] {
                    b'"' => self.in_string = false,
                    _ => self.escaped = true,
                }
                if !self.in_string && self.depth == 2 {
                    return at;
                }
                continue;
            }
            // `[`/`{` and `]`/`}` differ from each other by one bit.
            let Some(found) = bytes[at..].iter().position(|&b| b == b'"' || matches!(b | 0x20, b'{' | b'}')) else {
                return bytes.len();
            };
            at += found + 1;
            match bytes[at - 1] {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                _ => {
                    self.depth -= 1;
                    if self.depth == 2 {
                        return at;
                    }
                }
            }
        }
        at
    }

    /// The answer without the list's elements, and the elements.
    pub(crate) fn finish(self) -> (Vec<u8>, Vec<T>) {
        let mut rest = self.rest;
        // An answer cut off in the list: what was read of it stays, so the rest fails to parse.
        rest.extend_from_slice(&self.element);
        (rest, self.items)
    }

    /// One byte outside any element's inside ([`Self::feed`] skips those): at the list's own level
    /// or outside the list.
    fn step(&mut self, byte: u8) -> Result<(), serde_json::Error> {
        if self.place == Place::InList && !is_delimiter(byte) {
            self.element.push(byte);
        } else if self.place == Place::InList {
            // A `,` or the `]` that closes the list ends the element before it.
            self.parse_element(byte == b']')?;
            if byte == b']' {
                self.rest.push(byte);
                self.place = Place::AfterList;
            }
        } else {
            self.rest.push(byte);
        }
        self.track(byte);
        Ok(())
    }

    /// Follows strings and nesting, and notices the list's key at the top level.
    fn track(&mut self, byte: u8) {
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                (false, _) if self.depth == 1 && self.last_string.len() <= self.key.len() => {
                    self.last_string.push(byte)
                }
                _ => {}
            }
            return;
        }
        if self.place == Place::BeforeList && !byte.is_ascii_whitespace() && byte != b'[' {
            self.place = Place::Outside;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                self.last_string.clear();
            }
            b'{' | b'[' => {
                if self.place == Place::BeforeList {
                    self.place = Place::InList;
                }
                self.depth += 1;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 && self.place == Place::Outside && self.last_string == self.key.as_bytes() => {
                self.place = Place::BeforeList;
            }
            _ => {}
        }
    }

    /// Parses the element read before a `,` or the closing `]`: only `[]` may have none.
    fn parse_element(&mut self, closing: bool) -> Result<(), serde_json::Error> {
        let blank = self.element.iter().all(u8::is_ascii_whitespace);
        if blank && (!closing || !self.items.is_empty()) {
            return Err(serde::de::Error::custom(format!("an empty element in the `{}` list", self.key)));
        }
        if !blank {
            self.items.push(serde_json::from_slice(&self.element)?);
        }
        self.element.clear();
        Ok(())
    }
}

/// Ends an element, when read at the list's own level outside any string.
fn is_delimiter(byte: u8) -> bool {
    matches!(byte, b',' | b']')
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
