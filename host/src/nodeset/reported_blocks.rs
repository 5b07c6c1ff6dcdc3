//! Which blocked drains were told in an `UpdateBlocked` Event, per NodeSet. The condition's message
//! lists them too, but it is cut at the limit of a message: past the cut it cannot say what was told,
//! and every pass would tell those again.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

#[derive(Default)]
pub struct ReportedBlocks(Mutex<HashMap<String, HashSet<String>>>);

impl ReportedBlocks {
    /// Which of `blocks` (what holds each blocked node) the last pass over `nodeset` did not see;
    /// from now on, `blocks` are what was seen, so a block that ends and comes back is news again.
    pub fn news(&self, nodeset: &str, blocks: &[String]) -> Vec<String> {
        let mut reported = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = reported.remove(nodeset).unwrap_or_default();
        let news = blocks.iter().filter(|block| !seen.contains(*block)).cloned().collect();
        if !blocks.is_empty() {
            reported.insert(nodeset.to_owned(), blocks.iter().cloned().collect());
        }
        news
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_news_once_while_it_lasts() {
        let reported = ReportedBlocks::default();
        let blocks = |names: &[&str]| names.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        assert_eq!(reported.news("ml/cpu", &blocks(&["w1", "w2"])), ["w1", "w2"]);
        assert_eq!(reported.news("ml/cpu", &blocks(&["w1", "w2", "w3"])), ["w3"]);
        assert!(reported.news("ml/gpu", &[]).is_empty(), "another NodeSet has its own");
        assert!(reported.news("ml/cpu", &blocks(&["w3"])).is_empty());
        assert!(reported.news("ml/cpu", &[]).is_empty());
        assert_eq!(reported.news("ml/cpu", &blocks(&["w3"])), ["w3"], "ended, then blocked again");
    }
}
