//! Messages a person reads: every condition and Event message the host writes is one line of at most
//! [`MESSAGE_LIMIT`] characters. `kubectl get -o wide` and `describe` print a message as it is, so a
//! newline breaks their tables, and an error chain of a few kilobytes buries what went wrong.

/// The longest message written, in characters.
pub const MESSAGE_LIMIT: usize = 400;

/// `text` on one line of at most [`MESSAGE_LIMIT`] characters (see [`one_line_within`]).
pub fn one_line(text: &str) -> String {
    one_line_within(text, MESSAGE_LIMIT)
}

/// `text` on one line: each run of whitespace (newlines and tabs included) becomes one space, other
/// control characters are dropped, and the ends are trimmed. Longer than `limit` characters, it is
/// cut on a character boundary and ends with `…`, within the limit.
pub fn one_line_within(text: &str, limit: usize) -> String {
    if limit == 0 {
        return String::new();
    }
    let mut chars = flattened(text);
    let mut line: String = chars.by_ref().take(limit).collect();
    if chars.next().is_some() {
        let keep = line.char_indices().nth(limit - 1).map_or(line.len(), |(at, _)| at);
        line.truncate(keep);
        line.truncate(line.trim_end().len());
        line.push('…');
    }
    line
}

/// The characters of `text` with whitespace runs as one space, control characters gone, ends trimmed.
fn flattened(text: &str) -> impl Iterator<Item = char> + '_ {
    let (mut started, mut space_due) = (false, false);
    text.chars()
        .flat_map(move |c| {
            if c.is_whitespace() {
                space_due = started;
                return [None, None];
            }
            if c.is_control() {
                return [None, None];
            }
            started = true;
            [std::mem::take(&mut space_due).then_some(' '), Some(c)]
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_becomes_one_trimmed_line() {
        let cases = [
            ("", ""),
            ("plain words", "plain words"),
            ("two\nlines", "two lines"),
            ("  around \n", "around"),
            ("tabs\t\tand\r\nCRLF", "tabs and CRLF"),
            ("a bell\u{7} and a delete\u{7f} dropped", "a bell and a delete dropped"),
            ("\u{1b}[31mred\u{1b}[0m", "[31mred[0m"),
            ("no\u{a0}break\u{2028}separator", "no break separator"),
            ("expected=[\n    0x00,\n    0x61,\n]", "expected=[ 0x00, 0x61, ]"),
            ("\n\n\t", ""),
            ("naïve façade — ok", "naïve façade — ok"),
        ];
        for (text, line) in cases {
            assert_eq!(one_line(text), line, "{text:?}");
        }
    }

    #[test]
    fn a_long_message_is_cut_within_the_limit_with_an_ellipsis() {
        let cases = [
            ("abcdef", 6, "abcdef"),
            ("abcdefg", 6, "abcde…"),
            ("aaaa bbbb", 6, "aaaa…"),
            ("aaaa\n\n\nbbbb", 6, "aaaa…"),
            ("ééééééé", 4, "ééé…"),
            ("日本語のテキスト", 5, "日本語の…"),
            ("x", 1, "x"),
            ("xy", 1, "…"),
            ("anything", 0, ""),
        ];
        for (text, limit, line) in cases {
            assert_eq!(one_line_within(text, limit), line, "{text:?} within {limit}");
        }
    }

    #[test]
    fn the_limit_is_in_characters_and_never_passed() {
        let long = "é".repeat(3 * MESSAGE_LIMIT);
        let line = one_line(&long);
        assert_eq!(line.chars().count(), MESSAGE_LIMIT);
        assert!(line.ends_with('…'));
        let exact = "x".repeat(MESSAGE_LIMIT);
        assert_eq!(one_line(&exact), exact, "a message at the limit is kept whole");
    }
}
