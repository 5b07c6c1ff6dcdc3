//! Requests that arrive while one is in flight wait, and the next turn serves all of them at once, so
//! a burst of N costs slurmctld a few RPCs instead of N (each new connection risking one of slurmctld
//! 24.11.5's 5 s accept stalls). A caller that finds nobody else waiting keeps the turn and goes alone,
//! exactly as it would without this, so a lone request is as quick as ever.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;
use tokio::sync::OwnedMutexGuard;

/// One waiting caller's item, and where its answer goes.
pub struct Waiter<T, A> {
    pub item: T,
    id: u64,
    answer: oneshot::Sender<A>,
}

impl<T, A> Waiter<T, A> {
    pub fn answer(self, answer: A) {
        // The caller may have given up (its reconcile was cancelled): nobody to tell.
        let _ = self.answer.send(answer);
    }
}

/// What became of an item handed to [`Coalescer::join`].
pub enum Joined<T, A> {
    /// Nobody else was waiting: the item comes back with the turn, which the caller holds while it
    /// serves the item itself. Whoever arrives meanwhile waits for the next turn.
    Alone(T, OwnedMutexGuard<()>),
    /// Served together with others; `None` if the turn serving it was cancelled before answering.
    Served(Option<A>),
}

/// Waiting callers and the turn that serves them. Cheap to clone.
pub struct Coalescer<T, A> {
    waiting: Arc<Mutex<Vec<Waiter<T, A>>>>,
    turn: Arc<tokio::sync::Mutex<()>>,
    next_id: Arc<AtomicU64>,
}

impl<T, A> Clone for Coalescer<T, A> {
    fn clone(&self) -> Self {
        Self { waiting: self.waiting.clone(), turn: self.turn.clone(), next_id: self.next_id.clone() }
    }
}

impl<T, A> Default for Coalescer<T, A> {
    fn default() -> Self {
        Self { waiting: Arc::default(), turn: Arc::default(), next_id: Arc::default() }
    }
}

impl<T, A> Coalescer<T, A> {
    /// Waits for `item`'s turn. Whoever gets the turn takes everything waiting by then: its own item
    /// alone comes back as [`Joined::Alone`]; two or more go to `serve`, which answers each waiter and
    /// holds the turn for as long as it keeps the guard.
    pub async fn join<F, Fut>(&self, item: T, mut serve: F) -> Joined<T, A>
    where
        F: FnMut(Vec<Waiter<T, A>>, OwnedMutexGuard<()>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let (answer, mut answered) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().push(Waiter { item, id, answer });
        loop {
            tokio::select! {
                biased;
                answer = &mut answered => return Joined::Served(answer.ok()),
                turn = self.turn.clone().lock_owned() => {
                    let mut batch = std::mem::take(&mut *self.lock());
                    if batch.is_empty() {
                        continue; // this item's answer is on its way
                    }
                    if batch.len() == 1 && batch[0].id == id {
                        let only = batch.pop().expect("one waiter");
                        return Joined::Alone(only.item, turn);
                    }
                    serve(batch, turn).await;
                }
            }
        }
    }

    /// Whether a turn is being served (for tests).
    #[cfg(test)]
    pub fn turn_is_held(&self) -> bool {
        self.turn.try_lock().is_err()
    }

    /// How many items wait for the next turn (for tests).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// Takes a turn of one's own, serving nobody else in it.
    pub async fn own_turn(&self) -> OwnedMutexGuard<()> {
        self.turn.clone().lock_owned().await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waiter<T, A>>> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `items` in order, in chunks of at most `size` (at least 1).
pub fn chunked<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut items = items.into_iter().peekable();
    let mut chunks = Vec::new();
    while items.peek().is_some() {
        chunks.push(items.by_ref().take(size.max(1)).collect());
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    type Doubler = Coalescer<u32, u32>;

    async fn double_together(coalescer: &Doubler, item: u32, turns: &Mutex<Vec<Vec<u32>>>) -> u32 {
        let joined = coalescer
            .join(item, |batch, _turn| async move {
                turns.lock().unwrap().push(batch.iter().map(|w| w.item).collect());
                for waiter in batch {
                    let doubled = waiter.item * 2;
                    waiter.answer(doubled);
                }
            })
            .await;
        match joined {
            Joined::Alone(item, _turn) => item * 2,
            Joined::Served(answer) => answer.expect("answered"),
        }
    }

    #[test]
    fn chunks_keep_order_and_size() {
        assert_eq!(chunked(vec![1, 2, 3, 4, 5], 2), [vec![1, 2], vec![3, 4], vec![5]]);
        assert!(chunked(Vec::<u8>::new(), 2).is_empty());
    }

    #[tokio::test]
    async fn a_lone_item_comes_back_with_the_turn() {
        let coalescer = Doubler::default();
        let Joined::Alone(item, turn) = coalescer.join(7, |_, _| async { panic!("nothing to serve") }).await else {
            panic!("not alone");
        };
        assert_eq!(item, 7);
        assert!(coalescer.turn_is_held());
        drop(turn);
        assert!(!coalescer.turn_is_held());
    }

    #[tokio::test]
    async fn items_arriving_during_a_turn_are_served_together_and_each_hears_its_answer() {
        let coalescer = Doubler::default();
        let turns = Arc::new(Mutex::new(Vec::new()));
        let Joined::Alone(_, first_turn) = coalescer.join(1, |_, _| async {}).await else { panic!("not alone") };
        let callers: Vec<_> = [2, 3, 4]
            .into_iter()
            .map(|item| {
                let (coalescer, turns) = (coalescer.clone(), turns.clone());
                tokio::spawn(async move { double_together(&coalescer, item, &turns).await })
            })
            .collect();
        while coalescer.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        drop(first_turn);
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.unwrap());
        }
        assert_eq!(answers, [4, 6, 8]);
        let turns = turns.lock().unwrap().clone();
        assert_eq!(turns.len(), 1, "one turn served all three: {turns:?}");
        assert_eq!(turns[0].len(), 3);
        let _idle = coalescer.own_turn().await;
    }
}
