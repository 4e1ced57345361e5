//! The offline commands: one period's picks for a list of pages (`plan`) and the refresh
//! groups of a list of change rates (`groups`). They run the stage's own code; [`run`]
//! returns the text to print.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use recrawl_model::refresh::CrawlTimeConfig;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::book::{Book, BookFull};
use crate::groups::{GroupClasses, HourRule};
use crate::groups_report::{groups_report, GroupsError};
use crate::hosts::Hosts;
use crate::plan::{choose, PlanSettings};
use crate::policy::{Horizon, Policy};

#[derive(Debug, Subcommand)]
pub enum Offline {
    /// One period's picks for the pages of a JSON-lines file, as the stage would choose
    /// them.
    Plan(PlanArgs),
    /// Refresh groups, crawl times, the weekly timetable and the load against daily
    /// crawling, for the weekly change rates of a JSON-lines file.
    Groups(GroupsArgs),
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// JSON lines: url, host, size, staleness (whole periods), response_time (the host's
    /// g_i in periods per unit of size), and optionally p_change, p_download and
    /// change_rate (per period) for the change-aware policies.
    #[arg(long)]
    pub pages: PathBuf,
    /// How the pages are ranked, as the stage's --policy.
    #[arg(long, value_enum)]
    pub policy: Policy,
    /// Picks to choose.
    #[arg(long)]
    pub m: usize,
    #[arg(long, default_value = "rolling:10", help = crate::policy::HORIZON_HELP)]
    pub horizon: Horizon,
    /// t, the period the picks are for.
    #[arg(long, default_value_t = 0)]
    pub period: u64,
    /// W, the weight of the download-time term.
    #[arg(long, default_value_t = 1.0, value_parser = recrawl_common::config::non_negative)]
    pub cost_weight: f64,
    /// At most this many picks per host; no cap by default.
    #[arg(long)]
    pub max_picks_per_host: Option<u32>,
    /// `change-aware`: least predicted download probability of a pick.
    #[arg(long, default_value_t = PlanSettings::default().min_download_probability, value_parser = recrawl_common::config::unit_interval)]
    pub min_download_probability: f64,
}

#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// JSON lines: url, weekly_rate, and optionally hours (24 change counts, by local hour).
    #[arg(long)]
    pub rates: PathBuf,
    /// Crawl at the paper's hour or at the hour that least delays the changes.
    #[arg(long, value_enum, default_value_t = HourRule::Paper)]
    pub hour_rule: HourRule,
    /// Crawl by the paper's 6 deployed groups or by the 16 of its first table.
    #[arg(long, value_enum, default_value_t = GroupClasses::Six)]
    pub classes: GroupClasses,
}

#[derive(Debug, Error)]
pub enum OfflineError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} line {line}: {reason}")]
    Line { path: String, line: usize, reason: PageLineError },
    #[error("--policy groups needs refresh plans; use the `groups` command")]
    GroupsPolicy,
    #[error(transparent)]
    Full(#[from] BookFull),
    #[error("{path}: {source}")]
    Groups { path: String, source: GroupsError },
}

/// One line of `plan --pages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanPage {
    url: String,
    host: String,
    size: f64,
    staleness: f64,
    response_time: f64,
    #[serde(default = "half")]
    p_change: f64,
    #[serde(default = "one")]
    p_download: f64,
    #[serde(default)]
    change_rate: Option<f64>,
}

fn half() -> f64 {
    0.5
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Serialize)]
struct PlanOutput {
    policy: Policy,
    m: usize,
    period: u64,
    picks: Vec<PlannedPick>,
}

#[derive(Debug, Serialize)]
struct PlannedPick {
    url: String,
    host: String,
    score: f64,
}

fn read(path: &Path) -> Result<String, OfflineError> {
    std::fs::read_to_string(path)
        .map_err(|source| OfflineError::Read { path: path.display().to_string(), source })
}

/// Why a line of `plan --pages` is refused.
#[derive(Debug, Error)]
pub enum PageLineError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("{field} {value}: expected a whole number from 0 to {max}")]
    NotWhole { field: &'static str, value: f64, max: f64 },
    #[error("{field} {value}: expected a probability")]
    NotProbability { field: &'static str, value: f64 },
    #[error("response_time {0}: expected a number ≥ 0")]
    ResponseTime(f64),
    #[error("change_rate {0}: expected a rate ≥ 0")]
    ChangeRate(f64),
    #[error("{0} appears twice")]
    Twice(String),
    /// A host's pages share its response time (`g_i`).
    #[error("response_time {response_time} of host {host} differs from an earlier line's {earlier}")]
    HostResponseTime { response_time: f64, host: String, earlier: f64 },
}

fn whole(value: f64, field: &'static str, max: f64) -> Result<f64, PageLineError> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= max {
        Ok(value)
    } else {
        Err(PageLineError::NotWhole { field, value, max })
    }
}

fn probability(value: f64, field: &'static str) -> Result<f64, PageLineError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(PageLineError::NotProbability { field, value })
    }
}

/// `plan`: the pages go into one book in URL order, so the stage's tie-break (earlier
/// slot first) breaks ties by URL. Staleness s becomes a download s + 1 periods before
/// the clock; the period length is one unit, so size × response_time is the cost in
/// periods and the `paper` score is exactly (T − t)·s − W·size·response_time.
pub fn plan(args: &PlanArgs) -> Result<String, OfflineError> {
    if args.policy == Policy::Groups {
        return Err(OfflineError::GroupsPolicy);
    }
    let path = args.pages.display().to_string();
    let text = read(&args.pages)?;
    let mut pages = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: PageLineError| OfflineError::Line { path: path.clone(), line: number, reason };
        let page: PlanPage = serde_json::from_str(line).map_err(|e| bad(e.into()))?;
        let checked = (|| {
            whole(page.size, "size", f64::from(u32::MAX))?;
            whole(page.staleness, "staleness", f64::from(u32::MAX / 2))?;
            if !(page.response_time.is_finite() && page.response_time >= 0.0) {
                return Err(PageLineError::ResponseTime(page.response_time));
            }
            probability(page.p_change, "p_change")?;
            probability(page.p_download, "p_download")?;
            match page.change_rate {
                Some(rate) if !(rate.is_finite() && rate >= 0.0) => Err(PageLineError::ChangeRate(rate)),
                _ => Ok(()),
            }
        })();
        checked.map_err(bad)?;
        pages.push((number, page));
    }
    pages.sort_by(|a, b| a.1.url.cmp(&b.1.url));
    // The stalest page was downloaded in period 0, so the clock is one period past its s.
    let stalest = pages.iter().map(|(_, p)| p.staleness as u64).max().unwrap_or(0);
    let clock = stalest.saturating_add(1);
    let (mut book, mut hosts) = (Book::default(), Hosts::default());
    for (line, page) in &pages {
        let bad = |reason: PageLineError| OfflineError::Line { path: path.clone(), line: *line, reason };
        if book.find(&page.url).is_some() {
            return Err(bad(PageLineError::Twice(page.url.clone())));
        }
        // clock − 1 − s, at least 0.
        let last_download = stalest.saturating_sub(page.staleness as u64);
        let slot = book.add_tracked(
            &mut hosts,
            &page.url,
            &page.host,
            Some(last_download),
            page.size as u32,
            page.p_change,
            page.p_download,
            page.change_rate,
        )?;
        // g_i is the host's: a new host's is still unset (NaN).
        let stats = &mut hosts.stats[book.page(slot).host as usize];
        if !stats.ms_per_byte.is_nan() && stats.ms_per_byte != page.response_time {
            return Err(bad(PageLineError::HostResponseTime {
                response_time: page.response_time,
                host: page.host.clone(),
                earlier: stats.ms_per_byte,
            }));
        }
        stats.ms_per_byte = page.response_time;
    }
    let settings = PlanSettings {
        policy: args.policy,
        cost_weight: args.cost_weight,
        period_ms: 1,
        discovery_share: 0.0,
        min_download_probability: args.min_download_probability,
        pending_periods: 0,
        ..PlanSettings::default()
    };
    let caps = vec![args.max_picks_per_host.unwrap_or(u32::MAX); hosts.len()];
    let remaining = args.horizon.remaining(args.period);
    let choices = choose(&[&book], &hosts, clock, remaining, args.m, &caps, &settings);
    let picks = choices
        .iter()
        .map(|choice| PlannedPick {
            url: book.url(choice.slot),
            host: hosts.name(book.page(choice.slot).host).to_owned(),
            score: choice.score,
        })
        .collect();
    let output = PlanOutput { policy: args.policy, m: args.m, period: args.period, picks };
    Ok(serde_json::to_string_pretty(&output).unwrap_or_default() + "\n")
}

/// `groups`.
pub fn groups(args: &GroupsArgs) -> Result<String, OfflineError> {
    let text = read(&args.rates)?;
    let report = groups_report(&text, &CrawlTimeConfig::default(), args.hour_rule, args.classes)
        .map_err(|source| OfflineError::Groups { path: args.rates.display().to_string(), source })?;
    Ok(serde_json::to_string_pretty(&report).unwrap_or_default() + "\n")
}

pub fn run(command: &Offline) -> Result<String, OfflineError> {
    match command {
        Offline::Plan(args) => plan(args),
        Offline::Groups(args) => groups(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(
        lines: &str,
        policy: Policy,
        m: usize,
        extra: impl FnOnce(&mut PlanArgs),
    ) -> serde_json::Value {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages.jsonl");
        std::fs::write(&pages, lines).unwrap();
        let mut args = PlanArgs {
            pages,
            policy,
            m,
            horizon: Horizon::Fixed(20),
            period: 4,
            cost_weight: 1.0,
            max_picks_per_host: None,
            min_download_probability: 0.1,
        };
        extra(&mut args);
        serde_json::from_str(&plan(&args).unwrap()).unwrap()
    }

    fn picked(output: &serde_json::Value) -> Vec<(String, f64)> {
        output["picks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["url"].as_str().unwrap().to_owned(), p["score"].as_f64().unwrap()))
            .collect()
    }

    #[test]
    fn paper_scores_are_the_formula_and_ties_go_by_url() {
        let lines = r#"{"url":"http://b/2","host":"b","size":300,"staleness":3,"response_time":0.01}
{"url":"http://a/1","host":"a","size":100,"staleness":3,"response_time":0.02}

{"url":"http://a/0","host":"a","size":100,"staleness":3,"response_time":0.02}
{"url":"http://b/9","host":"b","size":100,"staleness":7,"response_time":0.01}
"#;
        let out = plan_of(lines, Policy::Paper, 3, |a| a.cost_weight = 2.0);
        // (T − t)·s − W·size·rt with T = 20, t = 4, W = 2.
        let expected =
            [("http://b/9", 16.0 * 7.0 - 2.0), ("http://a/0", 48.0 - 4.0), ("http://a/1", 48.0 - 4.0)];
        let got = picked(&out);
        assert_eq!(got.len(), 3);
        for ((url, score), (want_url, want)) in got.iter().zip(expected) {
            assert_eq!(url, want_url);
            assert!((score - want).abs() < 1e-9, "{url}: {score} vs {want}");
        }
        let capped = plan_of(lines, Policy::Paper, 3, |a| a.max_picks_per_host = Some(1));
        let urls: Vec<String> = picked(&capped).into_iter().map(|p| p.0).collect();
        assert_eq!(urls, ["http://b/9", "http://a/0"]);
    }

    #[test]
    fn change_aware_reads_the_probabilities() {
        let lines = r#"{"url":"http://h/static","host":"h","size":1,"staleness":5,"response_time":0,"p_change":0.01}
{"url":"http://h/busy","host":"h","size":1,"staleness":5,"response_time":0,"p_change":0.9}
{"url":"http://h/failing","host":"h","size":1,"staleness":5,"response_time":0,"p_change":0.9,"p_download":0.01}
"#;
        let urls: Vec<String> =
            picked(&plan_of(lines, Policy::ChangeAware, 3, |_| ())).into_iter().map(|p| p.0).collect();
        assert_eq!(urls, ["http://h/busy", "http://h/static"]);
    }

    #[test]
    fn bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages.jsonl");
        let args = |policy| PlanArgs {
            pages: pages.clone(),
            policy,
            m: 1,
            horizon: Horizon::Rolling(10),
            period: 0,
            cost_weight: 1.0,
            max_picks_per_host: None,
            min_download_probability: 0.1,
        };
        for (text, needle) in [
            ("{\"url\":\"http://h/a\",\"host\":\"h\",\"size\":1,\"staleness\":1.5,\"response_time\":0}", "staleness"),
            ("{\"url\":\"http://h/a\",\"host\":\"h\",\"size\":1,\"staleness\":1,\"response_time\":0,\"x\":1}", "unknown field"),
            ("not json", "expected"),
        ] {
            std::fs::write(&pages, format!("\n{text}\n")).unwrap();
            let error = plan(&args(Policy::Paper)).unwrap_err().to_string();
            assert!(error.contains(needle) && error.contains("line 2"), "{error}");
        }
        assert!(matches!(plan(&args(Policy::Groups)), Err(OfflineError::GroupsPolicy)));
    }
}
