//! What diff keeps of a page's words within a budget: all of them while they fit, else
//! the sample of those whose hash falls in the first 2^−level of the hash space, the
//! least level that fits. The choice depends on the word alone, so two versions of a page
//! sampled at levels a ≤ b compare at b: every word the level-b sample keeps, the level-a
//! one kept too. An edit of a word outside the sample is not seen, one inside is seen
//! whole, so the degrees of two samples estimate those of the whole pages (each distinct
//! word kept with probability 2^−level); BENCHMARKS.md measures the error.

use std::borrow::Cow;

use crate::degree::mix;

/// The level of a version that kept no words: the budget was spent (`--max-kept-bytes`).
/// Its comparisons report whether the page changed, but no degrees.
pub const NOTHING_KEPT: u8 = u8::MAX;

/// Sampling seed, apart from the document frequencies' rows.
const SEED: u64 = 0x5851_F42D_4C95_7F2D;

/// Whether the sample at `level` keeps `word`.
pub fn keeps(word: u64, level: u8) -> bool {
    match level {
        0 => true,
        1..=64 => mix(word ^ SEED).leading_zeros() >= u32::from(level),
        _ => false,
    }
}

/// The least level whose sample of `words` holds at most `max` of them.
pub fn level_for(words: &[u64], max: usize) -> u8 {
    if words.len() <= max {
        return 0;
    }
    let mut by_zeros = [0usize; 65];
    for &word in words {
        let zeros = mix(word ^ SEED).leading_zeros() as usize;
        by_zeros[zeros] = by_zeros[zeros].saturating_add(1);
    }
    // At level L the sample keeps the words of L leading zeros or more.
    let mut kept = words.len();
    for (fewer_zeros, level) in by_zeros.iter().zip(1..=64u8) {
        kept = kept.saturating_sub(*fewer_zeros);
        if kept <= max {
            return level;
        }
    }
    NOTHING_KEPT
}

/// `words` sampled to at most `max`, with the level taken.
pub fn sample(mut words: Vec<u64>, max: usize) -> (u8, Vec<u64>) {
    let level = level_for(&words, max);
    if level != 0 {
        words.retain(|&word| keeps(word, level));
    }
    // Kept until the page's next download: without this it would hold the whole page's
    // allocation (45 MB for 8 MiB of one-letter words).
    words.shrink_to_fit();
    (level, words)
}

/// A sample taken at `from` as the sample at `to` (≥ `from`) would be.
pub fn at_level(words: &[u64], from: u8, to: u8) -> Cow<'_, [u64]> {
    if to <= from {
        Cow::Borrowed(words)
    } else {
        Cow::Owned(words.iter().copied().filter(|&word| keeps(word, to)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_pages_are_kept_whole_and_long_ones_sampled_within_the_cap() {
        let short: Vec<u64> = (0..100).collect();
        assert_eq!(sample(short.clone(), 100), (0, short));
        let long: Vec<u64> = (0..100_000).map(mix).collect();
        let (level, kept) = sample(long.clone(), 7_000);
        assert!(kept.len() <= 7_000 && kept.len() > 7_000 / 2, "{level}: {}", kept.len());
        assert_eq!(level, 4, "100,000 words fit 7,000 at 1/16: {}", kept.len());
        assert_eq!(kept.capacity(), kept.len());
        // In page order, and what the level keeps.
        let expected: Vec<u64> = long.iter().copied().filter(|&w| keeps(w, level)).collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn a_coarser_sample_is_a_subsample_so_two_versions_compare() {
        let words: Vec<u64> = (0..50_000).map(|i| mix(i * 7)).collect();
        let (fine, fine_words) = sample(words.clone(), 20_000);
        let (coarse, coarse_words) = sample(words, 5_000);
        assert!(fine < coarse);
        assert_eq!(at_level(&fine_words, fine, coarse).as_ref(), coarse_words.as_slice());
        assert_eq!(at_level(&coarse_words, coarse, fine).as_ref(), coarse_words.as_slice());
    }

    #[test]
    fn a_word_repeated_past_the_cap_and_an_empty_budget_keep_nothing() {
        let (level, kept) = sample(vec![42; 10], 5);
        assert!(kept.is_empty() && level > 0);
        let (level, kept) = sample((0..10).collect(), 0);
        assert!(kept.is_empty());
        assert!(level > 0);
        assert!(!keeps(1, NOTHING_KEPT));
    }
}
