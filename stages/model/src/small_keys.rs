//! A hasher for the model's maps keyed by a few small integers: its memos and tables,
//! looked up at every event, where std's SipHash rounds cost as much as the rest of the
//! lookup. Not a keyed hash as SipHash is: each map draws its own seed, so that a site,
//! which steers its pages' counts of comparisons and changes only loosely, cannot know
//! which keys share a bucket, and the maps are bounded in entries (a memo of 4,096, the
//! day tables' 16,384, each cleared when full), so a long probe is a bounded one.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Builds [`SmallKeyHasher`]s from a seed drawn for the map.
#[derive(Debug, Clone)]
pub struct SmallKeys {
    seed: u64,
}

impl Default for SmallKeys {
    fn default() -> Self {
        // std's RandomState draws its keys from the operating system once a thread and
        // steps them for each map.
        Self { seed: RandomState::new().hash_one(0x0073_6d61_6c6c_u64) }
    }
}

impl BuildHasher for SmallKeys {
    type Hasher = SmallKeyHasher;

    fn build_hasher(&self) -> SmallKeyHasher {
        SmallKeyHasher(self.seed)
    }
}

/// Folds each integer in by a full 64 × 64 → 128-bit multiplication with the golden
/// ratio's odd constant, its high half folded onto the low: every bit of the input then
/// reaches the low bits a table's index takes. A plain 64-bit product carries an input
/// bit only upwards, so an `f64`'s exponent (the posterior memo's spacing) never reached
/// the index and keys differing only in it shared a bucket.
#[derive(Debug)]
pub struct SmallKeyHasher(u64);

impl Hasher for SmallKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&byte| self.write_u64(u64::from(byte)));
    }

    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    fn write_i32(&mut self, value: i32) {
        // The bits of the value, sign and all.
        self.write_u64(u64::from(value as u32));
    }

    fn write_u64(&mut self, value: u64) {
        let product = u128::from(self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Keys that differ in one small count land in different buckets of a small table,
    /// and two maps hash the same key apart.
    #[test]
    fn small_counts_spread_over_a_table_and_maps_differ() {
        let keys = SmallKeys::default();
        let buckets: HashSet<u64> = (0..64u32)
            .flat_map(|n| (0..64u32).map(move |k| (n, k, 1.0f64.to_bits())))
            .map(|key| keys.hash_one(key) & 4095)
            .collect();
        assert!(buckets.len() > 2_400, "{} of 4,096 keys' buckets distinct", buckets.len());
        // Keys that differ only in a float's exponent and high mantissa bits, as the
        // memo's spacings do.
        let spacings: HashSet<u64> = (1..=4096u32)
            .map(|spacing| keys.hash_one((3u32, 1u32, f64::from(spacing).to_bits())) & 4095)
            .collect();
        assert!(spacings.len() > 2_400, "{} of 4,096 spacings' buckets distinct", spacings.len());
        assert_ne!(SmallKeys::default().hash_one((3u32, 1u32)), SmallKeys::default().hash_one((3u32, 1u32)));
    }
}
