//! Change detection on one fetch result against the previous version of the page. Pure:
//! no Kafka, so the stage, benches and offline tools share it.

use recrawl_schemas::{ChangeDegrees, ChangeEvent, FetchOutcome, FetchResult};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_128;

/// What is kept of a page's latest download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageVersion {
    /// xxh3-128 of the raw body.
    pub content_hash: u128,
    pub size_bytes: u64,
    /// Period of the download.
    pub period: u64,
}

pub fn hash_hex(hash: u128) -> String {
    format!("{hash:032x}")
}

/// The change event for `result`, and the page version to keep afterwards.
pub fn compare(previous: Option<&PageVersion>, result: &FetchResult) -> (ChangeEvent, Option<PageVersion>) {
    let current = match result.outcome {
        FetchOutcome::Downloaded => Some(PageVersion {
            content_hash: xxh3_128(&result.body),
            size_bytes: result.size_bytes,
            period: result.period,
        }),
        // 304: a download whose content equals the previous one. Without a previous
        // version there is nothing it could equal; it stays a download that compares
        // with nothing.
        FetchOutcome::NotModified => previous.map(|p| PageVersion { period: result.period, ..p.clone() }),
        _ => None,
    };
    let downloaded = result.outcome.is_download();
    let compared = previous.zip(current.as_ref());
    let changed = compared.map(|(before, after)| before.content_hash != after.content_hash);
    let event = ChangeEvent {
        url: result.url.clone(),
        url_key: result.url_key.clone(),
        host: result.host.clone(),
        group: result.group.clone(),
        period: result.period,
        downloaded,
        outcome: result.outcome,
        http_status: result.http_status,
        latency_ms: result.latency_ms,
        size_bytes: current.as_ref().map_or(0, |c| c.size_bytes),
        size_delta: compared.map(|(before, after)| after.size_bytes as i64 - before.size_bytes as i64),
        first_download: downloaded && previous.is_none(),
        changed,
        content_hash: current.as_ref().map(|c| hash_hex(c.content_hash)),
        previous_content_hash: previous.map(|p| hash_hex(p.content_hash)),
        degrees: changed.map(|changed| ChangeDegrees {
            bw: if changed { 1.0 } else { 0.0 },
            cos: None,
            wd: None,
            ed: None,
            shingle: None,
            ied: None,
        }),
        fetched_at_ms: result.fetched_at_ms,
    };
    let kept = current.or_else(|| previous.cloned());
    (event, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(period: u64, outcome: FetchOutcome, body: &[u8]) -> FetchResult {
        FetchResult {
            url: "http://h/a".into(),
            url_key: recrawl_schemas::url_key("http://h/a"),
            host: "h".into(),
            group: "h".into(),
            period,
            outcome,
            http_status: Some(200),
            latency_ms: 1.0,
            size_bytes: body.len() as u64,
            body: body.to_vec(),
            content_type: None,
            etag: None,
            last_modified: None,
            final_url: None,
            error: None,
            fetched_at_ms: 0,
        }
    }

    #[test]
    fn first_download_compares_with_nothing() {
        let (event, kept) = compare(None, &result(1, FetchOutcome::Downloaded, b"hello"));
        assert!(event.downloaded && event.first_download);
        assert_eq!(event.changed, None);
        assert_eq!(event.degrees, None);
        assert_eq!(event.content_hash, Some(hash_hex(xxh3_128(b"hello"))));
        assert_eq!(kept.unwrap().size_bytes, 5);
    }

    #[test]
    fn detects_change_and_sameness_by_hash() {
        let (_, v1) = compare(None, &result(1, FetchOutcome::Downloaded, b"hello"));
        let (same, v2) = compare(v1.as_ref(), &result(2, FetchOutcome::Downloaded, b"hello"));
        assert_eq!(same.changed, Some(false));
        assert_eq!(same.degrees.as_ref().map(|d| d.bw), Some(0.0));
        let (changed, _) = compare(v2.as_ref(), &result(3, FetchOutcome::Downloaded, b"hello world"));
        assert_eq!(changed.changed, Some(true));
        assert_eq!(changed.size_delta, Some(6));
        assert_eq!(changed.degrees.map(|d| d.bw), Some(1.0));
        assert_eq!(changed.previous_content_hash, Some(hash_hex(xxh3_128(b"hello"))));
    }

    #[test]
    fn failures_keep_the_previous_version_and_304_equals_it() {
        let (_, v1) = compare(None, &result(1, FetchOutcome::Downloaded, b"hello"));
        let (failed, kept) = compare(v1.as_ref(), &result(2, FetchOutcome::HttpError, b""));
        assert!(!failed.downloaded);
        assert_eq!((failed.changed, failed.content_hash.as_deref()), (None, None));
        assert_eq!(kept, v1);
        let (not_modified, kept) = compare(kept.as_ref(), &result(3, FetchOutcome::NotModified, b""));
        assert!(not_modified.downloaded);
        assert_eq!(not_modified.changed, Some(false));
        assert_eq!(not_modified.size_bytes, 5);
        assert_eq!(kept.map(|k| k.period), Some(3));
    }
}
