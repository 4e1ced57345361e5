//! The six kinds of change of `docs/algorithms/change-degree.md` §1 with their reference
//! degrees, the edits that make them, and document pairs changed by exactly one kind: the
//! `criteria` experiments of `recrawl-lab` and the benches run the comparison on them; the
//! simulated web changes its pages with the same edits, choosing words and positions on its
//! own text.
//!
//! Documents are sequences of distinct words except where a kind needs repeats, so that
//! each change is exactly its kind: a shrink deletes words that occur elsewhere, a copy
//! inserts words that already occur. The changed words form one cluster, as the paper
//! arranged them. A moved cluster trades places with as many words after it, so exactly
//! its words move; when it is more than half the document that is impossible and the
//! cluster is reversed instead (every word but one changes position: x − 1 moves).

use std::num::NonZeroU64;

use xxhash_rust::xxh3::xxh3_64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    Add,
    Copy,
    Drop,
    Shrink,
    Replace,
    Move,
}

impl ChangeKind {
    pub const ALL: [Self; 6] = [Self::Add, Self::Copy, Self::Drop, Self::Shrink, Self::Replace, Self::Move];

    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Copy => "copy",
            Self::Drop => "drop",
            Self::Shrink => "shrink",
            Self::Replace => "replace",
            Self::Move => "move",
        }
    }

    /// The reference degree of changing `x` words of an `n`-word document (§1); α weights
    /// copies and shrinks, β moves.
    pub fn reference(self, n: usize, x: usize, alpha: f64, beta: f64) -> f64 {
        let (n, x) = (n as f64, x as f64);
        match self {
            Self::Add => x / (n + x),
            Self::Copy => alpha * x / (n + x),
            Self::Drop | Self::Replace => x / n,
            Self::Shrink => alpha * x / n,
            Self::Move => beta * x.min(n - 1.0) / n,
        }
    }
}

/// One change as an edit of a word sequence. Which words and positions make it exactly
/// its kind is the caller's choice: fresh words for an add, existing ones for a copy, words
/// occurring once for a drop, repeats for a shrink.
///
/// # Panics
/// [`Edit::apply`] panics on positions outside the sequence, as slice indexing does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit<T> {
    /// Add and copy: `words` inserted before position `at`.
    Insert { at: usize, words: Vec<T> },
    /// Drop and shrink: the words at these positions (any order, no repeats) deleted.
    Delete(Vec<usize>),
    /// Replace: the words from `start` on overwritten by `words`.
    Overwrite { start: usize, words: Vec<T> },
    /// Move: `len` words from `from` taken out, then put back before position `to` of
    /// the words left.
    Move { from: usize, len: usize, to: usize },
    /// Move of a cluster too long to pass as many other words: `len` words from `start`
    /// reversed in place.
    Reverse { start: usize, len: usize },
}

impl<T> Edit<T> {
    pub fn apply(self, sequence: &mut Vec<T>) {
        match self {
            Self::Insert { at, words } => {
                sequence.splice(at..at, words);
            }
            Self::Delete(positions) => {
                let mut doomed = vec![false; sequence.len()];
                positions.into_iter().for_each(|i| doomed[i] = true);
                let mut flags = doomed.into_iter();
                sequence.retain(|_| !flags.next().unwrap_or(false));
            }
            Self::Overwrite { start, words } => {
                let run = &mut sequence[start..][..words.len()];
                run.iter_mut().zip(words).for_each(|(old, new)| *old = new);
            }
            Self::Move { from, len, to } => {
                // The cluster to the end, after the others in their order; then to `to`.
                sequence[from..].rotate_left(len);
                sequence[to..].rotate_right(len);
            }
            Self::Reverse { start, len } => sequence[start..][..len].reverse(),
        }
    }
}

fn word(tag: &str, index: usize) -> u64 {
    xxh3_64(format!("{tag}{index}").as_bytes())
}

/// SplitMix64: a seeded, dependency-free choice of which existing words a copy repeats.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The old and new word sequences (word hashes) for `x` words of an `n`-word document
/// changed by `kind`.
pub fn change_pair(kind: ChangeKind, n: usize, x: usize) -> (Vec<u64>, Vec<u64>) {
    change_pair_of(kind, n, x, word)
}

/// [`change_pair`] with words made by `word(tag, index)`: distinct (tag, index) pairs
/// must give distinct words.
pub fn change_pair_of<T: Clone>(
    kind: ChangeKind,
    n: usize,
    x: usize,
    word: impl Fn(&str, usize) -> T,
) -> (Vec<T>, Vec<T>) {
    let Some(words) = NonZeroU64::new(n as u64) else {
        return (Vec::new(), Vec::new());
    };
    // At most every word changes; the others lie outside the cluster.
    let (x, outside) = (x.min(n), n.saturating_sub(x));
    let distinct: Vec<T> = (0..n).map(|i| word("w", i)).collect();
    // Deleted, replaced and moved clusters sit in the middle; insertions go there too.
    let start = outside / 2;
    let (old, edit) = match kind {
        ChangeKind::Add => {
            let fresh = (0..x).map(|i| word("new", i)).collect();
            (distinct, Edit::Insert { at: n / 2, words: fresh })
        }
        ChangeKind::Copy => {
            let mut state = n as u64 ^ (x as u64) << 32;
            let copies = (0..x).map(|_| distinct[(splitmix(&mut state) % words) as usize].clone()).collect();
            (distinct, Edit::Insert { at: n / 2, words: copies })
        }
        ChangeKind::Drop => (distinct, Edit::Delete((start..).take(x).collect())),
        ChangeKind::Shrink => {
            // The cluster repeats words from around it, so deleting it leaves each word; in
            // random order, so its word windows are not the surrounding ones.
            let mut old = distinct[..outside].to_vec();
            let repeated = NonZeroU64::new(outside as u64).unwrap_or(NonZeroU64::MIN);
            let mut state = n as u64 ^ (x as u64) << 32;
            let repeats = (0..x).map(|_| word("w", (splitmix(&mut state) % repeated) as usize));
            old.splice(start..start, repeats);
            (old, Edit::Delete((start..).take(x).collect()))
        }
        ChangeKind::Replace => {
            let replacements = (0..x).map(|i| word("new", i)).collect();
            (distinct, Edit::Overwrite { start, words: replacements })
        }
        ChangeKind::Move => match (n / 2).checked_sub(x) {
            // The cluster trades places with the x words after it.
            Some(from) => (distinct, Edit::Move { from, len: x, to: n / 2 }),
            None => (distinct, Edit::Reverse { start, len: x }),
        },
    };
    let mut new = old.clone();
    edit.apply(&mut new);
    (old, new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_insert_delete_overwrite_move_and_reverse() {
        let apply = |edit: Edit<char>| {
            let mut sequence: Vec<char> = "abcdefg".chars().collect();
            edit.apply(&mut sequence);
            sequence.into_iter().collect::<String>()
        };
        assert_eq!(apply(Edit::Insert { at: 7, words: vec!['x', 'y'] }), "abcdefgxy");
        assert_eq!(apply(Edit::Delete(vec![5, 0, 2])), "bdeg", "positions in any order");
        assert_eq!(apply(Edit::Overwrite { start: 2, words: vec!['x', 'y'] }), "abxyefg");
        assert_eq!(apply(Edit::Move { from: 1, len: 2, to: 3 }), "adebcfg", "forward, past d e");
        assert_eq!(apply(Edit::Move { from: 4, len: 3, to: 0 }), "efgabcd", "backward");
        assert_eq!(apply(Edit::Reverse { start: 1, len: 4 }), "aedcbfg");
    }

    #[test]
    fn each_pair_changes_exactly_what_its_kind_says() {
        let n = 40;
        for kind in ChangeKind::ALL {
            let (old, new) = change_pair(kind, n, 10);
            let expected_len = match kind {
                ChangeKind::Add | ChangeKind::Copy => n + 10,
                ChangeKind::Drop | ChangeKind::Shrink => n - 10,
                ChangeKind::Replace | ChangeKind::Move => n,
            };
            assert_eq!((old.len(), new.len()), (n, expected_len), "{}", kind.name());
            let mut sorted_old = old.clone();
            let mut sorted_new = new.clone();
            sorted_old.sort_unstable();
            sorted_new.sort_unstable();
            let same_bag = sorted_old == sorted_new;
            assert_eq!(
                same_bag,
                kind == ChangeKind::Move,
                "{}: only a move keeps the bag of words",
                kind.name()
            );
        }
        let (old, new) = change_pair(ChangeKind::Shrink, n, 10);
        assert!(
            new.iter().all(|w| old.contains(w)) && old.iter().all(|w| new.contains(w)),
            "shrink keeps every word"
        );
    }
}
