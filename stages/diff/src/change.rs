//! One fetch result against the previous version of its page: the change event and the
//! version to keep. Pure: no Kafka, so the stage, the offline commands and the benches
//! share it.

use recrawl_schemas::{ChangeDegrees, ChangeEvent, FetchOutcome, FetchResult, PageRef, UtcTime};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use xxhash_rust::xxh3::xxh3_128;

use crate::degree::{
    cosine_distance, edit_distance, ied_from_lcs, shingle_distance, shingles, term_counts, word_distance,
    DocumentFrequencies, IedCosts, DEFAULT_SKETCH_BYTES,
};
use crate::lcs::lcs;
use crate::sample::{at_level, keeps, level_for, sample, NOTHING_KEPT};
use crate::text::{page_words, CaseFold};

/// The words kept of a version: their hashes in page order, all of them (level 0) or the
/// sample at `level` ([`crate::sample`]). Stored as the hashes' little-endian bytes
/// (varint-encoding random 64-bit hashes would cost 9 bytes each), then the level as one
/// byte when it is not 0: a record of a whole page reads as it always did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WordHashes {
    pub hashes: Vec<u64>,
    pub level: u8,
}

impl WordHashes {
    /// Every word of a page.
    pub fn whole(hashes: Vec<u64>) -> Self {
        Self { hashes, level: 0 }
    }

    /// Bytes they hold.
    pub fn bytes(&self) -> u64 {
        (self.hashes.len() as u64).saturating_mul(8)
    }
}

impl Serialize for WordHashes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut bytes: Vec<u8> = self.hashes.iter().flat_map(|w| w.to_le_bytes()).collect();
        if self.level != 0 {
            bytes.push(self.level);
        }
        serializer.serialize_bytes(&bytes)
    }
}

impl<'de> Deserialize<'de> for WordHashes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut bytes = serde_bytes::ByteBuf::deserialize(deserializer)?.into_vec();
        let level = match bytes.len() % 8 {
            0 => 0,
            1 => match bytes.pop() {
                Some(level) if level != 0 => level,
                _ => return Err(serde::de::Error::custom("a sample level of 0 is written as none")),
            },
            _ => return Err(serde::de::Error::invalid_length(bytes.len(), &"8 bytes a word, and a level")),
        };
        let hashes =
            bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
        Ok(Self { hashes, level })
    }
}

/// What is kept of a page's latest download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageVersion {
    /// xxh3-128 of the raw body.
    pub content_hash: u128,
    /// xxh3-64 of the visible text, whitespace normalised.
    pub text_hash: u64,
    pub size_bytes: u64,
    /// Period of the download.
    pub period: u64,
    /// Words in the visible text.
    pub word_count: u64,
    /// The first `max_words` of them, hashed, sampled to at most `max_kept_words`.
    pub words: WordHashes,
}

/// The word-based baselines a diff instance computes; IED and BW always run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Baselines {
    pub cos: bool,
    pub wd: bool,
    pub ed: bool,
    pub sh: bool,
}

impl Baselines {
    pub const ALL: Self = Self { cos: true, wd: true, ed: true, sh: true };
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffSettings {
    pub baselines: Baselines,
    /// k of k-SH.
    pub shingle_k: u32,
    pub costs: IedCosts,
    pub case_fold: CaseFold,
    /// Words of a version read and compared; bounds the work per page.
    pub max_words: usize,
    /// Words of a version kept: more are sampled down to these ([`crate::sample`]).
    pub max_kept_words: usize,
    /// Bytes of words kept over every version an instance holds; a version that would
    /// pass it keeps fewer words, or none.
    pub max_kept_bytes: u64,
    /// Bytes of COS's document frequencies.
    pub cos_sketch_bytes: usize,
}

/// Words kept of a page by default: 7,000 hashes (56,000 bytes) keep a page's state, its
/// longest URL (8 KiB) included, within 64 KiB.
pub const DEFAULT_MAX_KEPT_WORDS: usize = 7_000;

/// Bytes of words kept by an instance by default (`--max-kept-bytes`).
pub const DEFAULT_MAX_KEPT_BYTES: u64 = 512 << 20;

impl Default for DiffSettings {
    /// The paper's experiments: all metrics, 10-SH, s = t = 0.75.
    fn default() -> Self {
        Self {
            baselines: Baselines::ALL,
            shingle_k: 10,
            costs: IedCosts::default(),
            case_fold: CaseFold::None,
            max_words: 100_000,
            max_kept_words: DEFAULT_MAX_KEPT_WORDS,
            max_kept_bytes: DEFAULT_MAX_KEPT_BYTES,
            cos_sketch_bytes: DEFAULT_SKETCH_BYTES,
        }
    }
}

/// Compares downloads with the versions before them, keeping the document frequencies
/// COS needs over the versions this instance holds.
#[derive(Debug, Default)]
pub struct Differ {
    settings: DiffSettings,
    corpus: DocumentFrequencies,
    /// Bytes of words the versions held keep.
    kept_bytes: u64,
}

impl Differ {
    pub fn new(settings: DiffSettings) -> Self {
        let corpus = DocumentFrequencies::with_bytes(settings.cos_sketch_bytes);
        Self { settings, corpus, kept_bytes: 0 }
    }

    /// Bytes of words the versions held keep (at most `max_kept_bytes`, unless a restore
    /// brought more than a lowered budget).
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes
    }

    /// Words a new version may keep: the page's cap, or what the instance's budget has
    /// left once `replaced` (the version it takes the place of) is let go.
    pub fn room_words(&self, replaced: Option<&PageVersion>) -> usize {
        let freed = replaced.map_or(0, |version| version.words.bytes());
        let held = self.kept_bytes.saturating_sub(freed);
        let left = self.settings.max_kept_bytes.saturating_sub(held) / 8;
        usize::try_from(left).unwrap_or(usize::MAX).min(self.settings.max_kept_words)
    }

    pub fn settings(&self) -> &DiffSettings {
        &self.settings
    }

    pub fn corpus(&self) -> &DocumentFrequencies {
        &self.corpus
    }

    /// Counts a held version in the kept bytes and COS's document frequencies (also
    /// after a restore).
    pub fn hold(&mut self, version: &PageVersion) {
        self.kept_bytes = self.kept_bytes.saturating_add(version.words.bytes());
        if self.settings.baselines.cos {
            self.corpus.add(&term_counts(&version.words.hashes));
        }
    }

    /// Stops counting a version (replaced, or its partition revoked).
    pub fn release(&mut self, version: &PageVersion) {
        self.kept_bytes = self.kept_bytes.saturating_sub(version.words.bytes());
        if self.settings.baselines.cos {
            self.corpus.remove(&term_counts(&version.words.hashes));
        }
    }

    /// Brings a version kept under larger caps (restored from an earlier build, or one
    /// with other flags) within `room` words, sampling it further.
    pub fn fit(version: &mut PageVersion, room: usize) {
        let words = &mut version.words;
        if words.level == NOTHING_KEPT || words.hashes.len() <= room {
            return;
        }
        let level = if room == 0 { NOTHING_KEPT } else { level_for(&words.hashes, room).max(words.level) };
        words.hashes.retain(|&word| keeps(word, level));
        words.hashes.shrink_to_fit();
        words.level = level;
    }

    /// The degrees between two versions' kept words, compared at the coarser of their
    /// samples; `None` when nothing kept can tell (a version kept no words).
    fn sampled_degrees(
        &self,
        before: &PageVersion,
        after: &PageVersion,
        bytes_changed: bool,
        truncated: bool,
    ) -> Option<ChangeDegrees> {
        let level = before.words.level.max(after.words.level);
        if level == NOTHING_KEPT {
            return None;
        }
        let old = at_level(&before.words.hashes, before.words.level, level);
        let new = at_level(&after.words.hashes, after.words.level, level);
        if old.is_empty() && new.is_empty() && (before.word_count > 0 || after.word_count > 0) {
            return None;
        }
        Some(self.degrees(&old, &new, bytes_changed, truncated))
    }

    /// Every degree between two word sequences; `bytes_changed` decides BW.
    pub fn degrees(&self, old: &[u64], new: &[u64], bytes_changed: bool, truncated: bool) -> ChangeDegrees {
        let settings = &self.settings;
        let baselines = settings.baselines;
        let pairs = lcs(old, new);
        let ied = ied_from_lcs(old, new, &pairs, settings.costs);
        let counts = (baselines.cos || baselines.wd).then(|| (term_counts(old), term_counts(new)));
        let k = settings.shingle_k as usize;
        ChangeDegrees {
            bw: if bytes_changed { 1.0 } else { 0.0 },
            cos: counts
                .as_ref()
                .filter(|_| baselines.cos)
                .map(|(a, b)| cosine_distance(a, b, Some(&self.corpus))),
            wd: counts.as_ref().filter(|_| baselines.wd).map(|(a, b)| word_distance(a, b)),
            ed: baselines.ed.then(|| edit_distance(old.len(), new.len(), pairs.len())),
            sh: baselines.sh.then(|| shingle_distance(&shingles(old, k), &shingles(new, k))),
            sh_k: baselines.sh.then_some(settings.shingle_k),
            ied: ied.degree,
            ied_cost: ied.cost,
            ied_ops: ied.ops,
            ied_s: settings.costs.s,
            ied_t: settings.costs.t,
            truncated,
        }
    }

    /// Degrees of two versions whose visible text is identical: no work.
    fn unchanged_text(&self, bytes_changed: bool, truncated: bool) -> ChangeDegrees {
        let baselines = self.settings.baselines;
        let zero = |on: bool| on.then_some(0.0);
        ChangeDegrees {
            bw: if bytes_changed { 1.0 } else { 0.0 },
            cos: zero(baselines.cos),
            wd: zero(baselines.wd),
            ed: zero(baselines.ed),
            sh: zero(baselines.sh),
            sh_k: baselines.sh.then_some(self.settings.shingle_k),
            ied: 0.0,
            ied_cost: 0.0,
            ied_ops: Default::default(),
            ied_s: self.settings.costs.s,
            ied_t: self.settings.costs.t,
            truncated,
        }
    }

    /// The version a download yields, keeping at most the page's cap of words.
    pub fn version_of(&self, result: &FetchResult) -> (PageVersion, &'static str) {
        self.version_within(result, self.settings.max_kept_words)
    }

    /// The version a download yields, keeping at most `room` words.
    pub fn version_within(&self, result: &FetchResult, room: usize) -> (PageVersion, &'static str) {
        let text = page_words(&result.body, result.content_type.as_deref(), self.settings.case_fold);
        let word_count = text.words.len() as u64;
        let mut words = text.words;
        words.truncate(self.settings.max_words);
        let (level, words) =
            if room == 0 && !words.is_empty() { (NOTHING_KEPT, Vec::new()) } else { sample(words, room) };
        let version = PageVersion {
            content_hash: xxh3_128(&result.body),
            text_hash: text.text_hash,
            size_bytes: result.size_bytes,
            period: result.period,
            word_count,
            words: WordHashes { hashes: words, level },
        };
        (version, text.encoding)
    }

    /// The change event for `result`; `kept` becomes the version to keep afterwards.
    ///
    /// `kept` is the latest download. A result of an earlier period than it (a late one:
    /// fetch requeued its pick behind a later pick of the URL) has no previous download
    /// at hand, so it compares with nothing, and it does not replace the later version.
    pub fn apply(&mut self, kept: &mut Option<PageVersion>, result: &FetchResult) -> ChangeEvent {
        let previous = kept.as_ref().filter(|version| version.period < result.period);
        let newest = previous.is_some() || kept.is_none();
        let (current, encoding) = match result.outcome {
            FetchOutcome::Downloaded => {
                let room = self.room_words(kept.as_ref().filter(|_| newest));
                let (version, encoding) = self.version_within(result, room);
                (Some(version), Some(encoding.to_owned()))
            }
            // 304: a download whose content equals the previous one. Without a previous
            // version there is nothing it could equal; it stays a download that compares
            // with nothing.
            FetchOutcome::NotModified => {
                (previous.map(|p| PageVersion { period: result.period, ..p.clone() }), None)
            }
            _ => (None, None),
        };
        let downloaded = result.outcome.is_download();
        let compared = previous.zip(current.as_ref());
        let changed = compared.map(|(before, after)| before.content_hash != after.content_hash);
        let text_changed = compared.map(|(before, after)| before.text_hash != after.text_hash);
        let degrees = compared.map(|(before, after)| {
            let bytes_changed = before.content_hash != after.content_hash;
            let truncated = before.word_count > before.words.hashes.len() as u64
                || after.word_count > after.words.hashes.len() as u64;
            if before.text_hash == after.text_hash {
                Some(self.unchanged_text(bytes_changed, truncated))
            } else {
                self.sampled_degrees(before, after, bytes_changed, truncated)
            }
        });
        let degrees = degrees.flatten();
        let event = ChangeEvent {
            page: PageRef::new(&result.url, &result.host),
            period: result.period,
            downloaded,
            outcome: result.outcome,
            http_status: result.http_status,
            latency_ms: result.latency_ms,
            size_bytes: current.as_ref().map_or(0, |c| c.size_bytes),
            previous_size_bytes: previous.map(|p| p.size_bytes),
            size_change_bytes: compared
                .map(|(before, after)| (after.size_bytes as i64).saturating_sub(before.size_bytes as i64)),
            first_seen: downloaded && kept.is_none(),
            changed,
            text_changed,
            content_hash: current.as_ref().map(|c| hash_hex(c.content_hash)),
            previous_content_hash: previous.map(|p| hash_hex(p.content_hash)),
            text_hash: current.as_ref().map(|c| format!("{:016x}", c.text_hash)),
            encoding,
            words: current.as_ref().map(|c| c.word_count),
            previous_words: previous.map(|p| p.word_count),
            degrees,
            fetched_at: UtcTime::from_ms(result.fetched_at_ms),
            fetched_at_ms: result.fetched_at_ms,
            crawl_delay_ms: result.crawl_delay_ms,
            etag: result.etag.clone(),
            last_modified: result.last_modified.clone(),
        };
        if let Some(current) = current.filter(|_| newest) {
            if result.outcome == FetchOutcome::Downloaded {
                if let Some(previous) = kept.as_ref() {
                    self.release(previous);
                }
                self.hold(&current);
            }
            *kept = Some(current);
        }
        event
    }
}

pub fn hash_hex(hash: u128) -> String {
    format!("{hash:032x}")
}

/// Reads one metric's degree (null when the metric was off).
pub type MetricReader = fn(&ChangeDegrees) -> Option<f64>;

/// The metrics compared, in report order, with how to read each from the degrees.
pub const METRICS: [(&str, MetricReader); 6] = [
    ("bw", |d| Some(d.bw)),
    ("cos", |d| d.cos),
    ("wd", |d| d.wd),
    ("ed", |d| d.ed),
    ("sh", |d| d.sh),
    ("ied", |d| Some(d.ied)),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn result(period: u64, outcome: FetchOutcome, body: &str) -> FetchResult {
        FetchResult { outcome, ..FetchResult::html_page("http://h/a", "h", period, body) }
    }

    #[test]
    fn the_first_download_is_first_seen_without_degrees() {
        let mut differ = Differ::default();
        let mut kept = None;
        let event = differ.apply(&mut kept, &result(1, FetchOutcome::Downloaded, "<p>hello world</p>"));
        assert!(event.downloaded && event.first_seen);
        assert_eq!((event.changed, event.text_changed, event.degrees), (None, None, None));
        assert_eq!((event.words, event.encoding.as_deref()), (Some(2), Some("UTF-8")));
        assert_eq!(kept.map(|k| k.words.hashes.len()), Some(2));
        assert_eq!(differ.corpus().documents(), 1);
    }

    #[test]
    fn markup_edits_change_bytes_but_not_text() {
        let mut differ = Differ::default();
        let mut kept = None;
        differ.apply(&mut kept, &result(1, FetchOutcome::Downloaded, "<p>hello world</p>"));
        let event = differ
            .apply(&mut kept, &result(2, FetchOutcome::Downloaded, "<p class=x>hello <b>world</b></p>"));
        assert_eq!((event.changed, event.text_changed), (Some(true), Some(false)));
        let degrees = event.degrees.expect("compared");
        assert_eq!((degrees.bw, degrees.ied, degrees.wd), (1.0, 0.0, Some(0.0)));
        assert_eq!(differ.corpus().documents(), 1, "the new version replaced the old one");
    }

    #[test]
    fn a_text_change_is_measured_by_every_metric() {
        let mut differ = Differ::default();
        let mut kept = None;
        differ.apply(&mut kept, &result(1, FetchOutcome::Downloaded, "<p>a b c d e f g h</p>"));
        let event = differ.apply(&mut kept, &result(2, FetchOutcome::Downloaded, "<p>a b c x e f g h</p>"));
        assert_eq!(event.size_change_bytes, Some(0));
        let degrees = event.degrees.expect("compared");
        assert_eq!(degrees.ied_ops.replace, 1);
        assert!((degrees.ied - 1.0 / 8.0).abs() < 1e-12);
        for metric in [degrees.cos, degrees.wd, degrees.ed, degrees.sh] {
            assert!(metric.is_some_and(|d| d > 0.0 && d <= 1.0), "{degrees:?}");
        }
    }

    #[test]
    fn failures_and_other_types_keep_the_previous_version_and_304_equals_it() {
        let mut differ = Differ::default();
        let mut kept = None;
        differ.apply(&mut kept, &result(1, FetchOutcome::Downloaded, "hello"));
        let before = kept.clone();
        let failed = differ.apply(&mut kept, &result(2, FetchOutcome::HttpStatus, ""));
        assert!(!failed.downloaded);
        assert_eq!((failed.changed, failed.content_hash.as_deref(), failed.words), (None, None, None));
        assert_eq!(kept, before);
        let other_type = differ.apply(&mut kept, &result(2, FetchOutcome::UnsupportedType, ""));
        assert!(other_type.downloaded, "the server delivered it");
        assert_eq!((other_type.changed, other_type.content_hash.as_deref()), (None, None));
        assert_eq!(kept, before);
        let not_modified = differ.apply(&mut kept, &result(3, FetchOutcome::NotModified, ""));
        assert!(not_modified.downloaded && !not_modified.first_seen);
        assert_eq!((not_modified.changed, not_modified.text_changed), (Some(false), Some(false)));
        assert_eq!(not_modified.degrees.map(|d| d.ied), Some(0.0));
        assert_eq!((not_modified.size_bytes, not_modified.words), (5, Some(1)));
        assert_eq!(kept.map(|k| k.period), Some(3));
    }

    #[test]
    fn a_late_result_compares_with_nothing_and_keeps_the_later_version() {
        let mut differ = Differ::default();
        let mut kept = None;
        differ.apply(&mut kept, &result(5, FetchOutcome::Downloaded, "five"));
        let later = kept.clone();
        let deferred = differ.apply(&mut kept, &result(3, FetchOutcome::Deferred, ""));
        assert_eq!((deferred.period, deferred.downloaded, deferred.previous_size_bytes), (3, false, None));
        let late = differ.apply(&mut kept, &result(4, FetchOutcome::Downloaded, "four"));
        assert!(late.downloaded && !late.first_seen, "a later download is kept");
        assert_eq!((late.changed, late.degrees, late.previous_content_hash), (None, None, None));
        assert!(late.content_hash.is_some());
        let late_304 = differ.apply(&mut kept, &result(4, FetchOutcome::NotModified, ""));
        assert_eq!((late_304.changed, late_304.previous_words), (None, None));
        assert_eq!(kept, later);
        assert_eq!(differ.corpus().documents(), 1, "the late body is not held");
        // Before any download, a late one is the first seen, and the one kept.
        let mut none = None;
        differ.apply(&mut none, &result(9, FetchOutcome::Timeout, ""));
        let first = differ.apply(&mut none, &result(8, FetchOutcome::Downloaded, "eight"));
        assert!(first.first_seen);
        assert_eq!(none.map(|v| v.period), Some(8));
    }

    #[test]
    fn switched_off_baselines_are_null_and_long_pages_are_truncated() {
        let settings = DiffSettings {
            baselines: Baselines { cos: false, wd: true, ed: false, sh: false },
            max_words: 3,
            ..DiffSettings::default()
        };
        let mut differ = Differ::new(settings);
        let mut kept = None;
        differ.apply(&mut kept, &result(1, FetchOutcome::Downloaded, "one two three four"));
        let event = differ.apply(&mut kept, &result(2, FetchOutcome::Downloaded, "one two six four five"));
        assert_eq!(event.words, Some(5));
        let degrees = event.degrees.expect("compared");
        assert_eq!((degrees.cos, degrees.ed, degrees.sh, degrees.sh_k), (None, None, None, None));
        assert!(degrees.truncated);
        assert_eq!(degrees.ied_ops.replace, 1, "only the first three words are compared");
        assert_eq!(differ.corpus().documents(), 0, "COS off: no corpus kept");
    }

    /// A page of `words` distinct random words, the `changed` first ones replaced.
    fn random_page(period: u64, words: usize, changed: usize) -> FetchResult {
        let text: Vec<String> = (0..words)
            .map(|i| {
                if i < changed {
                    format!("new{i}x")
                } else {
                    format!("w{:x}", crate::degree::mix(i as u64))
                }
            })
            .collect();
        FetchResult {
            content_type: Some("text/plain".into()),
            ..result(period, FetchOutcome::Downloaded, &text.join(" "))
        }
    }

    #[test]
    fn a_page_of_100000_random_words_keeps_its_sample_within_64_kib() {
        let mut differ = Differ::default();
        let mut kept = None;
        differ.apply(&mut kept, &random_page(1, 100_000, 0));
        let version = kept.clone().expect("kept");
        assert_eq!(version.word_count, 100_000);
        assert!(version.words.hashes.len() <= DEFAULT_MAX_KEPT_WORDS && version.words.level > 0);
        assert_eq!(version.words.hashes.capacity(), version.words.hashes.len());
        assert_eq!(differ.kept_bytes(), version.words.bytes());
        let state = crate::DiffState { last_period: 1, version: Some(version), applied_before: Some(0) };
        let record = recrawl_schemas::encode(&state).expect("encode");
        assert!(record.len() + recrawl_schemas::bounds::MAX_URL_BYTES < 64 << 10, "{} bytes", record.len());
        assert_eq!(recrawl_schemas::decode::<crate::DiffState>(&record).expect("decode"), state);
        // A tenth of the words replaced: the samples measure about a tenth.
        let event = differ.apply(&mut kept, &random_page(2, 100_000, 10_000));
        let degrees = event.degrees.expect("compared");
        assert!(degrees.truncated);
        assert!((degrees.ied - 0.1).abs() < 0.02, "{degrees:?}");
        assert!(degrees.wd.is_some_and(|wd| (wd - 0.1).abs() < 0.02), "{degrees:?}");
        assert_eq!(differ.corpus().documents(), 1);
    }

    #[test]
    fn past_the_instance_budget_versions_keep_fewer_words_then_none_but_still_compare() {
        let budget = 8 * 150;
        let settings =
            DiffSettings { max_kept_words: 100, max_kept_bytes: budget, ..DiffSettings::default() };
        let mut differ = Differ::new(settings);
        let mut pages = vec![None; 100];
        for page in &mut pages {
            differ.apply(page, &random_page(1, 1000, 0));
            assert!(differ.kept_bytes() <= budget);
        }
        let levels: Vec<u8> = pages.iter().flatten().map(|v| v.words.level).collect();
        assert!(levels[0] > 0 && levels.is_sorted(), "each page samples more coarsely: {levels:?}");
        let spent = levels.iter().position(|&level| level == NOTHING_KEPT).expect("the budget is spent");
        assert!(levels[spent..].iter().all(|&level| level == NOTHING_KEPT));
        // Past it a page is still compared: whether it changed, but no degrees.
        let event = differ.apply(&mut pages[spent], &random_page(2, 1000, 5));
        assert_eq!((event.changed, event.text_changed, event.degrees), (Some(true), Some(true), None));
        // A page replaced frees its words for its own next version.
        let event = differ.apply(&mut pages[0], &random_page(2, 1000, 100));
        assert!(event.degrees.is_some_and(|d| d.ied > 0.0));
        assert!(pages[0].as_ref().is_some_and(|v| !v.words.hashes.is_empty()));
        assert!(differ.kept_bytes() <= budget);
    }

    #[test]
    fn a_restored_version_is_fitted_within_the_room_it_gets() {
        let mut version = Differ::new(DiffSettings { max_kept_words: usize::MAX, ..DiffSettings::default() })
            .version_of(&random_page(1, 20_000, 0))
            .0;
        assert_eq!((version.words.hashes.len(), version.words.level), (20_000, 0));
        Differ::fit(&mut version, 5_000);
        assert!(version.words.hashes.len() <= 5_000 && version.words.level >= 2);
        let level = version.words.level;
        Differ::fit(&mut version, 5_000);
        assert_eq!(version.words.level, level, "already within: unchanged");
        Differ::fit(&mut version, 0);
        assert_eq!((version.words.hashes.len(), version.words.level), (0, NOTHING_KEPT));
    }

    #[test]
    fn a_kept_version_holds_no_more_than_its_words() {
        let differ = Differ::new(DiffSettings { max_words: 3, ..DiffSettings::default() });
        let (version, _) = differ.version_of(&result(1, FetchOutcome::Downloaded, &"a ".repeat(100_000)));
        assert_eq!(version.word_count, 100_000);
        assert_eq!((version.words.hashes.len(), version.words.hashes.capacity()), (3, 3));
    }
}
