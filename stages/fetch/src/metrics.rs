//! The fetch stage's Prometheus series. Per-host figures are distributions, never labels:
//! a crawl reaches millions of hosts.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};
use recrawl_common::links::Rejection;
use recrawl_common::metrics::registered;
use recrawl_schemas::FetchOutcome;

#[derive(Debug, Clone)]
pub struct FetchMetrics {
    /// Picks by outcome; `robots_denied` and `deferred` count the denials and the
    /// deferred picks, which made no request for the page.
    pub picks: IntCounterVec,
    /// Wall time of requests by outcome.
    pub latency: HistogramVec,
    /// Body bytes received.
    pub bytes: IntCounter,
    /// robots.txt answers by what they meant.
    pub robots: IntCounterVec,
    /// Picks handed back to the fetch topic because the batch's time was up.
    pub requeued: IntCounter,
    /// Requests in flight; each holds one connection.
    pub active_connections: IntGauge,
    /// Picks per host in a batch.
    pub host_queue_depth: Histogram,
    /// Links found, by `published` or the rule that rejected them.
    pub links: IntCounterVec,
    /// Extra requests for the documents of `<frame>`s.
    pub frames: IntCounterVec,
    /// Pages whose links were not all read: the page took its limit of URL text to resolve.
    pub links_cut_short: IntCounter,
    /// The oldest period among the picks of the batch being fetched, or of the last one.
    pub oldest_period_in_flight: IntGauge,
    /// Requests (pages or robots.txt) that failed because this process was out of file
    /// descriptors; their picks are tried again, not charged to the site.
    pub out_of_descriptors: IntCounter,
    /// Origins whose connections the pool may hold idle.
    pub idle_connections: IntGauge,
    /// Pages announced in sitemaps, feeds and robots.txt: `published`, or why dropped.
    pub announcements: IntCounterVec,
    /// Sitemaps and feeds read, by document and whether read whole, cut short or refused.
    pub announcing_documents: IntCounterVec,
}

impl FetchMetrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let metrics = Self {
            picks: registered(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "fetch_picks_total",
                        "Picks by outcome (robots_denied and deferred made no request for the page).",
                    ),
                    &["outcome"],
                )?,
            )?,
            latency: registered(
                registry,
                HistogramVec::new(
                    HistogramOpts::new("fetch_latency_seconds", "Request wall time by outcome.")
                        .buckets(prometheus::exponential_buckets(0.005, 2.0, 14)?),
                    &["outcome"],
                )?,
            )?,
            bytes: registered(registry, IntCounter::new("fetch_body_bytes_total", "Body bytes received.")?)?,
            robots: registered(
                registry,
                IntCounterVec::new(
                    Opts::new("fetch_robots_fetches_total", "robots.txt requests by result."),
                    &["result"],
                )?,
            )?,
            requeued: registered(
                registry,
                IntCounter::new(
                    "fetch_requeued_total",
                    "Picks put back on the fetch topic at the end of a batch's time, at its limit of body bytes, or at shutdown.",
                )?,
            )?,
            active_connections: registered(
                registry,
                IntGauge::new(
                    "fetch_connections_active",
                    "Requests in flight, each holding one connection.",
                )?,
            )?,
            host_queue_depth: registered(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "fetch_host_queue_depth",
                        "Picks waiting per host when a batch starts.",
                    )
                    .buckets(prometheus::exponential_buckets(1.0, 2.0, 12)?),
                )?,
            )?,
            links: registered(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "fetch_links_total",
                        "Distinct links per page: published, or the rule that rejected them.",
                    ),
                    &["result"],
                )?,
            )?,
            frames: registered(
                registry,
                IntCounterVec::new(
                    Opts::new("fetch_frames_total", "Frame documents fetched for their links, by outcome."),
                    &["outcome"],
                )?,
            )?,
            links_cut_short: registered(
                registry,
                IntCounter::new(
                    "fetch_links_cut_short_total",
                    "Pages whose links were read only in part: they took the limit of URL text to resolve.",
                )?,
            )?,
            oldest_period_in_flight: registered(
                registry,
                IntGauge::new(
                    "fetch_oldest_period_in_flight",
                    "The oldest period among the picks of the batch being fetched, or of the last batch.",
                )?,
            )?,
            out_of_descriptors: registered(
                registry,
                IntCounter::new(
                    "fetch_out_of_descriptors_total",
                    "Requests (pages or robots.txt) that failed because this process was out of file descriptors; their picks go back on the fetch topic, not charged to the site.",
                )?,
            )?,
            idle_connections: registered(
                registry,
                IntGauge::new(
                    "fetch_idle_connections",
                    "Origins whose connections the pool may keep idle (at most twice --max-idle-connections: between batches, and while their host has picks queued).",
                )?,
            )?,
            announcements: registered(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "fetch_announcements_total",
                        "Pages announced by sitemaps, feeds and robots.txt: published, or why dropped (bad_url, out_of_scope, over_count, duplicate; bad_value: published without a claim that did not parse).",
                    ),
                    &["result"],
                )?,
            )?,
            announcing_documents: registered(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "fetch_announcing_documents_total",
                        "Sitemaps, feeds, robots.txt files and pages that announced pages, by document and result (read, cut_short at a limit or at malformed XML, refused).",
                    ),
                    &["document", "result"],
                )?,
            )?,
        };
        // Every series a counter can take is exported at 0 from the start, so an alert
        // sees the first increment.
        for outcome in FetchOutcome::ALL {
            metrics.picks.with_label_values(&[outcome.as_str()]).reset();
            let _empty = metrics.latency.with_label_values(&[outcome.as_str()]);
        }
        for result in ["parsed", "absent", "server_error", "unreachable"] {
            metrics.robots.with_label_values(&[result]).reset();
        }
        let rejections = Rejection::ALL.map(Rejection::as_str);
        for result in ["published", "too_long"].iter().chain(&rejections) {
            metrics.links.with_label_values(&[result]).reset();
        }
        for outcome in ["downloaded", "failed"] {
            metrics.frames.with_label_values(&[outcome]).reset();
        }
        for result in ["published"].iter().chain(&crate::announcements::Dropped::LABELS) {
            metrics.announcements.with_label_values(&[result]).reset();
        }
        let documents = recrawl_schemas::AnnouncingDocument::ALL.map(|document| document.as_str());
        for document in documents.into_iter().chain(["unknown"]) {
            for result in ["read", "cut_short", "refused"] {
                metrics.announcing_documents.with_label_values(&[document, result]).reset();
            }
        }
        Ok(metrics)
    }
}
