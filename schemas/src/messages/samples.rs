//! Fixed sample values: the golden fixtures and the envelope tests use them.

use super::*;
use crate::frequency::FrequencyGroup;
use crate::time::UtcTime;

pub fn page_pick() -> PagePick {
    PagePick {
        url: "http://example.com/a.html".into(),
        url_key: crate::url_key("http://example.com/a.html"),
        host: "example.com".into(),
        group: "example.com".into(),
        period: 42,
        reason: PickReason::Refresh,
        depth: 3,
        score: 12.5,
        etag: Some("\"v1\"".into()),
        last_modified: Some("Wed, 21 Oct 2026 07:28:00 GMT".into()),
        deadline_ms: Some(1_780_000_060_000),
    }
}

pub fn fetch_result() -> FetchResult {
    FetchResult {
        url: "http://example.com/a.html".into(),
        url_key: crate::url_key("http://example.com/a.html"),
        host: "example.com".into(),
        group: "example.com".into(),
        period: 42,
        outcome: FetchOutcome::Downloaded,
        http_status: Some(200),
        latency_ms: 12.25,
        size_bytes: 11,
        body: b"<p>hello</p>"[..11].to_vec(),
        content_type: Some("text/html".into()),
        etag: Some("\"v1\"".into()),
        last_modified: None,
        final_url: None,
        error: None,
        fetched_at_ms: 1_780_000_000_000,
        depth: 3,
        crawl_delay_ms: Some(2_000),
        redirects: vec!["http://example.com/a.html?moved=1".into()],
        retry_after_ms: None,
        exchange: None,
    }
}

/// [`fetch_result`] as the fetcher writes it since schema 2: with its exchange.
pub fn fetch_result_with_exchange() -> FetchResult {
    let header = |name: &str, value: &[u8]| HttpHeader { name: name.into(), value: value.to_vec() };
    FetchResult {
        exchange: Some(HttpExchange {
            method: "GET".into(),
            target: "/a.html?moved=1".into(),
            http_version: "HTTP/1.1".into(),
            request_headers: vec![header("host", b"example.com"), header("user-agent", b"recrawl/0.1")],
            reason: "OK".into(),
            response_headers: vec![header("content-type", b"text/html"), header("x-latin-1", b"caf\xe9")],
            headers_left_out: 1,
            remote_ip: Some("192.0.2.7".into()),
        }),
        ..fetch_result()
    }
}

pub fn discovered_links() -> DiscoveredLinks {
    DiscoveredLinks {
        page: PageRef::new("http://example.com/b.html", "example.com"),
        source: Some(PageRef::new("http://example.com/a.html", "example.com")),
        occurrences: 2,
        period: 42,
        depth: 4,
    }
}

pub fn page_announcement() -> PageAnnouncement {
    PageAnnouncement {
        page: PageRef::new("http://example.com/news/b.html", "example.com"),
        source: PageRef::new("http://example.com/news/sitemap.xml", "example.com"),
        document: AnnouncingDocument::Sitemap,
        period: 42,
        fetched_at: UtcTime::from_ms(1_700_000_360_000),
        fetched_at_ms: 1_700_000_360_000,
        claimed_modified: Some(UtcTime::from_ms(1_700_000_000_000)),
        claimed_modified_ms: Some(1_700_000_000_000),
        change_frequency: Some(ClaimedChangeFrequency::Daily),
        priority: Some(0.8),
        depth: 2,
    }
}

pub fn change_event() -> ChangeEvent {
    ChangeEvent {
        page: PageRef::new("http://example.com/a.html", "example.com"),
        period: 42,
        downloaded: true,
        outcome: FetchOutcome::Downloaded,
        http_status: Some(200),
        latency_ms: 12.25,
        size_bytes: 11,
        previous_size_bytes: Some(14),
        size_change_bytes: Some(-3),
        first_seen: false,
        changed: Some(true),
        text_changed: Some(true),
        content_hash: Some("00112233445566778899aabbccddeeff".into()),
        previous_content_hash: Some("ffeeddccbbaa99887766554433221100".into()),
        text_hash: Some("0123456789abcdef".into()),
        encoding: Some("EUC-KR".into()),
        words: Some(10),
        previous_words: Some(9),
        degrees: Some(ChangeDegrees {
            bw: 1.0,
            cos: Some(0.125),
            wd: Some(0.25),
            ed: Some(0.375),
            sh: Some(0.5),
            sh_k: Some(10),
            ied: 0.57,
            ied_cost: 5.7,
            ied_ops: IedOps { add: 2, copy: 3, drop: 0, shrink: 4, replace: 0, moves: 1 },
            ied_s: 0.4,
            ied_t: 0.9,
            truncated: false,
        }),
        fetched_at: UtcTime::from_ms(1_780_000_000_000),
        fetched_at_ms: 1_780_000_000_000,
        crawl_delay_ms: Some(2_000),
        etag: Some("\"v2\"".into()),
        last_modified: None,
    }
}

pub fn page_estimate() -> PageEstimate {
    PageEstimate {
        page: PageRef::new("http://example.com/a.html", "example.com"),
        group: "example.com".into(),
        period: 42,
        last_request: LastRequest {
            period: 42,
            downloaded: true,
            outcome: FetchOutcome::Downloaded,
            changed: Some(false),
            size_bytes: 11,
            size_change_bytes: Some(0),
            latency_ms: 12.25,
            fetched_at: UtcTime::from_ms(1_780_000_000_000),
            fetched_at_ms: 1_780_000_000_000,
            http_status: Some(200),
            crawl_delay_ms: Some(2_000),
            etag: Some("\"v2\"".into()),
            last_modified: None,
        },
        crawls: 16,
        first_request_period: 27,
        requests: 12,
        successes: 9,
        failures: 3,
        comparisons: 8,
        changes: 2,
        request_rate: Some(0.75),
        download_rate: Some(0.75),
        download_recall: Some(0.75),
        modification_rate: Some(0.25),
        change_recall: Some(8.0 / 15.0),
        download_eligible: false,
        change_eligible: false,
        model: ForecastModel::Paper,
        downloads: Forecast {
            yes: 4,
            no: 1,
            probabilities: vec![0.0, 0.0, 0.0, 0.125, 0.375, 0.5],
            next: 0.875,
            prior: ForecastPrior::Group,
        },
        changes_forecast: Forecast {
            yes: 1,
            no: 4,
            probabilities: vec![1.0 / 6.0; 6],
            next: 0.5,
            prior: ForecastPrior::Uniform,
        },
        change_rate: Some(0.25),
        change_rate_low: None,
        change_rate_high: None,
        change_rate_prior_mean: None,
        change_rate_prior_urls: None,
        change_rate_source: ChangeRateSource::Comparisons,
        refresh: RefreshPlan {
            weekly_change_rate: 4.5,
            group16: FrequencyGroup::Weekly(5),
            group6: FrequencyGroup::Weekly(7),
            crawls_per_week: 7.0,
            paper_hour: Some(0),
            weekdays: vec![0, 1, 2, 3, 4, 5, 6],
            min_wait_hour: Some(15),
            min_wait_slot: Some(111),
        },
    }
}

pub fn group_distribution() -> GroupDistribution {
    let mut download_rate_fine = vec![0; 101];
    download_rate_fine[0] = 3;
    download_rate_fine[45] = 1;
    download_rate_fine[95] = 2;
    download_rate_fine[100] = 9;
    let mut modification_rate_fine = vec![0; 101];
    modification_rate_fine[0] = 4;
    modification_rate_fine[12] = 1;
    modification_rate_fine[100] = 6;
    GroupDistribution {
        group: "example.com".into(),
        partition: 2,
        period: 42,
        first_period: 27,
        urls: 17,
        requests: 200,
        download_rate_bins: [3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 9],
        modification_rate_bins: [4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6],
        download_rate_fine,
        modification_rate_fine,
        published_at: UtcTime::from_ms(1_780_000_000_000),
        published_at_ms: 1_780_000_000_000,
    }
}

pub fn host_trust() -> HostTrust {
    HostTrust {
        host: "example.com".into(),
        partition: 2,
        period: 42,
        confirmed: 5,
        agreed: 12,
        refuted: 1,
        silent: 3,
        trust: ClaimTrust::Trusted,
        published_at: UtcTime::from_ms(1_780_000_000_000),
        published_at_ms: 1_780_000_000_000,
    }
}
