//! The pool's slices: one for the `shared` layout, one per worker for
//! `per_worker`, each with its own connections and FIFO queue, and which
//! thread owns which.

use std::cell::RefCell;
use std::sync::{Arc, RwLock};

use tokio::runtime::Handle;
use tokio::sync::Semaphore;

use super::source::Source;
use crate::config::DbConfig;

/// A share of the pool.
pub(crate) struct Slice {
    /// Its connections and the runtime that runs its units of work; a
    /// worker that adopts the slice replaces both with its own.
    state: RwLock<SliceState>,
    /// Pooled only: one permit per connection of the slice, FIFO.
    pub(crate) queue: Option<Arc<Semaphore>>,
    /// The settings its sources are built with: the process's, with the
    /// slice's share of `pool_max_size` and `pool_min_idle`.
    pub(crate) config: DbConfig,
}

/// Where a slice's connections come from and where its units of work run.
#[derive(Clone)]
pub(crate) struct SliceState {
    /// The way of getting a connection.
    pub(crate) source: Source,
    /// The runtime that runs the slice's units of work (and drives its
    /// async connections); `None`: the caller's.
    pub(crate) home: Option<Handle>,
}

impl Slice {
    pub(crate) fn new(
        source: Source,
        config: DbConfig,
        pooled: bool,
        home: Option<Handle>,
    ) -> Self {
        Self {
            state: RwLock::new(SliceState { source, home }),
            queue: pooled.then(|| Arc::new(Semaphore::new(config.pool_max_size as usize))),
            config,
        }
    }

    /// Its source and home, as they are now.
    pub(crate) fn state(&self) -> SliceState {
        match self.state.read() {
            Ok(state) => state.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Gives the slice a new source whose connections will live on `home`.
    /// Connections opened earlier elsewhere (before the server started)
    /// close as their sessions end.
    pub(crate) fn adopt(&self, source: Source, home: Handle) {
        let mut state = match self.state.write() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        *state = SliceState {
            source,
            home: Some(home),
        };
    }

    /// Whether a connection of this slice is free right now.
    pub(crate) fn has_free(&self) -> bool {
        self.queue
            .as_ref()
            .is_some_and(|q| q.available_permits() > 0)
    }
}

/// `total` connections in `parts` shares as even as they go, the larger
/// ones first; never a share of 0 (`parts` is at most `total`).
pub(crate) fn split(total: u32, parts: usize) -> Vec<u32> {
    let parts = (parts.max(1) as u32).min(total.max(1));
    shares(total.max(1), parts as usize)
}

/// `total` in exactly `parts` shares as even as they go, the larger ones
/// first (a share may be 0).
pub(crate) fn shares(total: u32, parts: usize) -> Vec<u32> {
    let parts = parts.max(1) as u32;
    let (each, rest) = (total / parts, total % parts);
    (0..parts).map(|i| each + u32::from(i < rest)).collect()
}

/// The settings of each slice of `config`'s pool.
pub(crate) fn slice_configs(config: &DbConfig) -> Vec<DbConfig> {
    let max_size = config.pool_max_size.max(1);
    let sizes = match config.layout {
        crate::config::PoolLayout::Shared => vec![max_size],
        crate::config::PoolLayout::PerWorker => split(max_size, config.workers),
    };
    let min_idle = config
        .pool_min_idle
        .map(|n| shares(n.min(max_size), sizes.len()));
    sizes
        .iter()
        .enumerate()
        .map(|(i, size)| {
            let mut slice = config.clone();
            slice.pool_max_size = *size;
            slice.pool_min_idle = min_idle.as_ref().map(|m| m[i].min(*size));
            slice
        })
        .collect()
}

thread_local! {
    /// The slices this thread owns: (database id, slice index).
    static OWNED: RefCell<Vec<(u64, usize)>> = const { RefCell::new(Vec::new()) };
}

/// The slice of database `id` this thread owns, if any.
pub(crate) fn owned_here(id: u64) -> Option<usize> {
    OWNED.with(|owned| {
        owned
            .borrow()
            .iter()
            .find(|(db, _)| *db == id)
            .map(|(_, slice)| *slice)
    })
}

/// Records that this thread owns slice `index` of database `id`.
pub(crate) fn own_here(id: u64, index: usize) {
    OWNED.with(|owned| {
        let mut owned = owned.borrow_mut();
        owned.retain(|(db, _)| *db != id);
        owned.push((id, index));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_splits_as_evenly_as_it_goes_and_never_into_empty_slices() {
        assert_eq!(split(5, 2), [3, 2]);
        assert_eq!(split(5, 1), [5]);
        assert_eq!(split(6, 3), [2, 2, 2]);
        assert_eq!(split(2, 4), [1, 1], "more workers than connections");
        assert_eq!(split(10, 4).iter().sum::<u32>(), 10);
        assert_eq!(shares(1, 2), [1, 0]);
    }

    #[test]
    fn each_slice_takes_its_share_of_the_size_and_the_idle_minimum() {
        let mut config = DbConfig::with_url("postgres://u@h/db");
        config.pool_max_size = 5;
        config.pool_min_idle = Some(3);
        config.workers = 2;
        config.layout = crate::config::PoolLayout::PerWorker;
        let slices = slice_configs(&config);
        let sizes: Vec<_> = slices
            .iter()
            .map(|c| (c.pool_max_size, c.pool_min_idle))
            .collect();
        assert_eq!(sizes, [(3, Some(2)), (2, Some(1))]);
        config.layout = crate::config::PoolLayout::Shared;
        let shared: Vec<_> = slice_configs(&config)
            .iter()
            .map(|c| c.pool_max_size)
            .collect();
        assert_eq!(shared, [5]);
    }

    #[test]
    fn a_thread_owns_at_most_one_slice_of_a_database() {
        own_here(7, 0);
        own_here(7, 1);
        own_here(8, 0);
        assert_eq!(owned_here(7), Some(1));
        assert_eq!(owned_here(8), Some(0));
        assert_eq!(owned_here(9), None);
        let elsewhere = std::thread::spawn(|| owned_here(7))
            .join()
            .expect("the thread");
        assert_eq!(elsewhere, None, "ownership is the thread's own");
    }
}
