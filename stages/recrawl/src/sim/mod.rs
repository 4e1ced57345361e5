//! The simulated web and what runs on it: the model ([`web`]) and its text ([`text`]),
//! the HTTP server `recrawl simweb` ([`server`]), the ground-truth measures
//! ([`measure`]) and the policy simulator `recrawl sim` ([`simulate`](mod@simulate), [`replay`],
//! [`matching`]). The papers' experiments on it are `recrawl-lab paper`.

pub mod matching;
pub mod measure;
pub mod replay;
pub mod server;
pub mod simulate;
pub mod sitemaps;
pub mod text;
pub mod web;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use recrawl_common::service::{print, print_line};
use recrawl_model::prediction::Eligibility;
use serde::Serialize;

use matching::{requests_to_match, Bound, RequestsToMatch};
use simulate::{simulate, PolicyResult, SimConfig, SimPolicy, SimulatedWeb, World};
use web::{Truth, Web, WebParams, WorldKind};

/// `recrawl sim`: every policy on the same web at the same budget.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Pages of the simulated web.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub pages: u64,
    /// Pages per site (the web has pages / this many sites).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub pages_per_site: u32,
    /// Periods simulated (each policy runs them all).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub periods: u64,
    /// R: picks per period as a share of the pages; a comma-separated list runs every
    /// policy at each (one table, or one JSON line, per budget).
    #[arg(long, value_delimiter = ',', default_value = "0.2", value_parser = parse_share)]
    pub budget: Vec<f64>,
    /// Seed of the simulated web and of every random choice: the same seed, the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Wall minutes a period stands for (time of day of changes and response times).
    #[arg(long, default_value_t = 60.0, value_parser = parse_positive)]
    pub period_minutes: f64,
    /// Policies to run, comma-separated (default: all): the references optimum,
    /// clairvoyant and proportional, and any of the scheduler's (`recrawl-scheduler
    /// --policy`).
    #[arg(long, value_delimiter = ',', value_parser = parse_policy)]
    pub policies: Vec<SimPolicy>,
    /// The estimator's least request rate for a URL to count in its group's
    /// distributions (0: every URL; the paper's 0.9 assumes every URL is requested every
    /// crawl).
    #[arg(long, default_value_t = Eligibility::default().min_request_rate, value_parser = parse_non_negative)]
    pub min_request_rate: f64,
    /// The estimator's least download (change) recall for the same (the paper: 0.2).
    #[arg(long, default_value_t = Eligibility::default().min_recall, value_parser = parse_non_negative)]
    pub min_recall: f64,
    /// Tell the learned policies each page's true change rate instead of letting them
    /// estimate it: separates what a policy's rule is worth from its estimates.
    #[arg(long)]
    pub known_rates: bool,
    /// Whether `freshness` scores the pages of hosts whose changes show busy hours by the
    /// index for a rate that follows the day, as the scheduler's `--time-of-day`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub time_of_day: bool,
    /// Share of the simulated sites whose `Last-Modified` dates each page's latest change.
    #[arg(long, default_value_t = WebParams::default().truthful_dates_share, value_parser = parse_fraction)]
    pub truthful_dates_share: f64,
    /// Share of the simulated sites whose `Last-Modified` is the time of the response (the
    /// estimator must find them out).
    #[arg(long, default_value_t = WebParams::default().response_dates_share, value_parser = parse_fraction)]
    pub response_dates_share: f64,
    /// Share of the simulated sites whose `Last-Modified` never moves, whatever the page's
    /// changes (the estimator must find them out); the other sites send none.
    #[arg(long, default_value_t = WebParams::default().stuck_dates_share, value_parser = parse_fraction)]
    pub stuck_dates_share: f64,
    /// Share of the simulated sites with a sitemap, its `<lastmod>`s dating each page as
    /// the site's `Last-Modified` does (truthful, the time of the request, never moving,
    /// or absent, by the shares above). The learned policies poll them within the budget
    /// and trust a site's claims once they prove true (`docs/algorithms/sitemaps.md`).
    #[arg(long, default_value_t = WebParams::default().sitemap_share, value_parser = parse_fraction)]
    pub sitemaps: f64,
    /// Share of the simulated sites with an RSS feed of their 20 latest changed pages,
    /// dated as the sitemaps are. A site with both is polled by its sitemap, which lists
    /// every page; a feed says nothing of the pages it leaves out.
    #[arg(long, default_value_t = WebParams::default().feed_share, value_parser = parse_fraction)]
    pub feeds: f64,
    /// The kind of web: `web` (recrawl's own), `periodic`, `bursty`, `drifting`,
    /// `heavy-tailed`, `mixed` (`docs/algorithms/worlds.md`); a comma-separated list, or
    /// `all`, runs each in turn and ends with a table of every world.
    #[arg(long, value_delimiter = ',', default_value = "web", value_parser = parse_worlds)]
    pub world: Vec<Vec<WorldKind>>,
    /// Whether requests fail as the estimator paper's Table 1 says (default: on the `web`
    /// world only; the family's other worlds download every request).
    #[arg(long, action = clap::ArgAction::Set)]
    pub failures: Option<bool>,
    /// Replay change histories in the `urlid_offset_history.txt` format instead of
    /// simulating a web: one period per day, every request downloads.
    #[arg(long, conflicts_with_all = ["pages", "pages_per_site", "seed", "world", "failures"])]
    pub replay: Option<PathBuf>,
    /// Print one JSON object (per budget, one a line) instead of a table; with two or more
    /// budgets and `uniform` among the policies, a last object gives the requests each
    /// policy needs to be as fresh as uniform (`requests_to_match`).
    #[arg(long)]
    pub json: bool,
}

/// A finite number `accept` takes; clap names the flag in the error.
fn parse_finite(raw: &str, accept: impl Fn(f64) -> bool, expected: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(value) if value.is_finite() && accept(value) => Ok(value),
        _ => Err(format!("{raw:?}: expected {expected}")),
    }
}

/// A budget: a share of the pages in (0, 1].
fn parse_share(raw: &str) -> Result<f64, String> {
    parse_finite(raw, |share| share > 0.0 && share <= 1.0, "a share in (0, 1]")
}

/// A fraction in [0, 1].
pub(crate) fn parse_fraction(raw: &str) -> Result<f64, String> {
    parse_finite(raw, |fraction| (0.0..=1.0).contains(&fraction), "a fraction in [0, 1]")
}

/// A rate or a length of time: finite and above 0.
pub(crate) fn parse_positive(raw: &str) -> Result<f64, String> {
    parse_finite(raw, |value| value > 0.0, "a finite number above 0")
}

/// A scale or a threshold: finite and ≥ 0.
pub(crate) fn parse_non_negative(raw: &str) -> Result<f64, String> {
    parse_finite(raw, |value| value >= 0.0, "a finite number ≥ 0")
}

/// A world's name, or `all`.
fn parse_worlds(raw: &str) -> Result<Vec<WorldKind>, String> {
    if raw == "all" {
        return Ok(WorldKind::ALL.to_vec());
    }
    WorldKind::ALL.into_iter().find(|kind| kind.name() == raw).map(|kind| vec![kind]).ok_or_else(|| {
        let names: Vec<&str> = WorldKind::ALL.iter().map(|kind| kind.name()).collect();
        format!("{raw:?}: expected all or one of {}", names.join(", "))
    })
}

fn parse_policy(raw: &str) -> Result<SimPolicy, String> {
    SimPolicy::parse(raw).ok_or_else(|| {
        let names: Vec<&str> = SimPolicy::all().iter().map(|p| p.name()).collect();
        format!("{raw:?}: expected one of {}", names.join(", "))
    })
}

#[derive(Debug, Serialize)]
struct SimReport<'a> {
    /// The world simulated (none for a replay).
    world: Option<WorldKind>,
    pages: usize,
    periods: u64,
    budget: f64,
    seed: Option<u64>,
    replay: Option<String>,
    changes: usize,
    /// How the simulated web's sites send `Last-Modified` (none for a replay, which has
    /// no headers).
    last_modified: Option<ServerDatesShares>,
    seconds: f64,
    policies: &'a [PolicyResult],
}

/// Shares of a simulated web's sites by what they send as `Last-Modified`; the rest send
/// none.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct ServerDatesShares {
    truthful: f64,
    response_time: f64,
    stuck: f64,
}

impl ServerDatesShares {
    pub(crate) fn applied_to(self, params: WebParams) -> WebParams {
        WebParams {
            truthful_dates_share: self.truthful,
            response_dates_share: self.response_time,
            stuck_dates_share: self.stuck,
            ..params
        }
    }
}

/// The shares `--truthful-dates-share`, `--response-dates-share` and `--stuck-dates-share`
/// give (of `recrawl sim` and `recrawl simweb`): refused outside [0, 1] (arguments built
/// in code skip the flags' parser) or when they add up to more than 1.
pub(crate) fn dates_shares(
    truthful: f64,
    response_time: f64,
    stuck: f64,
) -> anyhow::Result<ServerDatesShares> {
    anyhow::ensure!(
        [truthful, response_time, stuck].iter().all(|share| (0.0..=1.0).contains(share)),
        "--truthful-dates-share, --response-dates-share and --stuck-dates-share must each be in [0, 1]"
    );
    anyhow::ensure!(
        // A little over 1 is the floats' rounding of shares that add up to 1.
        truthful + response_time + stuck <= 1.0 + 1e-9,
        "--truthful-dates-share, --response-dates-share and --stuck-dates-share add up to more than 1"
    );
    Ok(ServerDatesShares { truthful, response_time, stuck })
}

/// The last JSON line of a run of several budgets.
#[derive(Debug, Serialize)]
struct MatchReport<'a> {
    reference: &'static str,
    requests_to_match: &'a [RequestsToMatch],
}

/// The policy the others are measured against in requests.
const REFERENCE: &str = "uniform";

pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || run_policies(&args)).await?
}

fn run_policies(args: &SimArgs) -> anyhow::Result<()> {
    let policies = if args.policies.is_empty() { SimPolicy::all() } else { args.policies.clone() };
    if let Some(path) = &args.replay {
        let text = std::fs::read_to_string(path).with_context(|| format!("--replay {}", path.display()))?;
        let world =
            replay::ReplayWorld::parse(&text).with_context(|| format!("--replay {}", path.display()))?;
        let periods = args.periods.min(world.truth.horizon().ceil() as u64);
        report_budgets(args, &world, None, &policies, periods, None)?;
        return Ok(());
    }
    let dates = dates_shares(args.truthful_dates_share, args.response_dates_share, args.stuck_dates_share)?;
    let sites = args.pages.div_ceil(u64::from(args.pages_per_site));
    if sites > u64::from(u32::MAX) {
        bail!("--pages / --pages-per-site: too many sites");
    }
    let mut worlds: Vec<WorldKind> = args.world.iter().flatten().copied().collect();
    worlds.dedup();
    let mut summary = Vec::new();
    for &kind in &worlds {
        let web = Web::generate(dates.applied_to(WebParams {
            seed: args.seed,
            sites: sites as u32,
            pages_per_site: args.pages_per_site,
            period_minutes: args.period_minutes,
            world: kind,
            failures: args.failures.unwrap_or(kind.fails_by_default()),
            run_periods: args.periods as f64,
            sitemap_share: args.sitemaps,
            feed_share: args.feeds,
            ..WebParams::default()
        }));
        let world = SimulatedWeb { truth: Truth::of_web(&web, args.periods as f64), web: &web };
        let runs = report_budgets(args, &world, Some(kind), &policies, args.periods, Some(dates))?;
        summary.extend(runs.into_iter().map(|(budget, results)| (kind, budget, results)));
    }
    if worlds.len() > 1 && !args.json {
        print(format_args!("\n{}", worlds_table(&summary)))?;
    }
    Ok(())
}

/// The policy the scheduler runs by default, as the worlds' table names it.
const DEFAULT_NAME: &str = "freshness";

/// Each world and budget on a line: the default's freshness over the known-rate optimum
/// beside uniform's, the clairvoyant's and the best other learned policy's.
fn worlds_table(runs: &[(WorldKind, f64, Vec<PolicyResult>)]) -> String {
    let mut out = String::from("Every world, freshness ÷ the known-rate optimum\n");
    out.push_str(&format!(
        "{:<13} {:>7} {:>9} {:>9} {:>9} {:>10}  {}\n",
        "world", "budget", "default", "uniform", "clairv.", "÷uniform", "best other learned"
    ));
    for (kind, budget, results) in runs {
        let of = |name: &str| results.iter().find(|r| r.name == name);
        let ratio_of = |name: &str| ratio(of(name).and_then(|r| r.ratio_to_optimum));
        let over_uniform = match (of(DEFAULT_NAME), of(REFERENCE)) {
            (Some(default), Some(uniform)) if uniform.freshness > 0.0 => {
                format!("{:+.1} %", 100.0 * (default.freshness / uniform.freshness - 1.0))
            }
            _ => "-".to_owned(),
        };
        let best_other = results
            .iter()
            .filter(|r| !r.sees_truth && r.name != DEFAULT_NAME)
            .max_by(|a, b| a.freshness.total_cmp(&b.freshness))
            .map_or_else(|| "-".to_owned(), |r| format!("{} {}", r.name, ratio(r.ratio_to_optimum)));
        out.push_str(&format!(
            "{:<13} {:>7} {:>9} {:>9} {:>9} {:>10}  {}\n",
            kind.name(),
            budget,
            ratio_of(DEFAULT_NAME),
            ratio_of(REFERENCE),
            ratio_of("clairvoyant"),
            over_uniform,
            best_other
        ));
    }
    out
}

/// Every policy on `world` at each budget asked for, printed as it completes.
fn report_budgets(
    args: &SimArgs,
    world: &dyn World,
    kind: Option<WorldKind>,
    policies: &[SimPolicy],
    periods: u64,
    last_modified: Option<ServerDatesShares>,
) -> anyhow::Result<Vec<(f64, Vec<PolicyResult>)>> {
    let mut runs = Vec::with_capacity(args.budget.len());
    for (index, &budget) in args.budget.iter().enumerate() {
        let started = Instant::now();
        let config = SimConfig {
            periods,
            budget,
            period_minutes: args.period_minutes,
            eligibility: Eligibility { min_request_rate: args.min_request_rate, min_recall: args.min_recall },
            known_rates: args.known_rates,
            time_of_day: args.time_of_day,
            ..SimConfig::default()
        };
        let results = simulate(world, policies, &config);
        let report = SimReport {
            world: kind,
            pages: world.truth().len(),
            periods,
            budget,
            seed: args.replay.is_none().then_some(args.seed),
            replay: args.replay.as_ref().map(|p| p.display().to_string()),
            changes: world.truth().total_changes(),
            last_modified,
            seconds: started.elapsed().as_secs_f64(),
            policies: &results,
        };
        if args.json {
            print_line(serde_json::to_string(&report)?)?;
        } else {
            print(format_args!("{}{}", if index > 0 { "\n" } else { "" }, table(&report)))?;
        }
        runs.push((budget, results));
    }
    let matches_reference = policies.iter().any(|policy| policy.name() == REFERENCE);
    if runs.len() < 2 || !matches_reference {
        return Ok(runs);
    }
    let needs = requests_to_match(&runs, REFERENCE);
    if args.json {
        print_line(serde_json::to_string(&MatchReport { reference: REFERENCE, requests_to_match: &needs })?)?;
    } else {
        let budgets: Vec<f64> = runs.iter().map(|(budget, _)| *budget).collect();
        print(format_args!("\n{}", match_table(&budgets, &needs)))?;
    }
    Ok(runs)
}

/// The requests each policy needs to be as fresh as uniform, a row per policy.
fn match_table(budgets: &[f64], needs: &[RequestsToMatch]) -> String {
    let mut out =
        format!("Requests to be as fresh as {REFERENCE} at each budget, as a share of its requests there\n");
    out.push_str(&format!("{:<15}", "policy"));
    budgets.iter().for_each(|budget| out.push_str(&format!(" {:>8}", budget)));
    out.push('\n');
    let mut policies: Vec<&str> = needs.iter().map(|need| need.policy).collect();
    policies.dedup();
    for policy in policies {
        out.push_str(&format!("{policy:<15}"));
        for &budget in budgets {
            // A budget whose reference made no request has no cell: keep the column.
            let cell = match needs.iter().find(|need| need.policy == policy && need.budget == budget) {
                Some(need) => {
                    let bound = match need.bound {
                        Bound::Exact => "",
                        Bound::AtMost => "≤",
                        Bound::MoreThan => ">",
                    };
                    format!("{bound}{:.3}", need.share)
                }
                None => "-".to_owned(),
            };
            out.push_str(&format!(" {cell:>8}"));
        }
        out.push('\n');
    }
    out.push_str("≤: as fresh already at the fewest requests run; >: not as fresh even at the most\n");
    out
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

fn table(report: &SimReport<'_>) -> String {
    let dates = report.last_modified.map_or_else(String::new, |shares| {
        format!(
            "; Last-Modified: {:.0} % of sites date changes, {:.0} % send the response time, {:.0} % a date that never moves",
            100.0 * shares.truthful,
            100.0 * shares.response_time,
            100.0 * shares.stuck
        )
    });
    let world = report.world.map_or_else(String::new, |kind| format!("world {}: ", kind.name()));
    let mut out = format!(
        "{world}{} pages, {} periods, budget {} of the pages per period, {} changes{dates}; {:.1} s\n",
        report.pages, report.periods, report.budget, report.changes, report.seconds
    );
    out.push_str(&format!(
        "{:<15} {:>9} {:>8} {:>9} {:>9} {:>10} {:>9} {:>10} {:>8} {:>8} {:>7}\n",
        "policy",
        "freshness",
        "age",
        "harmonic",
        "staleness",
        "requests",
        "sitemaps",
        "wasted",
        "÷optimum",
        "÷clairv.",
        "seconds"
    ));
    for r in report.policies {
        out.push_str(&format!(
            "{:<15} {:>9.4} {:>8.3} {:>9.3} {:>9.2} {:>10} {:>9} {:>10} {:>8} {:>8} {:>7.1}\n",
            format!("{}{}", r.name, if r.sees_truth { "*" } else { "" }),
            r.freshness,
            r.age,
            r.harmonic_cost,
            r.paper_staleness,
            r.requests,
            r.sitemap_requests,
            r.wasted_requests,
            ratio(r.ratio_to_optimum),
            ratio(r.ratio_to_clairvoyant),
            r.seconds,
        ));
    }
    out.push_str("* sees the true change rates or times\n");
    out
}
