use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// Feeds `body` in pieces of `piece` bytes.
fn split(body: &[u8], piece: usize) -> Result<(Value, Vec<Value>), serde_json::Error> {
    let mut splitter = ListingSplitter::<Value>::new("jobs");
    for chunk in body.chunks(piece.max(1)) {
        splitter.feed(chunk)?;
    }
    let (rest, items) = splitter.finish();
    Ok((serde_json::from_slice(&rest)?, items))
}

fn element() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Strings full of what a careless splitter would take for structure.
        "[\\[\\]{},:\"\\\\ a-z\u{e9}\u{1F600}]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z\"\\\\,\\]]{0,6}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn a_listing_read_in_pieces_is_the_listing_read_whole(
        jobs in prop::collection::vec(element(), 0..8),
        meta in element(),
        pretty in any::<bool>(),
        piece in 1usize..64,
    ) {
        let answer = json!({"meta": meta, "jobs": jobs, "errors": [], "last_update": {"number": 7}});
        let body = if pretty { serde_json::to_vec_pretty(&answer) } else { serde_json::to_vec(&answer) }.unwrap();
        let (rest, items) = split(&body, piece).unwrap();
        prop_assert_eq!(items, jobs);
        let mut emptied = answer.clone();
        emptied["jobs"] = json!([]);
        prop_assert_eq!(rest, emptied);
    }

    #[test]
    fn garbage_is_an_error_or_a_rest_that_does_not_parse_never_a_panic(body in prop::collection::vec(any::<u8>(), 0..256), piece in 1usize..16) {
        let _ = split(&body, piece);
    }
}

#[test]
fn only_the_top_levels_list_is_split() {
    let body = br#"{"meta": {"jobs": [1, 2]}, "note": "\"jobs\": [3]", "jobs": [ {"a": 1} , {"jobs": [4]} ]}"#;
    let (rest, items) = split(body, 5).unwrap();
    assert_eq!(items, vec![json!({"a": 1}), json!({"jobs": [4]})]);
    assert_eq!(rest, json!({"meta": {"jobs": [1, 2]}, "note": "\"jobs\": [3]", "jobs": []}));
}

#[test]
fn a_list_that_is_no_list_is_left_to_fail_where_the_answer_is_parsed() {
    let (rest, items) = split(br#"{"jobs": null, "errors": []}"#, 3).unwrap();
    assert!(items.is_empty());
    assert_eq!(rest, json!({"jobs": null, "errors": []}));
}

#[test]
fn malformed_lists_are_errors() {
    for body in
        [&br#"{"jobs": [{}, ,{}]}"#[..], br#"{"jobs": [{},]}"#, br#"{"jobs": [{}{}]}"#, br#"{"jobs": [{"a": }]}"#]
    {
        assert!(split(body, 4).is_err(), "{}", String::from_utf8_lossy(body));
    }
    assert_eq!(split(br#"{"jobs": [ ]}"#, 4).unwrap().1, Vec::<Value>::new());
}

#[test]
fn an_answer_cut_off_in_its_list_does_not_parse() {
    let (rest, _) = {
        let mut splitter = ListingSplitter::<Value>::new("jobs");
        splitter.feed(br#"{"jobs": [{"a": 1}, {"b": "#).unwrap();
        splitter.finish()
    };
    assert!(serde_json::from_slice::<Value>(&rest).is_err());
}
