//! Property tests of what the client parses out of Slurm's answers: host lists and array task
//! strings. Each property runs a bounded number of cases (`PROPTEST_CASES` overrides); a failing case
//! is kept in `proptest-regressions/` and replayed first on every later run.

use proptest::prelude::*;
use sunk_slurm::{array_task_ids, expand_hostlist};

/// A name prefix as Slurm nodes have them: letters, digits, dots and dashes, not ending in a digit
/// (a trailing digit would run into the range's number).
fn prefix() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9.-]{0,10}[a-z.-]|[a-z]?"
}

/// A bracketed range list's parts: disjoint, ascending `(first, last, width)`; a width pads the bounds
/// with zeros, as `n[01-10]` does.
fn ranges() -> impl Strategy<Value = Vec<(u32, u32, usize)>> {
    prop::collection::vec((0u32..50, 0u32..20, 1usize..4), 1..5).prop_map(|steps| {
        let mut next = 0;
        steps
            .into_iter()
            .map(|(gap, length, width)| {
                let first = next + gap;
                next = first + length + 1;
                (first, first + length, width)
            })
            .collect()
    })
}

/// The host list Slurm would print for `prefix[ranges]`, and the names it stands for.
fn hostlist(prefix: &str, ranges: &[(u32, u32, usize)]) -> (String, Vec<String>) {
    let written: Vec<String> =
        ranges.iter().map(|&(first, last, width)| format!("{first:0width$}-{last:0width$}")).collect();
    let names = ranges
        .iter()
        .flat_map(|&(first, last, width)| (first..=last).map(move |n| format!("{prefix}{n:0width$}")))
        .collect();
    (format!("{prefix}[{}]", written.join(",")), names)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_host_list_expands_to_exactly_the_names_it_stands_for(
        lists in prop::collection::vec((prefix(), ranges()), 1..4),
        plain in prop::collection::vec("[a-z][a-z0-9-]{0,8}", 0..3),
    ) {
        let mut written = Vec::new();
        let mut expected = Vec::new();
        for (prefix, ranges) in &lists {
            let (list, names) = hostlist(prefix, ranges);
            written.push(list);
            expected.extend(names);
        }
        written.extend(plain.iter().cloned());
        expected.extend(plain);
        prop_assert_eq!(expand_hostlist(&written.join(",")).expect("a well-formed list"), expected);
    }

    #[test]
    fn any_text_expands_or_is_refused_within_bounds(text in "[a-z0-9,\\[\\]-]{0,40}|\\PC{0,40}") {
        if let Ok(names) = expand_hostlist(&text) {
            prop_assert!(names.len() <= 65_536 && names.iter().map(String::len).sum::<usize>() <= 4 << 20);
            prop_assert!(names.iter().all(|name| !name.is_empty()));
        }
    }

    #[test]
    fn an_array_task_string_reads_back_its_ids(ranges in ranges(), limit in prop::option::of(1u32..100)) {
        let written: Vec<String> = ranges
            .iter()
            .map(|&(first, last, _)| if first == last { first.to_string() } else { format!("{first}-{last}") })
            .collect();
        let limit = limit.map(|limit| format!("%{limit}")).unwrap_or_default();
        let expected: Vec<u32> = ranges.iter().flat_map(|&(first, last, _)| first..=last).collect();
        prop_assert_eq!(array_task_ids(&format!("{}{limit}", written.join(","))), expected);
    }

    #[test]
    fn any_task_string_gives_ids_or_none_within_bounds(text in "[0-9,%-]{0,30}|\\PC{0,30}") {
        prop_assert!(array_task_ids(&text).len() <= 4_000_001);
    }
}
