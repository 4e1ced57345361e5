//! Page text for the simulated web, and changes of exactly one of the six kinds of
//! `docs/algorithms/change-degree.md` §1, so the diff stage's degrees can be checked against the
//! reference degree of the change made. Words are Zipf-distributed as on real pages: a few
//! short words repeat a lot, most occur once, so drops (of words occurring once) and
//! shrinks (of repeats) both apply to one page.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write};
use std::sync::OnceLock;

use encoding_rs::{Encoding, EUC_KR, UTF_8};
use rand::{Rng, RngExt, SeedableRng};
use rand_pcg::Pcg64;
use recrawl_diff::criteria::{ChangeKind, Edit};

/// What a vocabulary's words look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    English,
    Korean,
}

/// A Zipf-distributed vocabulary (exponent 1) of distinct words, generated from a seed:
/// English-like words of 2–10 Latin letters made of syllables, or Korean words of 1–4 Hangul
/// syllables. Word 0 is the most frequent; shorter words come first, as in real languages.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    language: Language,
    words: Vec<String>,
    /// `cumulative[i]` = Σ_{k ≤ i} 1/(k + 1): sampling is a binary search in it.
    cumulative: Vec<f64>,
}

const ONSETS: [&str; 30] = [
    "", "", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "ch", "cl",
    "cr", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th",
];
const VOWELS: [&str; 10] = ["a", "e", "i", "o", "u", "a", "e", "ea", "ou", "io"];
const CODAS: [&str; 12] = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"];

/// The Hangul syllables of KS X 1001, the 2,350 that strict EUC-KR encodes. encoding_rs's
/// `EUC_KR` is the WHATWG one, i.e. Windows-949, which encodes all 11,172 syllables, the
/// other 8,822 with bytes outside 0xA1..=0xFE that strict EUC-KR decoders reject; so a
/// syllable counts only if it encodes to two bytes both in that range.
fn ks_x_1001_syllables() -> &'static [char] {
    static SYLLABLES: OnceLock<Vec<char>> = OnceLock::new();
    SYLLABLES.get_or_init(|| {
        ('\u{AC00}'..='\u{D7A3}')
            .filter(|&c| {
                let mut buffer = [0u8; 4];
                let (bytes, _, lossy) = EUC_KR.encode(c.encode_utf8(&mut buffer));
                !lossy && bytes.len() == 2 && bytes.iter().all(|&b| b >= 0xA1)
            })
            .collect()
    })
}

fn english_word(rng: &mut Pcg64) -> String {
    // Two uniform draws: lengths 2..=10, most around 6.
    let target = 2 + rng.random_range(0..5) + rng.random_range(0..5);
    let mut word = String::new();
    while word.len() < target {
        for part in [&ONSETS[..], &VOWELS, &CODAS] {
            word.push_str(part[rng.random_range(0..part.len())]);
        }
    }
    word.truncate(10);
    word
}

fn korean_word(rng: &mut Pcg64) -> String {
    let syllables = ks_x_1001_syllables();
    let count = [1, 2, 2, 2, 3, 3, 4][rng.random_range(0..7)];
    (0..count).map(|_| syllables[rng.random_range(0..syllables.len())]).collect()
}

impl Vocabulary {
    /// At least 2 words, so that a replacement word always exists; at most `u32::MAX`.
    pub fn new(language: Language, size: usize, seed: u64) -> Self {
        let size = size.clamp(2, u32::MAX as usize);
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut seen = HashSet::with_capacity(size);
        let mut words = Vec::with_capacity(size);
        let make = if language == Language::English { english_word } else { korean_word };
        while words.len() < size {
            let word = make(&mut rng);
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        // Zipf's law of abbreviation: frequent words are short. Stable, so still seeded.
        words.sort_by_key(|w| w.chars().count());
        let cumulative = (1..=size)
            .scan(0.0, |sum, rank| {
                *sum += 1.0 / rank as f64;
                Some(*sum)
            })
            .collect();
        Self { language, words, cumulative }
    }

    pub fn language(&self) -> Language {
        self.language
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// # Panics
    /// If `index` is not below [`Self::len`], as slice indexing does.
    pub fn word(&self, index: u32) -> &str {
        &self.words[index as usize]
    }

    /// A word index drawn from the Zipf distribution, in O(log len).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let target = rng.random::<f64>() * total;
        let index = self.cumulative.partition_point(|&c| c <= target);
        index.min(self.words.len().saturating_sub(1)) as u32
    }
}

/// A page's text: `n` words drawn independently from the vocabulary's Zipf distribution.
pub fn initial_words(vocabulary: &Vocabulary, n: usize, rng: &mut Pcg64) -> Vec<u32> {
    (0..n).map(|_| vocabulary.sample(rng)).collect()
}

fn counts(words: &[u32]) -> HashMap<u32, u32> {
    let mut counts = HashMap::with_capacity(words.len());
    for &word in words {
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

/// Up to `need` distinct words absent from `present`: Zipf draws (so new words are as
/// common as real new words are), then a scan of the vocabulary once draws keep hitting
/// words the text already has. Fewer only when the vocabulary has no more.
fn fresh_words(need: usize, present: &HashMap<u32, u32>, vocab: &Vocabulary, rng: &mut Pcg64) -> Vec<u32> {
    let len = vocab.len();
    let start = rng.random_range(0..len);
    let scan = (start..len).chain(0..start).map(|i| i as u32);
    let mut taken = HashSet::with_capacity(need);
    std::iter::repeat_with(|| vocab.sample(rng))
        .take(16 * need + 64)
        .chain(scan)
        .filter(|w| !present.contains_key(w) && taken.insert(*w))
        .take(need)
        .collect()
}

/// Applies one change of `kind` to about `share` of the words — x = max(1, round(share·n)),
/// clustered around one random position — so that it is exactly that kind (§1):
/// - add inserts x distinct words absent from the text (fewer if the vocabulary runs out);
/// - copy inserts a copy of x consecutive words of the text elsewhere;
/// - drop deletes x words that occur once (the ones nearest one another);
/// - shrink deletes x occurrences of repeated words, leaving one of each;
/// - replace overwrites x consecutive words with other words, chosen so that IED sees a
///   replace at each position;
/// - move moves x consecutive words past at least x others (if x > n/2, reverses them).
///
/// A kind that cannot apply (drop with no word occurring once, add with the vocabulary used
/// up, move of a text of < 2 words or of identical words) falls back to Replace; an empty text
/// can only gain words, so it gets an add. Returns the kind applied; the text never ends empty.
pub fn apply_change(
    kind: ChangeKind,
    words: &mut Vec<u32>,
    share: f64,
    vocabulary: &Vocabulary,
    rng: &mut Pcg64,
) -> ChangeKind {
    let n = words.len();
    if n == 0 {
        // Two fresh words exist in any vocabulary, so this always adds.
        add(words, 1, vocabulary, rng);
        return ChangeKind::Add;
    }
    let share = if share.is_nan() { 0.0 } else { share.clamp(0.0, 1.0) };
    let x = ((share * n as f64).round() as usize).clamp(1, n);
    let applied = match kind {
        ChangeKind::Add => add(words, x, vocabulary, rng),
        ChangeKind::Copy => copy(words, x, rng),
        ChangeKind::Drop => drop_single(words, x, rng),
        ChangeKind::Shrink => shrink(words, x, rng),
        ChangeKind::Replace => false,
        ChangeKind::Move => move_cluster(words, x, rng),
    };
    if applied {
        kind
    } else {
        replace(words, x, vocabulary, rng);
        ChangeKind::Replace
    }
}

fn add(words: &mut Vec<u32>, x: usize, vocabulary: &Vocabulary, rng: &mut Pcg64) -> bool {
    let fresh = fresh_words(x, &counts(words), vocabulary, rng);
    if fresh.is_empty() {
        return false;
    }
    let at = rng.random_range(0..=words.len());
    Edit::Insert { at, words: fresh }.apply(words);
    true
}

fn copy(words: &mut Vec<u32>, x: usize, rng: &mut Pcg64) -> bool {
    let n = words.len();
    let start = rng.random_range(0..=n - x);
    let passage = words[start..start + x].to_vec();
    let at = rng.random_range(0..=n);
    Edit::Insert { at, words: passage }.apply(words);
    true
}

fn drop_single(words: &mut Vec<u32>, x: usize, rng: &mut Pcg64) -> bool {
    let counts = counts(words);
    let once: Vec<usize> = (0..words.len()).filter(|&i| counts[&words[i]] == 1).collect();
    let x = x.min(once.len()).min(words.len() - 1);
    if x == 0 {
        return false;
    }
    let first = rng.random_range(0..=once.len() - x);
    Edit::Delete(once[first..first + x].to_vec()).apply(words);
    true
}

fn shrink(words: &mut Vec<u32>, x: usize, rng: &mut Pcg64) -> bool {
    let n = words.len();
    let mut counts = counts(words);
    let start = rng.random_range(0..n);
    let mut doomed = Vec::with_capacity(x);
    // Forward from `start`, then backward from it: the deletions stay in one region.
    for i in (start..n).chain((0..start).rev()) {
        if doomed.len() == x {
            break;
        }
        if let Some(count) = counts.get_mut(&words[i]).filter(|c| **c >= 2) {
            *count -= 1;
            doomed.push(i);
        }
    }
    let deleted = !doomed.is_empty();
    Edit::Delete(doomed).apply(words);
    deleted
}

/// Overwrites x consecutive words. IED (§3) calls a position a replace only if the old and
/// new words are alike: both occurring once (a drop plus an add at one position), or both
/// repeated elsewhere (a shrink plus a copy at one position). So an old word IED would count
/// as a shrink gets a word that occurs outside the run, the others get fresh words; neither
/// is a word of the run (that would be a move) nor one next to it (the LCS could shift).
fn replace(words: &mut Vec<u32>, x: usize, vocabulary: &Vocabulary, rng: &mut Pcg64) {
    let n = words.len();
    let start = rng.random_range(0..=n - x);
    let run = start..start + x;
    let counts = counts(words);
    let in_run: HashSet<u32> = words[run.clone()].iter().copied().collect();
    let neighbours = [start.checked_sub(1).map(|i| words[i]), words.get(run.end).copied()];
    // Outside words by occurrence, so common words are picked more often.
    let pool: Vec<u32> = (0..n)
        .filter(|i| !run.contains(i))
        .map(|i| words[i])
        .filter(|w| !in_run.contains(w) && !neighbours.contains(&Some(*w)))
        .collect();
    let outside: HashSet<u32> = (0..n).filter(|i| !run.contains(i)).map(|i| words[i]).collect();
    let mut fresh = fresh_words(x, &counts, vocabulary, rng).into_iter();
    let mut seen = HashSet::with_capacity(x);
    let replacements = words[run]
        .iter()
        .map(|&old| {
            // IED's shrink candidates: repeated, and not the first of a word only in the run.
            let repeated = !seen.insert(old) || outside.contains(&old);
            match (repeated && !pool.is_empty(), fresh.next()) {
                (true, _) => pool[rng.random_range(0..pool.len())],
                (false, Some(word)) => word,
                // The vocabulary is used up: any other word still makes a replace.
                (false, None) => old.wrapping_add(1) % vocabulary.len() as u32,
            }
        })
        .collect();
    Edit::Overwrite { start, words: replacements }.apply(words);
}

fn move_cluster(words: &mut Vec<u32>, x: usize, rng: &mut Pcg64) -> bool {
    let n = words.len();
    if n < 2 {
        return false;
    }
    let (x, original) = (x.min(n - 1), words.clone());
    // Repeated words can make a move a no-op (a a b → a a b); so a few tries.
    for _ in 0..8 {
        if 2 * x > n {
            // Too long to pass as many other words: reversed, all but one of its words move.
            let start = rng.random_range(0..=n - x);
            Edit::Reverse { start, len: x }.apply(words);
        } else {
            // Passing at least x other words makes exactly the cluster's words moves: the
            // LCS keeps the longer side. Positions count the n − x other words.
            let near = rng.random_range(0..=n - 2 * x);
            let far = rng.random_range(near + x..=n - x);
            let (from, to) = if rng.random::<bool>() { (near, far) } else { (far, near) };
            Edit::Move { from, len: x, to }.apply(words);
        }
        if *words != original {
            return true;
        }
        words.clone_from(&original);
    }
    false
}

/// Paragraph lengths of 40–80 words, fixed by the words so the same text renders the same.
fn paragraph_len(first_word: u32, paragraph: u64) -> usize {
    let mut z = (u64::from(first_word) << 32 ^ paragraph).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    40 + ((z ^ (z >> 31)) % 41) as usize
}

fn escape(text: &str) -> String {
    let text = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    text.replace('"', "&quot;").replace('\'', "&#39;")
}

/// An HTML page: the charset in a `<meta>` (within the first 1024 bytes, where browsers and
/// the diff stage look for it), the site's `feed` in a `<link rel="alternate">` where it
/// has one, the title, the words in `<p>` paragraphs, then a `<ul>` of
/// the links, each anchored by a vocabulary word fixed by its href.
///
/// # Panics
/// If a word index is outside the vocabulary.
pub fn render_html(
    title: &str,
    words: &[u32],
    vocabulary: &Vocabulary,
    links: &[String],
    charset: &str,
    feed: Option<&str>,
) -> String {
    let (charset, title) = (escape(charset), escape(title));
    let mut html = format!("<!DOCTYPE html>\n<html><head><meta charset=\"{charset}\">");
    if let Some(feed) = feed {
        html.push_str(&format!(
            "<link rel=\"alternate\" type=\"application/rss+xml\" href=\"{}\">",
            escape(feed)
        ));
    }
    // Writing to a String cannot fail.
    let _ = writeln!(html, "<title>{title}</title></head>\n<body>");
    let (mut rest, mut paragraph) = (words, 0);
    while let Some(&first) = rest.first() {
        let (this, next) = rest.split_at(paragraph_len(first, paragraph).min(rest.len()));
        let text: Vec<&str> = this.iter().map(|&w| vocabulary.word(w)).collect();
        let _ = writeln!(html, "<p>{}</p>", text.join(" "));
        (rest, paragraph) = (next, paragraph + 1);
    }
    if !links.is_empty() {
        html.push_str("<ul>\n");
        for link in links {
            // FNV-1a of the href: a stable anchor word per link.
            let hash = link
                .bytes()
                .fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
            let anchor = vocabulary.word((hash % vocabulary.len() as u64) as u32);
            let _ = writeln!(html, "<li><a href=\"{}\">{anchor}</a></li>", escape(link));
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</body></html>\n");
    html
}

/// The charsets pages are served in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    Utf8,
    EucKr,
}

impl Charset {
    /// The label for `<meta charset>` and `Content-Type`.
    pub fn name(self) -> &'static str {
        self.encoding().0
    }

    fn encoding(self) -> (&'static str, &'static Encoding) {
        match self {
            Self::Utf8 => ("utf-8", UTF_8),
            Self::EucKr => ("euc-kr", EUC_KR),
        }
    }
}

/// A page held a character its charset cannot encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeError {
    pub charset: Charset,
    /// The first such character.
    pub character: char,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cannot encode U+{:04X}", self.charset.name(), u32::from(self.character))
    }
}

impl std::error::Error for EncodeError {}

/// The page body in `charset` bytes. An error rather than encoding_rs's `&#…;` substitutes,
/// which would change the page's text in any context but HTML text.
pub fn encode(html: &str, charset: Charset) -> Result<Vec<u8>, EncodeError> {
    let encoding = charset.encoding().1;
    let (bytes, _, lossy) = encoding.encode(html);
    if !lossy {
        return Ok(bytes.into_owned());
    }
    let mut buffer = [0u8; 4];
    let character = html
        .chars()
        .find(|c| encoding.encode(c.encode_utf8(&mut buffer)).2)
        .unwrap_or(char::REPLACEMENT_CHARACTER);
    Err(EncodeError { charset, character })
}

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl_diff::degree::{ied, IedCosts};
    use recrawl_diff::text::{decode_body, visible_text, words as text_words, EncodingSource};
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

    fn text(language: Language, seed: u64) -> (Vocabulary, Vec<u32>) {
        let vocabulary = Vocabulary::new(language, 2000, seed);
        let words = initial_words(&vocabulary, 500, &mut Pcg64::seed_from_u64(seed));
        (vocabulary, words)
    }

    fn sorted(words: &[u32]) -> Vec<u32> {
        let mut words = words.to_vec();
        words.sort_unstable();
        words
    }

    #[test]
    fn a_seed_fixes_the_vocabulary_and_the_words() {
        for language in [Language::English, Language::Korean] {
            let (a, b, c) = (text(language, 1), text(language, 1), text(language, 2));
            assert_eq!((a.0.words.clone(), a.1.clone()), (b.0.words, b.1));
            assert_ne!(a.0.words, c.0.words);
            assert_ne!(a.1, initial_words(&a.0, 500, &mut Pcg64::seed_from_u64(2)));
            assert_eq!(HashSet::<&String>::from_iter(&a.0.words).len(), 2000, "distinct words");
        }
    }

    #[test]
    fn samples_follow_zipf() {
        let vocabulary = Vocabulary::new(Language::English, 1000, 7);
        let mut rng = Pcg64::seed_from_u64(7);
        let mut drawn = [0u32; 1000];
        for _ in 0..100_000 {
            drawn[vocabulary.sample(&mut rng) as usize] += 1;
        }
        let ratio = f64::from(drawn[0]) / f64::from(drawn[1]);
        assert!((1.7..=2.3).contains(&ratio), "{ratio}");
        assert!(drawn[0] > drawn[10] && drawn[10] > 0);
    }

    #[test]
    fn words_are_letters_and_korean_survives_strict_euc_kr() {
        assert_eq!(ks_x_1001_syllables().len(), 2350);
        let english = Vocabulary::new(Language::English, 3000, 3);
        assert!(english.words.iter().all(|w| (2..=10).contains(&w.len())));
        assert!(english.words.iter().all(|w| w.bytes().all(|b| b.is_ascii_lowercase())));
        let korean = Vocabulary::new(Language::Korean, 3000, 3);
        assert_eq!(korean.language(), Language::Korean);
        for word in &korean.words {
            assert!((1..=4).contains(&word.chars().count()));
            assert!(word.chars().all(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)), "{word}");
            let bytes = encode(word, Charset::EucKr).unwrap();
            assert!(bytes.iter().all(|&b| b >= 0xA1), "{word}: KS X 1001 only");
            let (back, malformed) = EUC_KR.decode_without_bom_handling(&bytes);
            assert!(!malformed && back == word.as_str());
        }
    }

    /// Checks that `new` differs from `old` exactly as `kind` says, `x` words changed.
    fn check_kind(kind: ChangeKind, old: &[u32], new: &[u32]) -> usize {
        let (before, after) = (counts(old), counts(new));
        let lost: Vec<u32> = old.iter().copied().filter(|w| !after.contains_key(w)).collect();
        match kind {
            ChangeKind::Add | ChangeKind::Copy => {
                let at = old.iter().zip(new).take_while(|(a, b)| a == b).count();
                let x = new.len() - old.len();
                assert!(x > 0 && new[..at] == old[..at] && new[at + x..] == old[at..], "one inserted run");
                let present = new[at..at + x].iter().map(|w| before.contains_key(w));
                assert!(present.clone().all(|p| p == (kind == ChangeKind::Copy)));
                if kind == ChangeKind::Add {
                    assert_eq!(HashSet::<&u32>::from_iter(&new[at..at + x]).len(), x, "distinct");
                }
                x
            }
            ChangeKind::Drop | ChangeKind::Shrink => {
                let mut removed = sorted(old);
                for w in new {
                    let i = removed.binary_search(w).expect("new words are old words");
                    removed.remove(i);
                }
                assert!(!removed.is_empty());
                if kind == ChangeKind::Drop {
                    assert_eq!(sorted(&lost), sorted(&removed), "removed words are gone");
                    assert!(removed.iter().all(|w| before[w] == 1));
                } else {
                    assert!(lost.is_empty(), "every old word still occurs");
                }
                removed.len()
            }
            ChangeKind::Replace => {
                assert_eq!(old.len(), new.len());
                let changed: Vec<usize> = (0..old.len()).filter(|&i| old[i] != new[i]).collect();
                assert!(!changed.is_empty() && changed[changed.len() - 1] - changed[0] + 1 == changed.len());
                changed.len()
            }
            ChangeKind::Move => {
                assert!(sorted(old) == sorted(new) && old != new, "same multiset, another order");
                0
            }
        }
    }

    fn hashes(words: &[u32], vocabulary: &Vocabulary) -> Vec<u64> {
        let state = BuildHasherDefault::<DefaultHasher>::default();
        words.iter().map(|&w| state.hash_one(vocabulary.word(w))).collect()
    }

    /// Every kind, changing 5 %, 25 % and 90 % of 500 words: the text changes as the kind says,
    /// and IED finds only that kind's operation, at about the reference degree.
    #[test]
    fn each_kind_changes_exactly_as_its_kind_and_ied_agrees() {
        for seed in 0..30 {
            let language = if seed % 2 == 0 { Language::English } else { Language::Korean };
            let (vocabulary, old) = text(language, seed);
            for (index, kind) in ChangeKind::ALL.into_iter().enumerate() {
                for share in [0.05, 0.25, 0.9] {
                    let (mut new, mut rng) = (old.clone(), Pcg64::seed_from_u64(seed + 100));
                    assert_eq!(apply_change(kind, &mut new, share, &vocabulary, &mut rng), kind);
                    // Not all 90 % of a page's words occur once (or repeat): fewer drop or shrink.
                    let (wanted, changed) = ((share * 500.0) as usize, check_kind(kind, &old, &new));
                    let x = if kind == ChangeKind::Move { wanted } else { changed };
                    assert!(x == wanted || share > 0.5, "{} {seed}: {x}", kind.name());
                    let ied =
                        ied(&hashes(&old, &vocabulary), &hashes(&new, &vocabulary), IedCosts::default());
                    let o = ied.ops;
                    let ops = [o.add, o.copy, o.drop, o.shrink, o.replace, o.moves];
                    let only = ops.iter().enumerate().all(|(i, &count)| (count > 0) == (i == index));
                    // A reversed long cluster keeps some order where words repeat.
                    let tolerance = if kind == ChangeKind::Move && share > 0.5 { 0.25 } else { 0.05 };
                    let reference = kind.reference(500, x, 0.75, 0.75);
                    assert!(
                        only && (ied.degree - reference).abs() < tolerance,
                        "{} seed {seed} share {share}: {} vs {reference}, {o:?}",
                        kind.name(),
                        ied.degree,
                    );
                }
            }
        }
    }

    #[test]
    fn kinds_that_cannot_apply_fall_back_and_never_empty_the_text() {
        let vocabulary = Vocabulary::new(Language::English, 50, 1);
        let mut rng = Pcg64::seed_from_u64(1);
        let mut apply = |kind, mut words: Vec<u32>, share| {
            let applied = apply_change(kind, &mut words, share, &vocabulary, &mut rng);
            (applied, words.len())
        };
        use ChangeKind::{Add, Drop, Move, Replace, Shrink};
        assert_eq!(apply(Drop, vec![3, 4, 3, 4], 0.5), (Replace, 4), "no word occurs once");
        for kind in [Drop, Shrink, Move] {
            assert_eq!(apply(kind, vec![5], 1.0), (Replace, 1));
        }
        assert_eq!(apply(Move, vec![7; 6], 0.5), (Replace, 6), "moving changes nothing");
        assert_eq!(apply(Add, (0..50).collect(), 0.1), (Replace, 50), "every word is used");
        assert_eq!(apply(Drop, Vec::new(), 0.5), (Add, 1));
        assert_eq!(apply(Drop, (0..10).collect(), 1.0), (Drop, 1), "one word is kept");
    }

    #[test]
    fn pages_render_and_round_trip_through_the_diff_stages_decoder() {
        let (vocabulary, words) = text(Language::Korean, 9);
        let links = vec!["http://a.example/?x=1&y=\"2\"".to_string(), "http://b.example/<p>".to_string()];
        let title = format!("{} & {}", vocabulary.word(1), vocabulary.word(2));
        let html = render_html(&title, &words, &vocabulary, &links, Charset::EucKr.name(), None);
        assert!(html.contains("<meta charset=\"euc-kr\">"));
        assert!(html.contains("href=\"http://a.example/?x=1&amp;y=&quot;2&quot;\""));
        assert!(html.contains("href=\"http://b.example/&lt;p&gt;\""));
        assert!(html.contains(&format!("<title>{}</title>", title.replace('&', "&amp;"))));
        let paragraphs = html.matches("<p>").count();
        assert!((500 / 80..=500 / 40 + 1).contains(&paragraphs), "{paragraphs}");

        let bytes = encode(&html, Charset::EucKr).unwrap();
        assert_eq!(EUC_KR.decode_without_bom_handling(&bytes).0, html);
        let decoded = decode_body(&bytes, None);
        assert_eq!((decoded.encoding, decoded.source), (EUC_KR, EncodingSource::Meta));
        let seen: Vec<String> = text_words(&visible_text(&decoded.text)).map(String::from).collect();
        let expected: Vec<&str> = words.iter().map(|&w| vocabulary.word(w)).collect();
        assert_eq!(seen[2..2 + expected.len()], expected[..], "the diff stage reads the words back");
        assert_eq!(seen.len(), 2 + expected.len() + links.len(), "title, words, one anchor per link");
    }

    #[test]
    fn unencodable_text_is_an_error() {
        assert_eq!(encode("a😀", Charset::Utf8).unwrap(), "a😀".as_bytes());
        let error = encode("가😀", Charset::EucKr).unwrap_err();
        assert_eq!(error, EncodeError { charset: Charset::EucKr, character: '😀' });
        assert!(error.to_string().contains("euc-kr"));
    }
}
