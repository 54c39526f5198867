//! A set of tasks, each known by a key, for the executor loop to await.

use std::collections::HashMap;
use std::future::Future;
use tokio::task::{Id, JoinError, JoinSet};

/// Tasks returning `T`, each spawned under a key that comes back with its end, even when the
/// task panicked.
pub(crate) struct KeyedTasks<K, T> {
    set: JoinSet<T>,
    keys: HashMap<Id, K>,
}

impl<K, T: Send + 'static> KeyedTasks<K, T> {
    /// No tasks.
    pub(crate) fn new() -> Self {
        Self {
            set: JoinSet::new(),
            keys: HashMap::new(),
        }
    }

    /// Spawns `task` under `key`.
    pub(crate) fn spawn(&mut self, key: K, task: impl Future<Output = T> + Send + 'static) {
        let id = self.set.spawn(task).id();
        self.keys.insert(id, key);
    }

    /// The next task to end, with its key; `None` when there are no tasks.
    pub(crate) async fn join_next(&mut self) -> Option<(K, Result<T, JoinError>)> {
        loop {
            let (id, ended) = match self.set.join_next_with_id().await? {
                Ok((id, output)) => (id, Ok(output)),
                Err(error) => (error.id(), Err(error)),
            };
            // Every task is spawned with a key, so this always finds one.
            if let Some(key) = self.keys.remove(&id) {
                return Some((key, ended));
            }
        }
    }

    /// Whether no task is running.
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}
