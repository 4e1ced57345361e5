//! The fetch stage: fetches each picked URL over HTTP and emits the result and the
//! page's links.

pub mod http;
pub mod links;

use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use recrawl_common::runtime::{run_stage, Emitter, RuntimeError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{DEAD_LETTER, FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::{host_of, url_key, DiscoveredLinks, FetchResult, Format, Message, PagePick};
use serde::{Deserialize, Serialize};

use crate::http::{FetchConfig, Fetcher};
use crate::links::{extract_links, LinkFilter};

pub const STAGE: &str = "fetch";

#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Requests in flight at once.
    #[arg(long, env = "RECRAWL_FETCH_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Whole-request timeout, milliseconds.
    #[arg(long, env = "RECRAWL_FETCH_REQUEST_TIMEOUT_MS", default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// Connection timeout, milliseconds.
    #[arg(long, env = "RECRAWL_FETCH_CONNECT_TIMEOUT_MS", default_value_t = 10_000)]
    pub connect_timeout_ms: u64,
    /// Redirects followed before giving up.
    #[arg(long, env = "RECRAWL_FETCH_MAX_REDIRECTS", default_value_t = 5)]
    pub max_redirects: usize,
    /// Bodies larger than this are abandoned (outcome body_too_large); at most 48 MiB,
    /// below the envelope's payload limit.
    #[arg(long, env = "RECRAWL_FETCH_MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..=48 * 1024 * 1024))]
    pub max_body_bytes: u64,
    /// User-Agent header.
    #[arg(long, env = "RECRAWL_FETCH_USER_AGENT", default_value = "recrawl/0.1")]
    pub user_agent: String,
    /// Keep links with a query string.
    #[arg(long, env = "RECRAWL_FETCH_LINKS_ALLOW_QUERY", default_value_t = true, action = clap::ArgAction::Set)]
    pub links_allow_query: bool,
    /// Most distinct links taken from one page.
    #[arg(long, env = "RECRAWL_FETCH_MAX_LINKS", default_value_t = 1000)]
    pub max_links: usize,
}

/// The fetch stage keeps no state; replayed picks are fetched again and the diff stage
/// drops the duplicate results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoState;

impl Message for NoState {
    const NAME: &'static str = "NoState";
    const FORMAT: Format = Format::Bincode;
}

#[derive(Debug)]
struct FetchMetrics {
    outcomes: IntCounterVec,
    latency: HistogramVec,
}

impl FetchMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let outcomes =
            IntCounterVec::new(Opts::new("fetch_requests_total", "Requests by outcome."), &["outcome"])?;
        let latency = HistogramVec::new(
            HistogramOpts::new("fetch_latency_seconds", "Request wall time by outcome.")
                .buckets(prometheus::exponential_buckets(0.005, 2.0, 14)?),
            &["outcome"],
        )?;
        registry.register(Box::new(outcomes.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        Ok(Self { outcomes, latency })
    }
}

#[derive(Debug)]
pub struct Fetch {
    fetcher: Fetcher,
    concurrency: usize,
    link_filter: LinkFilter,
    metrics: FetchMetrics,
}

impl Fetch {
    fn emit(&self, result: &FetchResult, out: &mut Emitter) -> Result<(), StageError> {
        let outcome = result.outcome.as_str();
        self.metrics.outcomes.with_label_values(&[outcome]).inc();
        self.metrics.latency.with_label_values(&[outcome]).observe(result.latency_ms / 1000.0);
        out.send(FETCH_RESULTS, &result.url, result)?;
        if !result.outcome.is_download() || !is_html(result.content_type.as_deref()) {
            return Ok(());
        }
        let Ok(page_url) = url::Url::parse(result.final_url.as_deref().unwrap_or(&result.url)) else {
            return Ok(());
        };
        for link in extract_links(&page_url, &result.body, &self.link_filter) {
            let Ok(host) = host_of(&link.url) else { continue };
            let discovered = DiscoveredLinks {
                url_key: url_key(&link.url),
                url: link.url,
                host,
                source_url: Some(result.url.clone()),
                source_key: Some(result.url_key.clone()),
                occurrences: link.occurrences,
                period: result.period,
                depth: result.depth.saturating_add(1),
            };
            out.send(LINKS, &discovered.url, &discovered)?;
        }
        Ok(())
    }
}

/// Groups picks by URL, keeping offset (and so period) order within each group. A stage
/// that fell behind can hold the same URL for several periods in one batch: those are
/// fetched one after the other, so the site sees them in period order; distinct URLs are
/// fetched concurrently.
fn chain_by_url(picks: Vec<PagePick>) -> Vec<Vec<PagePick>> {
    let mut chains: Vec<Vec<PagePick>> = Vec::new();
    let mut chain_of: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for pick in picks {
        match chain_of.get(&pick.url) {
            Some(&index) => chains[index].push(pick),
            None => {
                chain_of.insert(pick.url.clone(), chains.len());
                chains.push(vec![pick]);
            }
        }
    }
    chains
}

fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with("text/html") || ct.starts_with("application/xhtml")
    })
}

impl Stage for Fetch {
    type State = NoState;

    fn name(&self) -> &'static str {
        STAGE
    }

    fn input_topics(&self) -> Vec<&'static str> {
        vec![FETCH]
    }

    fn output_topics(&self) -> Vec<&'static str> {
        vec![FETCH_RESULTS, LINKS, DEAD_LETTER]
    }

    fn stateful(&self) -> bool {
        false
    }

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        _state: &mut StateStore<NoState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let picks: Vec<PagePick> =
            batch.iter().filter_map(|record| out.decode_keyed(record, |p: &PagePick| &p.host)).collect();
        // Owned picks and a cloned client (an Arc inside) keep the futures free of
        // borrowed lifetimes, which the stage's Send future requires.
        let fetcher = self.fetcher.clone();
        let results: Vec<Vec<FetchResult>> = futures::stream::iter(chain_by_url(picks))
            .map(move |chain| {
                let fetcher = fetcher.clone();
                async move {
                    let mut results = Vec::with_capacity(chain.len());
                    for pick in &chain {
                        results.push(fetcher.fetch(pick).await);
                    }
                    results
                }
            })
            .buffered(self.concurrency)
            .collect()
            .await;
        for result in results.iter().flatten() {
            self.emit(result, out)?;
        }
        Ok(())
    }
}

/// Runs the fetch stage until `ctx.shutdown`.
pub async fn run(args: FetchArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    let fetcher = Fetcher::new(FetchConfig {
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        connect_timeout: Duration::from_millis(args.connect_timeout_ms),
        max_redirects: args.max_redirects,
        max_body_bytes: args.max_body_bytes,
        user_agent: args.user_agent.clone(),
    })
    .map_err(|e| StageError::Other(format!("--user-agent or TLS setup: {e}")))?;
    let metrics = FetchMetrics::register(ctx.metrics.registry())
        .map_err(|e| StageError::Other(format!("registering fetch metrics: {e}")))?;
    let stage = Fetch {
        fetcher,
        concurrency: args.concurrency as usize,
        link_filter: LinkFilter { allow_query: args.links_allow_query, max_links: args.max_links },
        metrics,
    };
    run_stage(stage, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-fetch` and `recrawl stage fetch`.
pub async fn main(args: FetchArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_of_one_url_chain_in_period_order() {
        let pick = |url: &str, period| PagePick {
            url: url.to_owned(),
            url_key: url_key(url),
            host: "h".into(),
            group: "h".into(),
            period,
            reason: recrawl_schemas::PickReason::Refresh,
            depth: 0,
            score: 0.0,
            etag: None,
            last_modified: None,
            deadline_ms: None,
        };
        let chains = chain_by_url(vec![pick("http://h/a", 1), pick("http://h/b", 1), pick("http://h/a", 2)]);
        let shape: Vec<Vec<(String, u64)>> =
            chains.iter().map(|c| c.iter().map(|p| (p.url.clone(), p.period)).collect()).collect();
        assert_eq!(
            shape,
            vec![
                vec![("http://h/a".to_owned(), 1), ("http://h/a".to_owned(), 2)],
                vec![("http://h/b".to_owned(), 1)],
            ]
        );
    }

    #[test]
    fn html_detection_accepts_missing_and_html_types() {
        assert!(is_html(None));
        assert!(is_html(Some("Text/HTML; charset=utf-8")));
        assert!(is_html(Some("application/xhtml+xml")));
        assert!(!is_html(Some("application/pdf")));
    }
}
