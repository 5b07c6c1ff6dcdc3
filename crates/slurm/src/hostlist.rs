//! Slurm host lists (`gpu-[01-03,7],login1`) expanded into node names.

/// Most names one host list may expand to; beyond it the list is refused rather than filling memory.
const MAX_NAMES: usize = 65_536;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host list {list:?}: {problem}")]
pub struct HostlistError {
    list: String,
    problem: &'static str,
}

/// The node names of a host list, in order.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let error = |problem| HostlistError { list: list.to_owned(), problem };
    let mut names = Vec::new();
    for item in split_top_level(list).ok_or_else(|| error("unbalanced brackets"))? {
        expand_item(item, &mut names).map_err(error)?;
        if names.len() > MAX_NAMES {
            return Err(error("expands to too many names"));
        }
    }
    Ok(names)
}

/// Splits on the commas outside brackets; None when brackets do not pair up.
fn split_top_level(list: &str) -> Option<Vec<&str>> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return None,
            ']' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                items.push(&list[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    (depth == 0).then(|| {
        items.push(&list[start..]);
        items.into_iter().map(str::trim).filter(|item| !item.is_empty()).collect()
    })
}

fn expand_item(item: &str, names: &mut Vec<String>) -> Result<(), &'static str> {
    let Some(open) = item.find('[') else {
        names.push(item.to_owned());
        return Ok(());
    };
    let close = item[open..].find(']').map(|at| open + at).ok_or("unbalanced brackets")?;
    let (prefix, ranges, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let mut tails = Vec::new();
    expand_item(rest, &mut tails)?;
    for range in ranges.split(',') {
        for number in numbers(range)? {
            for tail in &tails {
                names.push(format!("{prefix}{number}{tail}"));
                if names.len() > MAX_NAMES {
                    return Err("expands to too many names");
                }
            }
        }
    }
    Ok(())
}

/// `07-10` -> 07, 08, 09, 10 (the start's zero padding is kept).
fn numbers(range: &str) -> Result<Vec<String>, &'static str> {
    let (start, end) = range.split_once('-').unwrap_or((range, range));
    let width = start.len();
    let parse = |text: &str| text.parse::<u64>().map_err(|_| "a range bound is not a number");
    let (from, to) = (parse(start)?, parse(end)?);
    if to < from {
        return Err("a range ends before it starts");
    }
    if to - from > MAX_NAMES as u64 {
        return Err("expands to too many names");
    }
    Ok((from..=to).map(|n| format!("{n:0width$}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_ranges_padding_and_plain_names() {
        assert_eq!(expand("n1").unwrap(), ["n1"]);
        assert_eq!(expand("gpu-[01-03,7],login").unwrap(), ["gpu-01", "gpu-02", "gpu-03", "gpu-7", "login"]);
        assert_eq!(expand("r[1-2]n[1-2]").unwrap(), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(expand("node-a.b,c").unwrap(), ["node-a.b", "c"]);
    }

    #[test]
    fn refuses_malformed_and_huge_lists() {
        assert!(expand("n[1-").is_err());
        assert!(expand("n[a-b]").is_err());
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n]").is_err());
        assert!(expand("n[1-99999999]").is_err());
        assert!(expand("n[[1]]").is_err());
    }
}
