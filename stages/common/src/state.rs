//! Partitioned per-key state. The state of input partition p lives in changelog partition
//! p; the runtime restores a partition when it is assigned, drops it when it is revoked,
//! and after each batch writes every key the stage touched to the changelog before the
//! batch's input offsets are stored.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};

use hashbrown::{Equivalent, HashSet};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// One partition's values by key.
pub type Keyed<S> = hashbrown::HashMap<String, S, KeyHashState>;

/// Hashes keys (URLs, group names) with xxh3 over the whole key at once, seeded at random
/// per map: the keys come from remote servers, and a hash they could predict would let
/// one site put every key in the same bucket. xxh3 is not a keyed hash as std's SipHash
/// is; the seed, which no site sees, is what keeps a site's keys apart. SipHash over each
/// URL, with a key copied at each insert's lookup, made the store a tenth of an estimator
/// event (`cargo bench -p recrawl-estimator`).
#[derive(Clone, Debug)]
pub struct KeyHashState {
    seed: u64,
}

impl Default for KeyHashState {
    fn default() -> Self {
        // std's RandomState draws its keys from the operating system once a thread and
        // steps them for each map.
        Self { seed: RandomState::new().hash_one(0x6b65_7973_u64) }
    }
}

impl BuildHasher for KeyHashState {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { state: self.seed }
    }
}

/// [`KeyHashState`]'s hasher: each byte string through xxh3 seeded with the state so
/// far, each integer (a partition, a string's end mark) multiplied in.
#[derive(Debug)]
pub struct KeyHasher {
    state: u64,
}

impl KeyHasher {
    fn mix(&mut self, value: u64) {
        // The golden ratio's odd multiplier spreads a small integer over the high bits,
        // the rotation brings some of them down to the bucket index.
        self.state = (self.state ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.state = xxh3_64_with_seed(bytes, self.state);
    }

    fn write_u8(&mut self, value: u8) {
        self.mix(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.mix(u64::from(value));
    }

    fn write_i32(&mut self, value: i32) {
        self.mix(u64::from(value.cast_unsigned()));
    }

    fn write_u64(&mut self, value: u64) {
        self.mix(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }

    fn finish(&self) -> u64 {
        self.state
    }
}

/// A `(partition, key)` pair borrowed: finds an owned `(i32, String)` in a map without
/// copying the key, as the two hash alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionKey<'k>(pub i32, pub &'k str);

impl Hash for PartitionKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `(i32, String)` hashes: the integer, then the string with its end mark.
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<(i32, String)> for PartitionKey<'_> {
    fn equivalent(&self, key: &(i32, String)) -> bool {
        self.0 == key.0 && self.1 == key.1
    }
}

/// Finds a key whose name is shared (`Arc<str>` hashes as `String` does).
impl Equivalent<(i32, std::sync::Arc<str>)> for PartitionKey<'_> {
    fn equivalent(&self, key: &(i32, std::sync::Arc<str>)) -> bool {
        self.0 == key.0 && self.1 == &*key.1
    }
}

impl PartitionKey<'_> {
    pub fn to_owned_key(self) -> (i32, String) {
        (self.0, self.1.to_owned())
    }
}

/// A key's value found or inserted, not yet marked for the changelog: a caller that only
/// reads a value it found (a replayed event) leaves no write behind. A value inserted
/// must be [`touch`](Self::touch)ed, or the changelog would not hold what memory does.
#[derive(Debug)]
pub struct StateSlot<'s, 'k, S> {
    value: &'s mut S,
    dirty: &'s mut HashSet<(i32, String), KeyHashState>,
    key: PartitionKey<'k>,
}

impl<'s, S> StateSlot<'s, '_, S> {
    pub fn peek(&self) -> &S {
        self.value
    }

    /// The value to change; the key is written to the changelog after the batch.
    pub fn touch(self) -> &'s mut S {
        mark(self.dirty, self.key);
        self.value
    }
}

fn mark(dirty: &mut HashSet<(i32, String), KeyHashState>, key: PartitionKey<'_>) {
    // Copies the key only the first time in a batch.
    dirty.get_or_insert_with(&key, |key| key.to_owned_key());
}

/// Changed keys a store keeps room for between batches: a batch's input at the default
/// `--batch-size` (500), about 33 KB. A batch that marks more (a larger batch, revised
/// URLs) grows the set as before, and gives the room back after.
const DIRTY_ROOM: usize = 512;

#[derive(Debug)]
pub struct StateStore<S> {
    partitions: HashMap<i32, Keyed<S>>,
    dirty: HashSet<(i32, String), KeyHashState>,
    /// Changelog writes of values the stage keeps in its own structure.
    written: Vec<(i32, String, S)>,
    /// Keys the stage dropped from its own structure: tombstones, after `written`.
    removed: Vec<(i32, String)>,
}

impl<S> Default for StateStore<S> {
    fn default() -> Self {
        Self {
            partitions: HashMap::new(),
            dirty: HashSet::default(),
            written: Vec::new(),
            removed: Vec::new(),
        }
    }
}

impl<S> StateStore<S> {
    pub fn get(&self, partition: i32, key: &str) -> Option<&S> {
        self.partitions.get(&partition)?.get(key)
    }

    /// Mutable access; the key is written to the changelog after the batch.
    pub fn get_mut(&mut self, partition: i32, key: &str) -> Option<&mut S> {
        let value = self.partitions.get_mut(&partition)?.get_mut(key)?;
        mark(&mut self.dirty, PartitionKey(partition, key));
        Some(value)
    }

    /// The value for `key`, inserted with `default` when absent; marked for the changelog.
    pub fn get_or_insert_with(&mut self, partition: i32, key: &str, default: impl FnOnce() -> S) -> &mut S {
        self.slot_or_insert_with(partition, key, default).touch()
    }

    /// The value for `key`, inserted with `default` when absent, found with one lookup
    /// and marked for the changelog only if [`StateSlot::touch`]ed.
    pub fn slot_or_insert_with<'s, 'k>(
        &'s mut self,
        partition: i32,
        key: &'k str,
        default: impl FnOnce() -> S,
    ) -> StateSlot<'s, 'k, S> {
        // Copies the key only to insert it.
        let value = self.partitions.entry(partition).or_default().entry_ref(key).or_insert_with(default);
        StateSlot { value, dirty: &mut self.dirty, key: PartitionKey(partition, key) }
    }

    /// Removes `key`; a tombstone goes to the changelog.
    pub fn remove(&mut self, partition: i32, key: &str) -> Option<S> {
        let removed = self.partitions.get_mut(&partition)?.remove(key);
        if removed.is_some() {
            mark(&mut self.dirty, PartitionKey(partition, key));
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
        self.partitions.values().map(Keyed::len).sum()
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
    pub fn insert_partition(&mut self, partition: i32, values: Keyed<S>) {
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
    pub fn take_partition(&mut self, partition: i32) -> Keyed<S> {
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
        let partitions = &self.partitions;
        let dirty = self
            .dirty
            .drain()
            .map(|(p, k)| {
                let value = partitions.get(&p).and_then(|keys| keys.get(&k));
                (p, k, value)
            })
            .collect();
        // Room for the next batch, which would otherwise grow the set from empty again;
        // past a batch's worth it is given back.
        self.dirty.shrink_to(DIRTY_ROOM);
        dirty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The changed keys are handed over once, and the set keeps its room for the next
    /// batch up to `DIRTY_ROOM`, giving back what a larger batch took.
    #[test]
    fn changed_keys_are_taken_once_and_their_room_kept_within_bounds() {
        let mut store = StateStore::<u32>::default();
        for key in 0..500u32 {
            *store.get_or_insert_with(0, &key.to_string(), || 0) += 1;
        }
        assert_eq!(store.take_dirty().len(), 500);
        assert!(store.take_dirty().is_empty(), "taken once");
        assert!(store.dirty.capacity() >= 500, "room kept: {}", store.dirty.capacity());
        for key in 0..(4 * DIRTY_ROOM) {
            store.get_or_insert_with(1, &key.to_string(), || 1);
        }
        let taken = store.take_dirty();
        assert_eq!(taken.len(), 4 * DIRTY_ROOM);
        assert!(taken
            .iter()
            .all(|(partition, key, value)| *partition == 1 && value.is_some() && !key.is_empty()));
        assert!(store.dirty.capacity() < 2 * DIRTY_ROOM, "room given back: {}", store.dirty.capacity());
    }

    #[test]
    fn key_hashes_take_a_seed_per_map_and_the_whole_key() {
        let (one, other) = (KeyHashState::default(), KeyHashState::default());
        let key = (3, "http://a.example/page".to_owned());
        assert_eq!(one.hash_one(&key), one.hash_one(key.clone()));
        assert_eq!(one.hash_one(PartitionKey(3, &key.1)), one.hash_one(&key), "found without a copy");
        assert_ne!(one.hash_one(&key), other.hash_one(&key), "a site cannot know a map's hash");
        assert_ne!(one.hash_one(&key), one.hash_one((4, key.1.clone())));
        assert_ne!(one.hash_one(&key), one.hash_one((3, "http://a.example/pagf".to_owned())));
        // A string's end mark keeps a split between two strings from hashing alike.
        assert_ne!(one.hash_one(("ab", "c")), one.hash_one(("a", "bc")));
    }

    #[test]
    fn tracks_dirty_keys_and_tombstones() {
        let mut store: StateStore<u32> = StateStore::default();
        store.insert_partition(0, Keyed::from_iter([("a".to_owned(), 1)]));
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
        store.insert_partition(2, Keyed::from_iter([("a".to_owned(), 1), ("b".to_owned(), 2)]));
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
