//! One fetch result against the previous version of its page: the change event and the
//! version to keep. Pure: no Kafka, so the stage, the offline commands and the benches
//! share it.

use recrawl_schemas::{ChangeDegrees, ChangeEvent, FetchOutcome, FetchResult, PageRef, UtcTime};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use xxhash_rust::xxh3::xxh3_128;

use crate::degree::{
    cosine_distance, edit_distance, ied_from_lcs, shingle_distance, shingles, term_counts, word_distance,
    DocumentFrequencies, IedCosts,
};
use crate::lcs::lcs;
use crate::text::{page_words, CaseFold};

/// A page's word hashes, stored as little-endian bytes: a compact changelog record
/// (varint-encoding random 64-bit hashes would cost 9 bytes each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WordHashes(pub Vec<u64>);

impl Serialize for WordHashes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|w| w.to_le_bytes()).collect();
        serializer.serialize_bytes(&bytes)
    }
}

impl<'de> Deserialize<'de> for WordHashes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = serde_bytes::ByteBuf::deserialize(deserializer)?;
        if bytes.len() % 8 != 0 {
            return Err(serde::de::Error::invalid_length(bytes.len(), &"a multiple of 8 bytes"));
        }
        Ok(Self(
            bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
        ))
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
    /// The first `max_words` of them, hashed.
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
    /// Words of a version kept and compared; bounds the state and the work per page.
    pub max_words: usize,
}

impl Default for DiffSettings {
    /// The paper's experiments: all metrics, 10-SH, s = t = 0.75.
    fn default() -> Self {
        Self {
            baselines: Baselines::ALL,
            shingle_k: 10,
            costs: IedCosts::default(),
            case_fold: CaseFold::None,
            max_words: 100_000,
        }
    }
}

/// Compares downloads with the versions before them, keeping the document frequencies
/// COS needs over the versions this instance holds.
#[derive(Debug, Default)]
pub struct Differ {
    settings: DiffSettings,
    corpus: DocumentFrequencies,
}

impl Differ {
    pub fn new(settings: DiffSettings) -> Self {
        Self { settings, corpus: DocumentFrequencies::default() }
    }

    pub fn settings(&self) -> &DiffSettings {
        &self.settings
    }

    pub fn corpus(&self) -> &DocumentFrequencies {
        &self.corpus
    }

    /// Counts a held version in COS's document frequencies (after a restore).
    pub fn hold(&mut self, version: &PageVersion) {
        if self.settings.baselines.cos {
            self.corpus.add(&term_counts(&version.words.0));
        }
    }

    /// Stops counting a version (replaced, or its partition revoked).
    pub fn release(&mut self, version: &PageVersion) {
        if self.settings.baselines.cos {
            self.corpus.remove(&term_counts(&version.words.0));
        }
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

    /// The version a download yields.
    pub fn version_of(&self, result: &FetchResult) -> (PageVersion, &'static str) {
        let text = page_words(&result.body, result.content_type.as_deref(), self.settings.case_fold);
        let word_count = text.words.len() as u64;
        let mut words = text.words;
        words.truncate(self.settings.max_words);
        // The version is kept in memory until the page's next download: without this it
        // would hold the whole page's allocation (45 MB for 8 MiB of one-letter words).
        words.shrink_to_fit();
        let version = PageVersion {
            content_hash: xxh3_128(&result.body),
            text_hash: text.text_hash,
            size_bytes: result.size_bytes,
            period: result.period,
            word_count,
            words: WordHashes(words),
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
                let (version, encoding) = self.version_of(result);
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
            let truncated = before.word_count > before.words.0.len() as u64
                || after.word_count > after.words.0.len() as u64;
            if before.text_hash == after.text_hash {
                self.unchanged_text(bytes_changed, truncated)
            } else {
                self.degrees(&before.words.0, &after.words.0, bytes_changed, truncated)
            }
        });
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
        assert_eq!(kept.map(|k| k.words.0.len()), Some(2));
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

    #[test]
    fn a_kept_version_holds_no_more_than_its_words() {
        let differ = Differ::new(DiffSettings { max_words: 3, ..DiffSettings::default() });
        let (version, _) = differ.version_of(&result(1, FetchOutcome::Downloaded, &"a ".repeat(100_000)));
        assert_eq!(version.word_count, 100_000);
        assert_eq!((version.words.0.len(), version.words.0.capacity()), (3, 3));
    }
}
