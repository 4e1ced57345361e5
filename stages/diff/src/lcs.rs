//! A longest common subsequence of two word-hash sequences, fast enough for whole pages
//! and in memory linear in their lengths (`docs/algorithms/change-degree.md` §5).
//!
//! The textbook dynamic programme needs m·n cells: 67 million for two 8,192-word pages.
//! Instead, in order:
//! 1. the common prefix and suffix are matched (page edits are usually clustered, so this
//!    alone often leaves a few dozen words);
//! 2. words that occur on one side only are set aside: they can never be in a common
//!    subsequence, so dropping them keeps the result longest;
//! 3. what remains is solved by Myers's O((N+M)·D) greedy algorithm when the difference D
//!    is small, else by Hirschberg's divide and conquer whose rows are computed 64
//!    columns per machine word (Hyyrö's bit-parallel LCS recurrence), so O(m·n/64) time
//!    and O(m + n) memory; each half is solved the same way.
//!
//! **Which LCS.** Several subsequences can be longest, and IED's move/copy/replace split
//! can differ between them. The one returned is a deterministic function of the two
//! sequences: prefix and suffix matches first; Myers's path preferring deletions from
//! `a` over insertions from `b` at equal cost; Hirschberg's split at the leftmost column
//! of `b` that keeps the total longest; a single remaining word of `a` is matched with
//! its leftmost occurrence in `b`.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::hash::RandomState;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

/// Positions `(i, j)` with `a[i] == b[j]` forming a longest common subsequence, ascending.
pub fn lcs(a: &[u64], b: &[u64]) -> Vec<(u32, u32)> {
    let (mut core_a, mut core_b) = (0..a.len(), 0..b.len());
    let mut pairs = Vec::new();
    let suffix = strip_common(a, b, &mut core_a, &mut core_b, &mut pairs);
    let shared = SharedSymbols::new(a, b, core_a, core_b);
    let mut solver = Solver::new(shared.alphabet, shared.b.len());
    let mut core_pairs = Vec::new();
    solver.solve(&shared.a, &shared.b, 0..shared.a.len(), 0..shared.b.len(), &mut core_pairs);
    pairs.extend(
        core_pairs.into_iter().map(|(i, j)| (shared.a_index[i as usize], shared.b_index[j as usize])),
    );
    pairs.extend(suffix);
    pairs
}

fn pair((i, j): (usize, usize)) -> (u32, u32) {
    (i as u32, j as u32)
}

/// Narrows `xs` and `ys` to what lies between the common prefix and the common suffix of
/// `x[xs]` and `y[ys]`: appends the prefix's position pairs to `out`, returns the suffix's.
fn strip_common<T: PartialEq>(
    x: &[T],
    y: &[T],
    xs: &mut Range<usize>,
    ys: &mut Range<usize>,
    out: &mut Vec<(u32, u32)>,
) -> impl Iterator<Item = (u32, u32)> {
    let prefix = x[xs.clone()].iter().zip(&y[ys.clone()]).take_while(|(a, b)| a == b).count();
    out.extend(xs.by_ref().zip(ys.by_ref()).take(prefix).map(pair));
    let (x_end, y_end) = xs
        .clone()
        .rev()
        .zip(ys.clone().rev())
        .take_while(|&(i, j)| x[i] == y[j])
        .last()
        .unwrap_or((xs.end, ys.end));
    let suffix = (x_end..xs.end).zip(y_end..ys.end).map(pair);
    (xs.end, ys.end) = (x_end, y_end);
    suffix
}

/// The hasher of maps keyed by word hashes. Those are xxh3 of the words, uniform but
/// computable by anyone: a page of words whose hashes share their low bits, found offline,
/// would crowd one bucket, and the document frequencies would keep them. So each is mixed
/// with a key drawn once per process: one 64 × 64-bit multiplication, its halves folded.
pub(crate) struct PrehashedHasher {
    key: u64,
    state: u64,
}

/// Odd, so that multiplying by it loses no bit (the fractional part of the golden ratio).
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

static WORD_MAP_KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

impl Default for PrehashedHasher {
    fn default() -> Self {
        // std's RandomState draws its keys from the operating system.
        let key =
            *WORD_MAP_KEY.get_or_init(|| std::hash::BuildHasher::build_hasher(&RandomState::new()).finish());
        Self { key, state: 0 }
    }
}

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        let product = u128::from(self.state ^ self.key).wrapping_mul(u128::from(MIX));
        (product as u64) ^ ((product >> 64) as u64)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.state = self.state.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.state = value;
    }
}

pub(crate) type PrehashedMap<V> = HashMap<u64, V, BuildHasherDefault<PrehashedHasher>>;

/// The two sequences restricted to words occurring in both, as dense symbol ids, with
/// each kept element's index in its original sequence.
struct SharedSymbols {
    a: Vec<u32>,
    a_index: Vec<u32>,
    b: Vec<u32>,
    b_index: Vec<u32>,
    alphabet: usize,
}

impl SharedSymbols {
    /// `a[core_a]` and `b[core_b]`, indexed by their positions in `a` and `b`.
    fn new(a: &[u64], b: &[u64], core_a: Range<usize>, core_b: Range<usize>) -> Self {
        const ONLY_IN_B: u32 = u32::MAX;
        let mut ids: PrehashedMap<u32> = PrehashedMap::default();
        ids.reserve(core_b.len());
        for &word in &b[core_b.clone()] {
            ids.insert(word, ONLY_IN_B);
        }
        let mut alphabet = 0u32;
        let (mut kept_a, mut a_index) = (Vec::with_capacity(core_a.len()), Vec::with_capacity(core_a.len()));
        for (i, word) in core_a.clone().zip(&a[core_a]) {
            if let Some(id) = ids.get_mut(word) {
                if *id == ONLY_IN_B {
                    *id = alphabet;
                    alphabet = alphabet.saturating_add(1);
                }
                kept_a.push(*id);
                a_index.push(i as u32);
            }
        }
        let (mut kept_b, mut b_index) = (Vec::with_capacity(core_b.len()), Vec::with_capacity(core_b.len()));
        for (j, word) in core_b.clone().zip(&b[core_b]) {
            let id = ids[word];
            if id != ONLY_IN_B {
                kept_b.push(id);
                b_index.push(j as u32);
            }
        }
        Self { a: kept_a, a_index, b: kept_b, b_index, alphabet: alphabet as usize }
    }
}

const NONE: u32 = u32::MAX;
/// Above this difference Myers's greedy search gives way to the bit-parallel rows.
const MYERS_MAX_D: usize = 64;

/// Scratch space reused across the recursion, all O(alphabet + |b|).
struct Solver {
    /// First position of each symbol among the current columns, `NONE` when absent.
    head: Vec<u32>,
    /// Next position of the same symbol among the current columns.
    next: Vec<u32>,
    /// How many of the current columns hold each symbol.
    count: Vec<u32>,
    /// Where in `dense` the match mask of each frequent symbol starts, `NONE` for others.
    dense_slot: Vec<u32>,
    /// The symbols in more columns than a row has words, and their match masks.
    frequent: Vec<u32>,
    dense: Vec<u64>,
    bits: Vec<u64>,
    matches: Vec<u64>,
    forward: Vec<usize>,
    backward: Vec<usize>,
}

impl Solver {
    fn new(alphabet: usize, columns: usize) -> Self {
        Self {
            head: vec![NONE; alphabet],
            next: vec![NONE; columns],
            count: vec![0; alphabet],
            dense_slot: vec![NONE; alphabet],
            frequent: Vec::new(),
            dense: Vec::new(),
            bits: Vec::new(),
            matches: Vec::new(),
            forward: Vec::new(),
            backward: Vec::new(),
        }
    }

    /// Appends to `out`, ascending, an LCS of `x[xs]` and `y[ys]`.
    fn solve(
        &mut self,
        x: &[u32],
        y: &[u32],
        mut xs: Range<usize>,
        mut ys: Range<usize>,
        out: &mut Vec<(u32, u32)>,
    ) {
        let suffix = strip_common(x, y, &mut xs, &mut ys, out);
        self.solve_core(x, y, xs, ys, out);
        out.extend(suffix);
    }

    /// `x[xs]` and `y[ys]` share no prefix or suffix.
    fn solve_core(
        &mut self,
        x: &[u32],
        y: &[u32],
        xs: Range<usize>,
        ys: Range<usize>,
        out: &mut Vec<(u32, u32)>,
    ) {
        let (rows, columns) = (&x[xs.clone()], &y[ys.clone()]);
        if rows.is_empty() || columns.is_empty() {
            return;
        }
        if let [word] = rows {
            if let Some(j) = ys.clone().find(|&j| y[j] == *word) {
                out.push(pair((xs.start, j)));
            }
            return;
        }
        // Myers costs about D² here; give up on it where the rows would be cheaper.
        let row_cost = rows.len().saturating_mul(columns.len().div_ceil(64));
        if let Some(path) = myers(rows, columns, (xs.start, ys.start), row_cost.isqrt()) {
            out.extend(path);
            return;
        }
        let mid = xs.start.midpoint(xs.end);
        let mut forward = std::mem::take(&mut self.forward);
        let mut backward = std::mem::take(&mut self.backward);
        self.lcs_row(x[xs.start..mid].iter().copied(), columns, false, &mut forward);
        self.lcs_row(x[mid..xs.end].iter().rev().copied(), columns, true, &mut backward);
        // With n columns, forward[j] = LCS(x[xs.start..mid], the first j columns) and
        // backward[n - j] = LCS(x[mid..xs.end], the other n - j).
        let split = (ys.start..=ys.end)
            .zip(forward.iter().zip(backward.iter().rev()))
            .max_by_key(|&(j, (before, after))| (before.saturating_add(*after), Reverse(j)))
            .map_or(ys.start, |(j, _)| j);
        self.forward = forward;
        self.backward = backward;
        self.solve(x, y, xs.start..mid, ys.start..split, out);
        self.solve(x, y, mid..xs.end, split..ys.end, out);
    }

    /// Fills `row[j]` (j = 0..=|y|) with the LCS length of the rows and the first j
    /// columns (of `y`, or of `y` reversed when `reversed`), using the bit-parallel
    /// recurrence V ← (V + U) | (V − U), U = V & match(row): bit j of V is 0 where the
    /// LCS grows at column j.
    // Allowed, the hot loop: j < n = y.len() and an LCS length is at most j, so no value
    // here exceeds y.len() + 1.
    #[allow(clippy::arithmetic_side_effects)]
    fn lcs_row(&mut self, rows: impl Iterator<Item = u32>, y: &[u32], reversed: bool, row: &mut Vec<usize>) {
        let n = y.len();
        let column = |j: usize| if reversed { y[n - 1 - j] } else { y[j] };
        let words = n.div_ceil(64);
        for j in (0..n).rev() {
            let symbol = column(j) as usize;
            self.next[j] = self.head[symbol];
            self.head[symbol] = j as u32;
            self.count[symbol] += 1;
            if self.count[symbol] as usize == words + 1 {
                self.frequent.push(symbol as u32);
            }
        }
        // A symbol in more columns than a row has words would cost each of its rows more
        // to walk than the row's update (a×50,000 b×50,000 against its halves swapped took
        // 7 s): its mask is laid out once. At most 64 symbols are that frequent, so the
        // masks take at most n words.
        self.dense.clear();
        for &symbol in &self.frequent {
            let start = self.dense.len();
            self.dense_slot[symbol as usize] = start as u32;
            self.dense.resize(start + words, 0);
            let mut position = self.head[symbol as usize];
            while position != NONE {
                self.dense[start + position as usize / 64] |= 1 << (position % 64);
                position = self.next[position as usize];
            }
        }
        self.bits.clear();
        self.bits.resize(words, u64::MAX);
        self.matches.clear();
        self.matches.resize(words, 0);
        for symbol in rows {
            let first = self.head[symbol as usize];
            if first == NONE {
                continue;
            }
            let slot = self.dense_slot[symbol as usize];
            if slot != NONE {
                let start = slot as usize;
                advance(&mut self.bits, &self.dense[start..start + words], first as usize / 64, words - 1);
                continue;
            }
            let mut last = first;
            let mut position = first;
            while position != NONE {
                self.matches[position as usize / 64] |= 1 << (position % 64);
                last = position;
                position = self.next[position as usize];
            }
            let (low, high) = (first as usize / 64, last as usize / 64);
            advance(&mut self.bits, &self.matches, low, high);
            self.matches[low..=high].fill(0);
        }
        row.clear();
        row.reserve(n + 1);
        let mut length = 0;
        row.push(0);
        for j in 0..n {
            length += usize::from(self.bits[j / 64] >> (j % 64) & 1 == 0);
            row.push(length);
        }
        for j in 0..n {
            let symbol = column(j) as usize;
            self.head[symbol] = NONE;
            self.count[symbol] = 0;
        }
        for symbol in self.frequent.drain(..) {
            self.dense_slot[symbol as usize] = NONE;
        }
    }
}

/// One row of the bit-parallel LCS recurrence over the words `low..`, with the row's
/// symbol's `matches`; past `high` (its last match) only a carry or borrow moves on.
// Allowed, the hot loop: k < bits.len() = matches.len().
#[allow(clippy::arithmetic_side_effects)]
fn advance(bits: &mut [u64], matches: &[u64], low: usize, high: usize) {
    let (mut carry, mut borrow) = (false, false);
    for k in low..bits.len() {
        if k > high && !carry && !borrow {
            break;
        }
        let v = bits[k];
        let u = v & matches[k];
        let (sum, c1) = v.overflowing_add(u);
        let (sum, c2) = sum.overflowing_add(u64::from(carry));
        let (difference, b1) = v.overflowing_sub(u);
        let (difference, b2) = difference.overflowing_sub(u64::from(borrow));
        (carry, borrow) = (c1 | c2, b1 | b2);
        bits[k] = sum | difference;
    }
}

/// Myers's greedy shortest edit script, abandoned beyond `max_d` edits (at most
/// `MYERS_MAX_D`); the matched positions, offset by `origin`, when found. Remembers each
/// round's frontier to walk the path back: O(D²).
// Allowed, the hot loop: |k| ≤ d ≤ max_d ≤ MYERS_MAX_D = 64, so i and j stay within
// x.len() + y.len() + 2·64, far inside isize (a slice of u32 is under isize::MAX / 4 long).
#[allow(clippy::arithmetic_side_effects)]
fn myers(x: &[u32], y: &[u32], origin: (usize, usize), max_d: usize) -> Option<Vec<(u32, u32)>> {
    let max_d = max_d.min(MYERS_MAX_D);
    let (n, m) = (x.len() as isize, y.len() as isize);
    let offset = max_d as isize + 1;
    let mut frontier = vec![0isize; 2 * max_d + 3];
    let mut rounds: Vec<Vec<isize>> = Vec::new();
    for d in 0..=max_d as isize {
        rounds.push(frontier.clone());
        for k in (-d..=d).step_by(2) {
            let down = k == -d
                || (k != d && frontier[(offset + k - 1) as usize] < frontier[(offset + k + 1) as usize]);
            let mut i = if down {
                frontier[(offset + k + 1) as usize]
            } else {
                frontier[(offset + k - 1) as usize] + 1
            };
            let mut j = i - k;
            while i < n && j < m && x[i as usize] == y[j as usize] {
                i += 1;
                j += 1;
            }
            frontier[(offset + k) as usize] = i;
            if i >= n && j >= m {
                return Some(myers_path(&rounds, offset, d, (n, m), origin));
            }
        }
    }
    None
}

/// Walks back from `end` = (n, m) through the frontiers saved before each round.
// Allowed: myers's frontier arithmetic replayed, with its bounds (|k| ≤ d ≤ MYERS_MAX_D,
// 0 ≤ i ≤ n, 0 ≤ j ≤ m); a position plus `origin` is within the sequences solved.
#[allow(clippy::arithmetic_side_effects)]
fn myers_path(
    rounds: &[Vec<isize>],
    offset: isize,
    edits: isize,
    end: (isize, isize),
    origin: (usize, usize),
) -> Vec<(u32, u32)> {
    let at = |i: isize, j: isize| pair((origin.0 + i as usize, origin.1 + j as usize));
    let mut pairs = Vec::new();
    let (mut i, mut j) = end;
    for d in (1..=edits).rev() {
        let before = &rounds[d as usize];
        let k = i - j;
        let down =
            k == -d || (k != d && before[(offset + k - 1) as usize] < before[(offset + k + 1) as usize]);
        let previous_k = if down { k + 1 } else { k - 1 };
        let previous_i = before[(offset + previous_k) as usize];
        let previous_j = previous_i - previous_k;
        while i > previous_i && j > previous_j {
            i -= 1;
            j -= 1;
            pairs.push(at(i, j));
        }
        (i, j) = (previous_i, previous_j);
    }
    while i > 0 && j > 0 {
        i -= 1;
        j -= 1;
        pairs.push(at(i, j));
    }
    pairs.reverse();
    pairs
}

/// The textbook O(m·n) dynamic programme with a full table: the reference the fast path
/// is tested and benchmarked against. Never used by the stage.
pub mod reference {
    /// An LCS as ascending position pairs.
    // Allowed, the hot loop: every index is below the table's length and every LCS length,
    // at most min(m, n), below u32::MAX, since a table of (m + 1)·(n + 1) cells was allocated.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn lcs(a: &[u64], b: &[u64]) -> Vec<(u32, u32)> {
        let (m, n) = (a.len(), b.len());
        let width = n + 1;
        // Saturating: a table whose size does not fit in usize cannot be allocated either.
        let mut table = vec![0u32; (m + 1).saturating_mul(width)];
        for i in (0..m).rev() {
            for j in (0..n).rev() {
                table[i * width + j] = if a[i] == b[j] {
                    table[(i + 1) * width + j + 1] + 1
                } else {
                    table[(i + 1) * width + j].max(table[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
        while i < m && j < n {
            if a[i] == b[j] {
                pairs.push((i as u32, j as u32));
                i += 1;
                j += 1;
            } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
                i += 1;
            } else {
                j += 1;
            }
        }
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assert_common_subsequence(a: &[u64], b: &[u64], pairs: &[(u32, u32)]) {
        for window in pairs.windows(2) {
            assert!(window[0].0 < window[1].0 && window[0].1 < window[1].1, "{pairs:?} not ascending");
        }
        for &(i, j) in pairs {
            assert_eq!(a[i as usize], b[j as usize], "({i}, {j}) is not a match");
        }
    }

    fn words(text: &str) -> Vec<u64> {
        text.split_whitespace().map(|w| xxhash_rust::xxh3::xxh3_64(w.as_bytes())).collect()
    }

    #[test]
    fn the_spec_edit_distance_example() {
        let (a, b) = (words("A G B A A"), words("A B A T A"));
        let pairs = lcs(&a, &b);
        assert_common_subsequence(&a, &b, &pairs);
        assert_eq!(pairs.len(), 4, "δ = 5 + 5 − 2·4 = 2");
    }

    #[test]
    fn empty_and_identical_sequences() {
        let a = words("x y z");
        assert!(lcs(&[], &a).is_empty());
        assert!(lcs(&a, &[]).is_empty());
        assert_eq!(lcs(&a, &a), vec![(0, 0), (1, 1), (2, 2)]);
    }

    #[test]
    fn large_differences_take_the_bit_parallel_path_and_stay_longest() {
        // A block moved across the page: D is far above the greedy bound.
        let a: Vec<u64> = (0..3000).collect();
        let mut b: Vec<u64> = (0..3000).collect();
        b[100..1300].rotate_left(400);
        let pairs = lcs(&a, &b);
        assert_common_subsequence(&a, &b, &pairs);
        assert_eq!(pairs.len(), reference::lcs(&a, &b).len());
        assert_eq!(pairs.len(), 3000 - 400);
    }

    #[test]
    fn repeated_words_across_word_boundaries_of_the_bit_vectors() {
        let a: Vec<u64> = (0..700).map(|i| (i * 7 % 13) as u64).collect();
        let b: Vec<u64> = (0..650).map(|i| (i * 5 % 11) as u64).collect();
        let pairs = lcs(&a, &b);
        assert_common_subsequence(&a, &b, &pairs);
        assert_eq!(pairs.len(), reference::lcs(&a, &b).len());
    }

    /// Word hashes sharing their low 20 bits (as words chosen offline could) still land
    /// in different buckets of a map of 2^20.
    #[test]
    fn word_maps_spread_hashes_that_share_their_low_bits() {
        let hash = |word: u64| {
            let mut hasher = PrehashedHasher::default();
            hasher.write_u64(word);
            hasher.finish()
        };
        let buckets: std::collections::HashSet<u64> =
            (0..4096_u64).map(|i| hash(i << 20) & 0xF_FFFF).collect();
        assert!(buckets.len() > 4000, "{} buckets of 4096", buckets.len());
        assert_eq!(hash(7), hash(7), "one key per process");
    }

    /// Few words, each in many columns: their rows take the masks laid out once.
    #[test]
    fn frequent_words_swapped_in_halves() {
        let a: Vec<u64> = [vec![1; 3000], vec![2; 3000]].concat();
        let b: Vec<u64> = [vec![2; 3000], vec![1; 3000], vec![3; 100]].concat();
        let pairs = lcs(&a, &b);
        assert_common_subsequence(&a, &b, &pairs);
        assert_eq!(pairs.len(), 3000);
    }

    #[test]
    fn the_choice_among_longest_subsequences_is_deterministic() {
        let (a, b) = (words("x y x y x"), words("y x y x y"));
        let first = lcs(&a, &b);
        assert_eq!(first.len(), 4);
        assert_eq!(first, lcs(&a, &b));
    }

    fn sequence(alphabet: u64, max_len: usize) -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(0..alphabet, 0..max_len)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Tiny alphabets force heavy repetition, many equally long answers, and both the
        /// greedy and the bit-parallel paths.
        #[test]
        fn as_long_as_the_dynamic_programme(
            alphabet in 1u64..12,
            a in sequence(12, 300),
            b in sequence(12, 300),
        ) {
            let (a, b): (Vec<u64>, Vec<u64>) =
                (a.iter().map(|w| w % alphabet).collect(), b.iter().map(|w| w % alphabet).collect());
            let pairs = lcs(&a, &b);
            assert_common_subsequence(&a, &b, &pairs);
            prop_assert_eq!(pairs.len(), reference::lcs(&a, &b).len());
        }

        #[test]
        fn edited_copies_match_the_dynamic_programme(
            a in sequence(400, 600),
            edits in prop::collection::vec((0usize..600, 0u64..400, 0u8..3), 0..80),
        ) {
            let mut b = a.clone();
            for (at, word, kind) in edits {
                let at = at.min(b.len());
                match kind {
                    0 => b.insert(at, word),
                    1 if at < b.len() => { b.remove(at); }
                    _ if at < b.len() => b[at] = word,
                    _ => b.push(word),
                }
            }
            let pairs = lcs(&a, &b);
            assert_common_subsequence(&a, &b, &pairs);
            prop_assert_eq!(pairs.len(), reference::lcs(&a, &b).len());
        }
    }
}
