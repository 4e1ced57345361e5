//! Partitioned per-key state. The state of input partition p lives in changelog partition
//! p; the runtime restores a partition when it is assigned, drops it when it is revoked,
//! and after each batch writes every key the stage touched to the changelog before the
//! batch's input offsets are stored.

use std::collections::{HashMap, HashSet};

#[derive(Debug)]
pub struct StateStore<S> {
    partitions: HashMap<i32, HashMap<String, S>>,
    dirty: HashSet<(i32, String)>,
    /// Changelog writes of values the stage keeps in its own structure.
    written: Vec<(i32, String, S)>,
    /// Keys the stage dropped from its own structure: tombstones, after `written`.
    removed: Vec<(i32, String)>,
}

impl<S> Default for StateStore<S> {
    fn default() -> Self {
        Self { partitions: HashMap::new(), dirty: HashSet::new(), written: Vec::new(), removed: Vec::new() }
    }
}

impl<S> StateStore<S> {
    pub fn get(&self, partition: i32, key: &str) -> Option<&S> {
        self.partitions.get(&partition)?.get(key)
    }

    /// Mutable access; the key is written to the changelog after the batch.
    pub fn get_mut(&mut self, partition: i32, key: &str) -> Option<&mut S> {
        let value = self.partitions.get_mut(&partition)?.get_mut(key)?;
        self.dirty.insert((partition, key.to_owned()));
        Some(value)
    }

    /// The value for `key`, inserted with `default` when absent; marked for the changelog.
    pub fn get_or_insert_with(&mut self, partition: i32, key: &str, default: impl FnOnce() -> S) -> &mut S {
        self.dirty.insert((partition, key.to_owned()));
        self.partitions.entry(partition).or_default().entry(key.to_owned()).or_insert_with(default)
    }

    /// Removes `key`; a tombstone goes to the changelog.
    pub fn remove(&mut self, partition: i32, key: &str) -> Option<S> {
        let removed = self.partitions.get_mut(&partition)?.remove(key);
        if removed.is_some() {
            self.dirty.insert((partition, key.to_owned()));
        }
        removed
    }

    pub fn iter(&self) -> impl Iterator<Item = (i32, &str, &S)> {
        self.partitions.iter().flat_map(|(p, keys)| keys.iter().map(move |(k, v)| (*p, k.as_str(), v)))
    }

    /// The keys and values of one partition.
    pub fn partition(&self, partition: i32) -> impl Iterator<Item = (&str, &S)> {
        self.partitions.get(&partition).into_iter().flat_map(|keys| keys.iter().map(|(k, v)| (k.as_str(), v)))
    }

    pub fn len(&self) -> usize {
        self.partitions.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn loaded_partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.partitions.keys().copied()
    }

    pub fn is_loaded(&self, partition: i32) -> bool {
        self.partitions.contains_key(&partition)
    }

    /// Installs a restored partition (replacing anything held for it).
    pub fn insert_partition(&mut self, partition: i32, values: HashMap<String, S>) {
        self.partitions.insert(partition, values);
    }

    /// Forgets a revoked partition; its pending changelog writes are dropped too, since
    /// the new owner replays the uncommitted input that caused them.
    pub fn drop_partition(&mut self, partition: i32) {
        self.partitions.remove(&partition);
        self.dirty.retain(|(p, _)| *p != partition);
        self.written.retain(|(p, _, _)| *p != partition);
        self.removed.retain(|(p, _)| *p != partition);
    }

    /// Hands a restored partition's values to a stage that keeps them in its own
    /// structure (the scheduler's compact tables); the partition stays loaded, empty here.
    pub fn take_partition(&mut self, partition: i32) -> HashMap<String, S> {
        self.partitions.get_mut(&partition).map(std::mem::take).unwrap_or_default()
    }

    /// Queues a changelog write of a value the stage keeps itself; the store does not
    /// retain it.
    pub fn write(&mut self, partition: i32, key: String, value: S) {
        self.written.push((partition, key, value));
    }

    /// The writes queued by [`write`](Self::write) since the last call, in order.
    pub fn take_written(&mut self) -> Vec<(i32, String, S)> {
        std::mem::take(&mut self.written)
    }

    /// Queues a tombstone for a key the stage dropped from its own structure; written
    /// after the batch's [`write`](Self::write)s, so a key must not be both.
    pub fn write_removal(&mut self, partition: i32, key: String) {
        self.removed.push((partition, key));
    }

    /// The tombstones queued by [`write_removal`](Self::write_removal) since the last call.
    pub fn take_removed(&mut self) -> Vec<(i32, String)> {
        std::mem::take(&mut self.removed)
    }

    /// Keys changed since the last call, with their current value (`None`: deleted).
    pub fn take_dirty(&mut self) -> Vec<(i32, String, Option<&S>)> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|(p, k)| {
                let value = self.partitions.get(&p).and_then(|keys| keys.get(&k));
                (p, k, value)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_dirty_keys_and_tombstones() {
        let mut store: StateStore<u32> = StateStore::default();
        store.insert_partition(0, HashMap::from([("a".to_owned(), 1)]));
        assert_eq!(store.get(0, "a"), Some(&1));
        assert!(store.take_dirty().is_empty(), "a restore is not a change");
        *store.get_or_insert_with(1, "b", || 5) += 1;
        *store.get_mut(0, "a").unwrap() = 9;
        store.get(0, "a");
        let mut dirty: Vec<_> = store.take_dirty().into_iter().map(|(p, k, v)| (p, k, v.copied())).collect();
        dirty.sort();
        assert_eq!(dirty, vec![(0, "a".to_owned(), Some(9)), (1, "b".to_owned(), Some(6))]);
        assert_eq!(store.remove(0, "a"), Some(9));
        let dirty: Vec<_> = store.take_dirty().into_iter().map(|(p, k, v)| (p, k, v.copied())).collect();
        assert_eq!(dirty, vec![(0, "a".to_owned(), None)]);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn dropping_a_partition_forgets_its_pending_writes() {
        let mut store: StateStore<u32> = StateStore::default();
        store.get_or_insert_with(3, "x", || 1);
        store.get_or_insert_with(4, "y", || 1);
        store.drop_partition(3);
        assert!(!store.is_loaded(3));
        let dirty: Vec<_> = store.take_dirty().into_iter().map(|(p, k, _)| (p, k)).collect();
        assert_eq!(dirty, vec![(4, "y".to_owned())]);
    }

    #[test]
    fn a_stage_can_hold_its_partitions_itself_and_still_write_the_changelog() {
        let mut store: StateStore<u32> = StateStore::default();
        store.insert_partition(2, HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]));
        let taken = store.take_partition(2);
        assert_eq!(taken.len(), 2);
        assert!(store.is_loaded(2) && store.is_empty(), "still owned, no longer held");
        store.write(2, "a".to_owned(), 7);
        store.write(5, "z".to_owned(), 8);
        store.drop_partition(5);
        assert_eq!(store.take_written(), vec![(2, "a".to_owned(), 7)]);
        assert!(store.take_written().is_empty());
        store.write_removal(2, "b".to_owned());
        store.write_removal(5, "y".to_owned());
        store.drop_partition(5);
        assert_eq!(store.take_removed(), vec![(2, "b".to_owned())]);
        assert!(store.take_removed().is_empty());
        assert!(store.take_dirty().is_empty());
    }
}
