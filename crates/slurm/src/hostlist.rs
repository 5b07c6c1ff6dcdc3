//! Slurm host lists (`gpu-[01-03,7],login1`) expanded into node names, and node names compressed
//! into host lists.

use std::collections::BTreeMap;

/// Most names one host list may expand to, and most bytes they may take together; beyond either the
/// list is refused rather than filling memory (`n[1-65536]` after a long prefix is a short list).
const MAX_NAMES: usize = 65_536;
const MAX_BYTES: usize = 4 << 20;
/// The most digits a range bound may have (u64's).
const MAX_BOUND_DIGITS: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host list {list:?}: {problem}")]
pub struct HostlistError {
    list: String,
    problem: &'static str,
}

/// The node names of a host list, in order.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    expand_all(&[list])
}

/// The node names of several host lists, in order, held together to one budget: a pod naming 7,200
/// lists of 65,536 names each must not cost 471 million names.
pub fn expand_all<S: AsRef<str>>(lists: &[S]) -> Result<Vec<String>, HostlistError> {
    let (mut names, mut bytes) = (Vec::new(), 0);
    visit_all(lists, |name| {
        bytes += name.len();
        names.push(name.to_owned());
        if bytes > MAX_BYTES { Err("expands to too many names") } else { Ok(()) }
    })?;
    Ok(names)
}

/// Hands each node name of a host list to `visit`, in order, without keeping any: comparing a job's
/// 5,000 excluded nodes with a verdict's then costs no allocation per name. Held to the budget
/// [`expand`] has, in names.
pub fn for_each(list: &str, mut visit: impl FnMut(&str)) -> Result<(), HostlistError> {
    visit_all(&[list], |name| {
        visit(name);
        Ok(())
    })
}

/// Visits every name of `lists`, at most [`MAX_NAMES`] of them together. Every item is checked and
/// counted before the first name is visited: a list that is refused shows its visitor no name, and a
/// refusal costs no walk through the names.
fn visit_all<S: AsRef<str>>(
    lists: &[S],
    mut visit: impl FnMut(&str) -> Result<(), &'static str>,
) -> Result<(), HostlistError> {
    let error = |list: &str, problem| HostlistError { list: list.to_owned(), problem };
    let (mut items, mut count) = (Vec::new(), 0u64);
    for list in lists {
        let list = list.as_ref();
        for item in split_top_level(list).ok_or_else(|| error(list, "unbalanced brackets"))? {
            count = count.saturating_add(names_in(item).map_err(|problem| error(list, problem))?);
            if count > MAX_NAMES as u64 {
                return Err(error(list, "expands to too many names"));
            }
            items.push((list, item));
        }
    }
    let mut name = String::new();
    for (list, item) in items {
        visit_item(item, &mut name, &mut visit).map_err(|problem| error(list, problem))?;
    }
    Ok(())
}

/// How many names one item stands for, its brackets and range bounds checked.
fn names_in(item: &str) -> Result<u64, &'static str> {
    let Some(open) = item.find('[') else { return Ok(1) };
    let close = item[open..].find(']').map(|at| open + at).ok_or("unbalanced brackets")?;
    let mut here = 0u64;
    for range in item[open + 1..close].split(',') {
        let (from, to, _) = bounds(range)?;
        here = here.saturating_add(to - from + 1);
    }
    Ok(here.saturating_mul(names_in(&item[close + 1..])?))
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

/// Visits the names of one item ([`names_in`] has checked it), each as `name` (what came before the
/// item) followed by the item's own part; `name` is left as it was found.
fn visit_item(
    item: &str,
    name: &mut String,
    visit: &mut dyn FnMut(&str) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    let before = name.len();
    let Some(open) = item.find('[') else {
        name.push_str(item);
        let visited = visit(name);
        name.truncate(before);
        return visited;
    };
    let close = item[open..].find(']').map(|at| open + at).ok_or("unbalanced brackets")?;
    let (prefix, ranges, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    for range in ranges.split(',') {
        let (from, to, width) = bounds(range)?;
        for number in from..=to {
            use std::fmt::Write as _;
            let _ = write!(name, "{prefix}{number:0width$}");
            let visited = visit_item(rest, name, visit);
            name.truncate(before);
            visited?;
        }
    }
    Ok(())
}

/// `07-10` -> (7, 10, 2): the numbers, and the width the start's zero padding gives every name.
fn bounds(range: &str) -> Result<(u64, u64, usize), &'static str> {
    let (start, end) = range.split_once('-').unwrap_or((range, range));
    // A bound is a number Slurm prints, a few digits; its width pads every name of the range.
    if start.len() > MAX_BOUND_DIGITS || end.len() > MAX_BOUND_DIGITS {
        return Err("a range bound is too long");
    }
    let parse = |text: &str| text.parse::<u64>().map_err(|_| "a range bound is not a number");
    let (from, to) = (parse(start)?, parse(end)?);
    if to < from {
        return Err("a range ends before it starts");
    }
    if to - from > MAX_NAMES as u64 {
        return Err("expands to too many names");
    }
    Ok((from, to, start.len()))
}

/// Node names as few host list items as their numbered suffixes allow (`n1,n2,n3,m` ->
/// `m`, `n[1-3]`), for [`expand`] to give back the same set: a job excluding 5,000 nodes carries a
/// short list instead of 5,000 names. Zero-padded numbers keep their width; a name with a bracket or
/// a comma in it is passed on as written.
pub fn compress<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    // (prefix, width of a zero-padded number or 0 for plain numbers) -> the numbers.
    let mut numbered: BTreeMap<(&str, usize), Vec<u64>> = BTreeMap::new();
    let mut items = Vec::new();
    for name in names.iter().map(AsRef::as_ref) {
        let digits_at = name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, digits) = name.split_at(digits_at);
        let special = prefix.contains(['[', ']', ',']);
        match digits.parse::<u64>() {
            Ok(number) if !special && digits.len() <= MAX_BOUND_DIGITS => {
                let width = if digits.len() > 1 && digits.starts_with('0') { digits.len() } else { 0 };
                numbered.entry((prefix, width)).or_default().push(number);
            }
            _ => items.push(name.to_owned()),
        }
    }
    items.sort();
    items.dedup();
    for ((prefix, width), mut numbers) in numbered {
        numbers.sort_unstable();
        numbers.dedup();
        if let [only] = numbers.as_slice() {
            items.push(format!("{prefix}{only:0width$}"));
            continue;
        }
        let ranges = runs(&numbers).map(|(from, to)| match from == to {
            true => format!("{from:0width$}"),
            false => format!("{from:0width$}-{to:0width$}"),
        });
        items.push(format!("{prefix}[{}]", ranges.collect::<Vec<_>>().join(",")));
    }
    items
}

/// Consecutive stretches of sorted, distinct numbers, as (first, last).
fn runs(numbers: &[u64]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let from = *numbers.get(at)?;
        let mut to = from;
        while numbers.get(at + 1) == Some(&(to + 1)) {
            to += 1;
            at += 1;
        }
        at += 1;
        Some((from, to))
    })
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
    fn visits_the_names_it_expands_to_and_refuses_what_it_refuses() {
        let lists = [
            "gpu-[01-03,7],login",
            "r[1-2]n[1-2]",
            "",
            "n[1-",
            "n[1-2]x[",
            "n[1-99999999]",
            "r[1-300]n[1-300]",
            // Refused as soon as counted, not after 4 billion names of its tail.
            "a[1-2]b[1-65536]c[1-65536]",
            "n[1-2],m[3-1]",
        ];
        for list in lists {
            let mut visited = Vec::new();
            let result = for_each(list, |name| visited.push(name.to_owned()));
            match expand(list) {
                Ok(names) => assert_eq!((result, visited), (Ok(()), names), "{list}"),
                Err(error) => assert_eq!((result, visited), (Err(error), vec![]), "{list}: no name before a refusal"),
            }
        }
    }

    #[test]
    fn refuses_malformed_and_huge_lists() {
        assert!(expand("n[1-").is_err());
        assert!(expand("n[a-b]").is_err());
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n]").is_err());
        assert!(expand("n[1-99999999]").is_err());
        assert!(expand("n[[1]]").is_err());
        let long_prefix = format!("{}[1-65536]", "n".repeat(1000));
        assert!(expand(&long_prefix).is_err(), "64 MB of names from a 1 KB list");
        let padded = format!("n[{}1-{}9]", "0".repeat(100_000), "0".repeat(100_000));
        assert!(expand(&padded).is_err(), "nine names of 100 KB each");
    }

    #[test]
    fn several_lists_share_one_budget() {
        assert_eq!(expand_all(&["n[1-2]", "m"]).unwrap(), ["n1", "n2", "m"]);
        let halves = ["n[1-40000]", "m[1-40000]"];
        assert!(halves.iter().all(|list| expand(list).is_ok()), "each alone fits");
        assert!(expand_all(&halves).is_err(), "together they do not");
        let many: Vec<String> = (0..7200).map(|_| "n[0-65535]".to_owned()).collect();
        assert!(expand_all(&many).is_err(), "7,200 full ranges are refused at the second, not expanded");
    }

    #[test]
    fn compresses_numbered_names_into_ranges_and_keeps_the_rest() {
        assert_eq!(compress(&["n1", "n2", "n3", "n5", "login"]), ["login", "n[1-3,5]"]);
        assert_eq!(compress(&["gpu-01", "gpu-02", "gpu-10"]), ["gpu-10", "gpu-[01-02]"]);
        assert_eq!(compress(&["kube-node-2"]), ["kube-node-2"]);
        assert_eq!(compress(&["n9", "n10", "n9"]), ["n[9-10]"]);
        assert_eq!(compress::<&str>(&[]), Vec::<String>::new());
        let cloud: Vec<String> = (1..=5000).map(|n| format!("cloud-{n}")).collect();
        assert_eq!(compress(&cloud), ["cloud-[1-5000]"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn a_compressed_list_expands_to_the_same_names(
            names in proptest::collection::vec("[a-c]{0,2}-?[0-9]{0,3}", 0..40)
        ) {
            let names: Vec<String> = names.into_iter().filter(|n| !n.is_empty()).collect();
            let expanded: std::collections::BTreeSet<String> =
                compress(&names).iter().flat_map(|item| expand(item).unwrap()).collect();
            let given: std::collections::BTreeSet<String> = names.into_iter().collect();
            proptest::prop_assert_eq!(expanded, given);
        }
    }
}
