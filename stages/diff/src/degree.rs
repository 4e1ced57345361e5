//! Degrees of change between two word-hash sequences (`docs/algorithms/change-degree.md`): the
//! improved edit distance IED and the word-based baselines COS, WD, ED and k-SH. BW works
//! on raw bytes and lives with the page versions. Every degree is in [0, 1]: 0 identical,
//! 1 completely different; two empty documents are identical, an empty and a non-empty one
//! completely different.

use std::cmp::Ordering;
use std::ops::Range;

use recrawl_schemas::IedOps;

use crate::lcs::{lcs, PrehashedMap};

/// IED's operation costs: copy and shrink cost `s`, move costs `t` (add, drop, replace 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IedCosts {
    pub s: f64,
    pub t: f64,
}

impl Default for IedCosts {
    /// The paper's experiments: s = t = 0.75.
    fn default() -> Self {
        Self { s: 0.75, t: 0.75 }
    }
}

/// The improved edit distance of two documents.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ied {
    pub ops: IedOps,
    /// δ_E, the weighted cost of `ops`.
    pub cost: f64,
    /// δ_E / max(m, n), at most 1.
    pub degree: f64,
    /// Length of the longest common subsequence the operations were derived from.
    pub lcs: usize,
}

/// IED of `a` (old) and `b` (new).
pub fn ied(a: &[u64], b: &[u64], costs: IedCosts) -> Ied {
    ied_from_lcs(a, b, &lcs(a, b), costs)
}

/// One side's words outside the LCS, sorted by (word, position), with what has become of
/// each during the steps.
struct Leftover {
    entries: Vec<(u64, u32)>,
    alive: Vec<bool>,
    /// Copy (for B′) or shrink (for A′) candidate.
    candidate: Vec<bool>,
}

impl Leftover {
    fn new(words: &[u64], in_lcs: &[bool]) -> Self {
        let mut entries: Vec<(u64, u32)> = words
            .iter()
            .zip(in_lcs)
            .enumerate()
            .filter(|(_, (_, &kept))| !kept)
            .map(|(i, (&w, _))| (w, i as u32))
            .collect();
        entries.sort_unstable();
        let len = entries.len();
        Self { entries, alive: vec![true; len], candidate: vec![false; len] }
    }

    /// Ranges of entries with the same word.
    fn groups(&self) -> Vec<(u64, Range<usize>)> {
        let mut groups = Vec::new();
        let mut start = 0;
        for i in 1..=self.entries.len() {
            if i == self.entries.len() || self.entries[i].0 != self.entries[start].0 {
                groups.push((self.entries[start].0, start..i));
                start = i;
            }
        }
        groups
    }

    /// Removes the first `count` alive entries of `range` that satisfy `select`, given
    /// whether the entry is a candidate.
    fn remove_first(&mut self, range: Range<usize>, count: usize, select: impl Fn(bool) -> bool) {
        let entries = self.alive[range.clone()].iter_mut().zip(&mut self.candidate[range]);
        for (alive, candidate) in
            entries.filter(|(alive, candidate)| **alive && select(**candidate)).take(count)
        {
            *alive = false;
            *candidate = false;
        }
    }

    fn alive_in(&self, range: Range<usize>) -> usize {
        self.alive[range].iter().filter(|&&a| a).count()
    }

    fn candidates_in(&self, range: Range<usize>) -> usize {
        range.filter(|&i| self.alive[i] && self.candidate[i]).count()
    }

    /// Marks copy/shrink candidates: occurrences of words that occur at least twice in the
    /// whole document, except the first when every occurrence is left over (that one is an
    /// add or drop).
    fn mark_candidates(&mut self, groups: &[(u64, Range<usize>)], total: &PrehashedMap<u32>) {
        for (word, range) in groups {
            let occurrences = total.get(word).copied().unwrap_or(0) as usize;
            if occurrences < 2 {
                continue;
            }
            let mut skip_first = self.alive_in(range.clone()) == occurrences;
            for i in range.clone().filter(|&i| self.alive[i]) {
                if skip_first {
                    skip_first = false;
                } else {
                    self.candidate[i] = true;
                }
            }
        }
    }

    /// Alive candidates as (position, entry), by position.
    fn candidates_by_position(&self) -> Vec<(u32, usize)> {
        let mut list: Vec<(u32, usize)> = (0..self.entries.len())
            .filter(|&i| self.alive[i] && self.candidate[i])
            .map(|i| (self.entries[i].1, i))
            .collect();
        list.sort_unstable();
        list
    }

    /// Settles the remaining candidates (copies in B′, shrinks in A′); how many.
    fn settle_candidates(&mut self) -> u64 {
        let settled = self.candidates_in(0..self.entries.len());
        for (alive, candidate) in self.alive.iter_mut().zip(&self.candidate) {
            *alive &= !candidate;
        }
        settled as u64
    }

    fn alive_positions(&self) -> Vec<u32> {
        let mut positions: Vec<u32> =
            (0..self.entries.len()).filter(|&i| self.alive[i]).map(|i| self.entries[i].1).collect();
        positions.sort_unstable();
        positions
    }
}

/// Calls `both` with each pair of items of two lists sorted by `key` whose keys are equal
/// (keys unique within each list).
fn merge_join<A, B, K: Ord>(
    a: &[A],
    b: &[B],
    key_a: impl Fn(&A) -> K,
    key_b: impl Fn(&B) -> K,
    mut both: impl FnMut(&A, &B),
) {
    let (mut a, mut b) = (a, b);
    while let ([x, rest_a @ ..], [y, rest_b @ ..]) = (a, b) {
        match key_a(x).cmp(&key_b(y)) {
            Ordering::Less => a = rest_a,
            Ordering::Greater => b = rest_b,
            Ordering::Equal => {
                both(x, y);
                (a, b) = (rest_a, rest_b);
            }
        }
    }
}

/// IED's steps 2–5 given an LCS of `a` and `b` (step 1).
pub fn ied_from_lcs(a: &[u64], b: &[u64], pairs: &[(u32, u32)], costs: IedCosts) -> Ied {
    let (m, n) = (a.len(), b.len());
    let mut ops = IedOps::default();
    let (mut a_in_lcs, mut b_in_lcs) = (vec![false; m], vec![false; n]);
    for &(i, j) in pairs {
        a_in_lcs[i as usize] = true;
        b_in_lcs[j as usize] = true;
    }
    let mut a_rest = Leftover::new(a, &a_in_lcs);
    let mut b_rest = Leftover::new(b, &b_in_lcs);
    let (a_groups, b_groups) = (a_rest.groups(), b_rest.groups());

    // c_A(w) and c_B(w), needed only for the leftover words: usually a few among
    // thousands, so a 4096-bit filter spares most of the map lookups.
    let leftover_words = a_groups.len().saturating_add(b_groups.len());
    let (mut count_a, mut count_b) =
        (PrehashedMap::with_capacity_and_hasher(leftover_words, Default::default()), PrehashedMap::default());
    let mut filter = [0u64; 64];
    let slot = |word: u64| ((word >> 52) as usize / 64, 1u64 << (word >> 52 & 63));
    for (word, _) in a_groups.iter().chain(&b_groups) {
        count_a.insert(*word, 0u32);
        let (index, bit) = slot(*word);
        filter[index] |= bit;
    }
    count_b.clone_from(&count_a);
    if leftover_words > 0 {
        for (words, counts) in [(a, &mut count_a), (b, &mut count_b)] {
            for &word in words {
                let (index, bit) = slot(word);
                if filter[index] & bit != 0 {
                    if let Some(count) = counts.get_mut(&word) {
                        *count = count.saturating_add(1);
                    }
                }
            }
        }
    }
    let repeated_in_both = |word: u64| count_a[&word] >= 2 && count_b[&word] >= 2;

    // Step 2: moves. When t > 2s a word repeated on both sides is cheaper as shrink + copy.
    let shrink_and_copy_cheaper = costs.t > 2.0 * costs.s;
    merge_join(
        &a_groups,
        &b_groups,
        |g| g.0,
        |g| g.0,
        |(word, in_a), (_, in_b)| {
            let (word, in_a, in_b) = (*word, in_a.clone(), in_b.clone());
            if shrink_and_copy_cheaper && repeated_in_both(word) {
                return;
            }
            let moved = in_a.len().min(in_b.len());
            ops.moves = ops.moves.saturating_add(moved as u64);
            a_rest.remove_first(in_a, moved, |_| true);
            b_rest.remove_first(in_b, moved, |_| true);
        },
    );

    // Step 3: copies and shrinks.
    b_rest.mark_candidates(&b_groups, &count_b);
    a_rest.mark_candidates(&a_groups, &count_a);
    // (a) a word both copied and shrunk.
    merge_join(
        &a_groups,
        &b_groups,
        |g| g.0,
        |g| g.0,
        |(_, in_a), (_, in_b)| {
            let (in_a, in_b) = (in_a.clone(), in_b.clone());
            let paired = a_rest.candidates_in(in_a.clone()).min(b_rest.candidates_in(in_b.clone()));
            ops.copy = ops.copy.saturating_add(paired as u64);
            ops.shrink = ops.shrink.saturating_add(paired as u64);
            a_rest.remove_first(in_a, paired, |candidate| candidate);
            b_rest.remove_first(in_b, paired, |candidate| candidate);
        },
    );
    // (b) a copy and a shrink at the same position: two operations costing 2s, or one
    // replace costing 1 (step 4), whichever is cheaper.
    let copy_and_shrink_cheaper = costs.s < 0.5;
    let (shrinks, copies) = (a_rest.candidates_by_position(), b_rest.candidates_by_position());
    merge_join(
        &shrinks,
        &copies,
        |c| c.0,
        |c| c.0,
        |&(_, ia), &(_, ib)| {
            a_rest.candidate[ia] = false;
            b_rest.candidate[ib] = false;
            if copy_and_shrink_cheaper {
                a_rest.alive[ia] = false;
                b_rest.alive[ib] = false;
                ops.copy = ops.copy.saturating_add(1);
                ops.shrink = ops.shrink.saturating_add(1);
            }
        },
    );
    // (c) the remaining candidates.
    ops.copy = ops.copy.saturating_add(b_rest.settle_candidates());
    ops.shrink = ops.shrink.saturating_add(a_rest.settle_candidates());

    // Step 4: replace at the same position, else drop or add.
    let (a_positions, b_positions) = (a_rest.alive_positions(), b_rest.alive_positions());
    let replaced = count_common(&a_positions, &b_positions);
    ops.replace = replaced as u64;
    ops.drop = a_positions.len().saturating_sub(replaced) as u64;
    ops.add = b_positions.len().saturating_sub(replaced) as u64;

    // Step 5, in floating point, which holds these counts exactly.
    let cost = (ops.add as f64 + ops.drop as f64 + ops.replace as f64)
        + costs.s * (ops.copy as f64 + ops.shrink as f64)
        + costs.t * ops.moves as f64;
    // The steps can cost more than max(m, n) on short, heavily rewritten documents (e.g.
    // ⟨0 a b a b⟩ → ⟨c 0 0 0⟩ with s = 0.9: 5.8 over 5); a degree is at most 1.
    let longest = m.max(n);
    let degree = if longest == 0 { 0.0 } else { (cost / longest as f64).min(1.0) };
    Ied { ops, cost, degree, lcs: pairs.len() }
}

/// How many items two sorted lists without repeats have in common.
fn count_common<T: Ord + Copy>(a: &[T], b: &[T]) -> usize {
    let mut common = 0usize;
    merge_join(a, b, |&x| x, |&y| y, |_, _| common = common.saturating_add(1));
    common
}

/// ED: word insertions and deletions over m + n, from the LCS length.
pub fn edit_distance(m: usize, n: usize, lcs_len: usize) -> f64 {
    if m == 0 && n == 0 {
        return 0.0;
    }
    let total = m as f64 + n as f64;
    (total - 2.0 * lcs_len as f64) / total
}

/// A document's distinct words with their counts, sorted by word.
pub fn term_counts(words: &[u64]) -> Vec<(u64, u32)> {
    let mut sorted = words.to_vec();
    sorted.sort_unstable();
    sorted.chunk_by(|a, b| a == b).map(|run| (run[0], u32::try_from(run.len()).unwrap_or(u32::MAX))).collect()
}

/// WD: 1 − 2·|common words| / (m + n), common words a multiset intersection.
pub fn word_distance(a: &[(u64, u32)], b: &[(u64, u32)]) -> f64 {
    let total: u64 = a.iter().chain(b).map(|&(_, c)| u64::from(c)).sum();
    if total == 0 {
        return 0.0;
    }
    let mut common = 0u64;
    merge_join(
        a,
        b,
        |t| t.0,
        |t| t.0,
        |&(_, x), &(_, y)| common = common.saturating_add(u64::from(x.min(y))),
    );
    1.0 - 2.0 * common as f64 / total as f64
}

/// Document frequencies over the documents a diff instance holds, for COS's IDF, in a
/// count-min sketch of a fixed size (`--cos-sketch-bytes`): [`ROWS`] rows of counters, a
/// word counted in one counter of each and its frequency read as the least of them. A
/// table of every distinct word would grow with the web (a page of 100,000 random words
/// adds 100,000 entries); the sketch never does. Collisions only add: a frequency is
/// never under-read, and is over-read by about (distinct words held) / (counters per row)
/// at worst, which lowers a rare word's IDF (BENCHMARKS.md measures it).
#[derive(Debug, Clone)]
pub struct DocumentFrequencies {
    /// `ROWS` rows of `width` counters, allocated at the first document.
    counters: Vec<u32>,
    width: usize,
    documents: u64,
    /// Counters of the first row above 0, for the vocabulary's estimate.
    occupied: usize,
}

/// Rows of the sketch: two take the error of one row down to what collisions in both
/// give, at twice the lookups.
pub const ROWS: usize = 2;

/// The sketch's size by default: 2 rows of 4 Mi counters.
pub const DEFAULT_SKETCH_BYTES: usize = 32 << 20;

/// Independent row hashes of an already uniform word hash.
const ROW_SEEDS: [u64; ROWS] = [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F];

impl Default for DocumentFrequencies {
    fn default() -> Self {
        Self::with_bytes(DEFAULT_SKETCH_BYTES)
    }
}

impl DocumentFrequencies {
    /// A sketch of at most `bytes` (at least one counter a row).
    pub fn with_bytes(bytes: usize) -> Self {
        let width = bytes.checked_div(ROWS.saturating_mul(std::mem::size_of::<u32>())).unwrap_or(0).max(1);
        Self { counters: Vec::new(), width, documents: 0, occupied: 0 }
    }

    /// Bytes the sketch holds once a document was counted.
    pub fn bytes(&self) -> usize {
        self.width.saturating_mul(ROWS).saturating_mul(std::mem::size_of::<u32>())
    }

    fn cells(&self, word: u64) -> [usize; ROWS] {
        let width = self.width as u64;
        let mut cells = [0; ROWS];
        for (row, (cell, seed)) in cells.iter_mut().zip(ROW_SEEDS).enumerate() {
            // Multiply-shift onto [0, width): uniform for a uniform 64-bit input, and a
            // 64 × 64-bit product never overflows 128 bits.
            let spread = u128::from(mix(word ^ seed)).wrapping_mul(u128::from(width)) >> 64;
            *cell = row.saturating_mul(self.width).saturating_add(spread as usize);
        }
        cells
    }

    /// Counts a document given its term counts.
    pub fn add(&mut self, terms: &[(u64, u32)]) {
        if self.counters.is_empty() {
            self.counters = vec![0; self.width.saturating_mul(ROWS)];
        }
        self.documents = self.documents.saturating_add(1);
        for &(word, _) in terms {
            for cell in self.cells(word) {
                let counter = &mut self.counters[cell];
                if *counter == 0 && cell < self.width {
                    self.occupied = self.occupied.saturating_add(1);
                }
                *counter = counter.saturating_add(1);
            }
        }
    }

    /// Forgets a document counted before.
    pub fn remove(&mut self, terms: &[(u64, u32)]) {
        if self.counters.is_empty() {
            return;
        }
        self.documents = self.documents.saturating_sub(1);
        for &(word, _) in terms {
            for cell in self.cells(word) {
                let counter = &mut self.counters[cell];
                *counter = counter.saturating_sub(1);
                if *counter == 0 && cell < self.width {
                    self.occupied = self.occupied.saturating_sub(1);
                }
            }
        }
    }

    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// Distinct words counted, estimated from the share of the first row's counters in
    /// use (linear counting): exact while they are few, within a few percent up to about
    /// the row's width.
    pub fn vocabulary(&self) -> usize {
        if self.occupied >= self.width {
            return self.width.saturating_mul(8);
        }
        let width = self.width as f64;
        (-width * (1.0 - self.occupied as f64 / width).ln()).round() as usize
    }

    /// The document frequency of `word`: never less than the true one.
    pub fn frequency(&self, word: u64) -> u32 {
        if self.counters.is_empty() {
            return 0;
        }
        self.cells(word).into_iter().map(|cell| self.counters[cell]).min().unwrap_or(0)
    }

    /// idf(w) = ln((N + 1)/(df(w) + 1)) + 1.
    pub fn idf(&self, word: u64) -> f64 {
        ((self.documents as f64 + 1.0) / (f64::from(self.frequency(word)) + 1.0)).ln() + 1.0
    }
}

/// A bijective mix of 64 bits (MurmurHash3's finaliser): every output bit depends on
/// every input bit, so rows and samples seeded apart are independent.
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

/// COS: 1 − cos(v_a, v_b) of TF·IDF vectors; term frequencies alone without `corpus`.
pub fn cosine_distance(a: &[(u64, u32)], b: &[(u64, u32)], corpus: Option<&DocumentFrequencies>) -> f64 {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return 0.0,
        (true, false) | (false, true) => return 1.0,
        (false, false) => {}
    }
    // Each word's IDF read once: the sketch's counters are random reads of a table far
    // larger than the caches, and the norms and the product each needed them.
    let with_idf = |terms: &[(u64, u32)]| -> Vec<(u64, u32, f64)> {
        terms.iter().map(|&(word, count)| (word, count, corpus.map_or(1.0, |c| c.idf(word)))).collect()
    };
    let (a, b) = (with_idf(a), with_idf(b));
    let norm = |terms: &[(u64, u32, f64)]| {
        terms.iter().map(|&(_, c, idf)| (f64::from(c) * idf).powi(2)).sum::<f64>().sqrt()
    };
    let mut dot = 0.0;
    merge_join(
        &a,
        &b,
        |t| t.0,
        |t| t.0,
        |&(_, x, idf), &(_, y, _)| {
            dot += f64::from(x) * f64::from(y) * idf.powi(2);
        },
    );
    (1.0 - dot / (norm(&a) * norm(&b))).clamp(0.0, 1.0)
}

/// Any odd multiplier spreads the window's words over the 64 bits.
const SHINGLE_BASE: u64 = 0x9E37_79B9_7F4A_7C15;

/// The hashes of a document's k-word windows, one starting at every word and wrapping
/// around the end; sorted and deduplicated.
pub fn shingles(words: &[u64], k: usize) -> Vec<u64> {
    let n = words.len();
    if n == 0 || k == 0 {
        return Vec::new();
    }
    // A rolling polynomial hash: each window costs O(1) instead of hashing k words.
    let leading = (1..k).fold(1u64, |power, _| power.wrapping_mul(SHINGLE_BASE));
    let wrapped = || words.iter().cycle();
    let mut hash = wrapped().take(k).fold(0u64, |h, &word| h.wrapping_mul(SHINGLE_BASE).wrapping_add(word));
    let mut windows = Vec::with_capacity(n);
    // The window leaving `first` is followed by the one taking in `next`, k words on.
    for (&first, &next) in words.iter().zip(wrapped().skip(k)) {
        windows.push(hash);
        hash = hash.wrapping_sub(first.wrapping_mul(leading)).wrapping_mul(SHINGLE_BASE).wrapping_add(next);
    }
    windows.sort_unstable();
    windows.dedup();
    windows
}

/// k-SH: 1 − |S(a) ∩ S(b)| / |S(a) ∪ S(b)| of the shingle sets.
pub fn shingle_distance(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let common = count_common(a, b) as f64;
    1.0 - common / (a.len() as f64 + b.len() as f64 - common)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lcs::reference;
    use proptest::prelude::*;

    fn words(text: &str) -> Vec<u64> {
        text.split_whitespace().map(|w| xxhash_rust::xxh3::xxh3_64(w.as_bytes())).collect()
    }

    fn ops(add: u64, drop: u64, copy: u64, shrink: u64, replace: u64, moves: u64) -> IedOps {
        IedOps { add, drop, copy, shrink, replace, moves }
    }

    #[test]
    fn the_papers_example_1() {
        let a = words("w1 w2 w2 w2 w3 w3 w4 w5 w2");
        let b = words("w3 w1 w4 w2 w3 w5 w5 w6 w6 w7");
        let result = ied(&a, &b, IedCosts { s: 0.4, t: 0.9 });
        assert_eq!(result.ops, ops(2, 0, 3, 4, 0, 1));
        assert!((result.cost - 5.7).abs() < 1e-9, "{}", result.cost);
        assert!((result.degree - 0.57).abs() < 1e-9, "{}", result.degree);
    }

    #[test]
    fn example_1_does_not_depend_on_which_lcs_is_taken() {
        let a = words("w1 w2 w2 w2 w3 w3 w4 w5 w2");
        let b = words("w3 w1 w4 w2 w3 w5 w5 w6 w6 w7");
        let costs = IedCosts { s: 0.4, t: 0.9 };
        let from_reference = ied_from_lcs(&a, &b, &reference::lcs(&a, &b), costs);
        assert_eq!(from_reference.ops, ied(&a, &b, costs).ops);
    }

    #[test]
    fn each_kind_of_change_is_its_operation() {
        let costs = IedCosts::default();
        let base = words("a b c d e f g h");
        let cases = [
            ("a b c x d e f g h", ops(1, 0, 0, 0, 0, 0)),
            ("a b c d b e f g h", ops(0, 0, 1, 0, 0, 0)),
            ("a b c e f g h", ops(0, 1, 0, 0, 0, 0)),
            ("a b c y e f g h", ops(0, 0, 0, 0, 1, 0)),
            ("a c d e f g b h", ops(0, 0, 0, 0, 0, 1)),
        ];
        for (new, expected) in cases {
            assert_eq!(ied(&base, &words(new), costs).ops, expected, "{new}");
        }
        let repeated = words("a b a c d");
        assert_eq!(ied(&repeated, &words("a b c d"), costs).ops, ops(0, 0, 0, 1, 0, 0), "shrink");
    }

    #[test]
    fn a_copy_and_a_shrink_at_one_position_are_a_replace_unless_cheaper() {
        // Position 3 loses a repeated `a` and gains a repeated `b`.
        let (a, b) = (words("a b a c"), words("a b b c"));
        assert_eq!(ied(&a, &b, IedCosts { s: 0.75, t: 0.75 }).ops, ops(0, 0, 0, 0, 1, 0));
        assert_eq!(ied(&a, &b, IedCosts { s: 0.4, t: 0.75 }).ops, ops(0, 0, 1, 1, 0, 0));
    }

    #[test]
    fn the_degree_is_capped_at_one() {
        let result = ied(&words("0 a b a b"), &words("c 0 0 0"), IedCosts { s: 0.9, t: 0.0 });
        // δ_E = 5.8 over max(m, n) = 5 is 1.16: the degree is clamped, the cost kept.
        assert!((result.cost - 5.8).abs() < 1e-9, "{result:?}");
        assert_eq!(result.degree, 1.0);
    }

    #[test]
    fn identical_and_empty_documents() {
        let a = words("one two three");
        for metric in [
            ied(&a, &a, IedCosts::default()).degree,
            word_distance(&term_counts(&a), &term_counts(&a)),
            cosine_distance(&term_counts(&a), &term_counts(&a), None),
            shingle_distance(&shingles(&a, 10), &shingles(&a, 10)),
            edit_distance(3, 3, 3),
            ied(&[], &[], IedCosts::default()).degree,
            word_distance(&[], &[]),
            cosine_distance(&[], &[], None),
            shingle_distance(&[], &[]),
            edit_distance(0, 0, 0),
        ] {
            assert_eq!(metric, 0.0);
        }
        for metric in [
            ied(&[], &a, IedCosts::default()).degree,
            ied(&a, &[], IedCosts::default()).degree,
            word_distance(&[], &term_counts(&a)),
            cosine_distance(&term_counts(&a), &[], None),
            shingle_distance(&shingles(&a, 10), &[]),
            edit_distance(3, 0, 0),
        ] {
            assert_eq!(metric, 1.0);
        }
    }

    #[test]
    fn the_spec_word_and_edit_distance_examples() {
        let old = words("w1 w2 w3 w4");
        for new in ["w1 w2 w3 w4 w2 w3", "w1 w2 w3 w4 w5 w6"] {
            let new = words(new);
            let wd = word_distance(&term_counts(&old), &term_counts(&new));
            let ed = edit_distance(old.len(), new.len(), lcs(&old, &new).len());
            assert!((wd - 0.2).abs() < 1e-12 && (ed - 0.2).abs() < 1e-12, "wd {wd} ed {ed}");
        }
        let (a, b) = (words("A G B A A"), words("A B A T A"));
        assert!((edit_distance(5, 5, lcs(&a, &b).len()) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn the_spec_shingling_examples() {
        let base = shingles(&words("w1 w2 w3 w4 w5"), 3);
        let replaced = shingle_distance(&base, &shingles(&words("w1 w2 w3 w6 w5"), 3));
        assert!((replaced - 0.75).abs() < 1e-12, "{replaced}");
        // The paper says 1; its own formula with wrapping gives 1 − 1/9.
        let swapped = shingle_distance(&base, &shingles(&words("w2 w1 w3 w4 w5"), 3));
        assert!((swapped - 8.0 / 9.0).abs() < 1e-12, "{swapped}");
    }

    #[test]
    fn cosine_ignores_order_and_idf_discounts_common_words() {
        let (a, b) = (words("x y z"), words("z y x"));
        assert_eq!(cosine_distance(&term_counts(&a), &term_counts(&b), None), 0.0);
        let (old, new) = (term_counts(&words("common rare")), term_counts(&words("common other")));
        let mut corpus = DocumentFrequencies::default();
        for _ in 0..10 {
            corpus.add(&term_counts(&words("common filler")));
        }
        let plain = cosine_distance(&old, &new, None);
        let weighted = cosine_distance(&old, &new, Some(&corpus));
        assert!(weighted > plain, "shared common word counts less: {weighted} vs {plain}");
        corpus.remove(&term_counts(&words("common filler")));
        assert_eq!(corpus.documents(), 9);
        assert_eq!(corpus.vocabulary(), 2);
        assert_eq!((corpus.frequency(words("common")[0]), corpus.frequency(words("rare")[0])), (9, 0));
    }

    #[test]
    fn cosine_with_idf_is_the_cosine_of_the_tf_idf_vectors() {
        let mut corpus = DocumentFrequencies::default();
        for document in ["a b c", "a d", "a b e f", "g"] {
            corpus.add(&term_counts(&words(document)));
        }
        let (old, new) = (term_counts(&words("a a b c x")), term_counts(&words("a b b d y y")));
        let vector = |terms: &[(u64, u32)]| -> std::collections::HashMap<u64, f64> {
            terms.iter().map(|&(word, count)| (word, f64::from(count) * corpus.idf(word))).collect()
        };
        let (va, vb) = (vector(&old), vector(&new));
        let dot: f64 = va.iter().filter_map(|(word, x)| vb.get(word).map(|y| x * y)).sum();
        let norm = |v: &std::collections::HashMap<u64, f64>| v.values().map(|x| x * x).sum::<f64>().sqrt();
        let expected = 1.0 - dot / (norm(&va) * norm(&vb));
        let distance = cosine_distance(&old, &new, Some(&corpus));
        assert!((distance - expected).abs() < 1e-12, "{distance} against {expected}");
    }

    #[test]
    fn the_sketch_never_grows_and_never_under_reads() {
        // 16 counters a row for 2,000 distinct words: every counter is shared.
        let mut corpus = DocumentFrequencies::with_bytes(128);
        let documents: Vec<Vec<(u64, u32)>> =
            (0..20u64).map(|d| term_counts(&(d * 100..d * 100 + 100).collect::<Vec<_>>())).collect();
        for document in &documents {
            corpus.add(document);
        }
        assert_eq!(corpus.bytes(), 128);
        assert!((0..2000).all(|word| corpus.frequency(word) >= 1));
        for document in &documents {
            corpus.remove(document);
        }
        assert!((0..2000).all(|word| corpus.frequency(word) == 0), "every count taken back");
        assert_eq!((corpus.documents(), corpus.vocabulary()), (0, 0));
    }

    proptest! {
        #[test]
        fn degrees_stay_in_the_unit_interval(
            a in prop::collection::vec(0u64..20, 0..60),
            b in prop::collection::vec(0u64..20, 0..60),
            s in 0.0f64..=1.0,
            t in 0.0f64..=1.0,
        ) {
            let result = ied(&a, &b, IedCosts { s, t });
            prop_assert!((0.0..=1.0).contains(&result.degree), "{:?}", result);
            let (ta, tb) = (term_counts(&a), term_counts(&b));
            for degree in [
                word_distance(&ta, &tb),
                cosine_distance(&ta, &tb, None),
                shingle_distance(&shingles(&a, 10), &shingles(&b, 10)),
                edit_distance(a.len(), b.len(), result.lcs),
            ] {
                prop_assert!((0.0..=1.0).contains(&degree), "{}", degree);
            }
            let consumed = result.ops.add + result.ops.copy + result.ops.replace + result.ops.moves;
            prop_assert_eq!(consumed as usize, b.len() - result.lcs, "every new word is accounted for");
            let removed = result.ops.drop + result.ops.shrink + result.ops.replace + result.ops.moves;
            prop_assert_eq!(removed as usize, a.len() - result.lcs, "every old word is accounted for");
        }
    }
}
