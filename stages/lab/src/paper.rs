//! `recrawl-lab paper`: the papers' experiments on the simulated web. Each writes CSV,
//! SVG charts and a Markdown summary into its own folder under `--out`, and the
//! summaries are gathered in `--out/README.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::evaluate::{evaluate, EvaluateConfig, EvaluateReport};
use anyhow::Context;
use clap::{Args, ValueEnum};
use recrawl_common::links::LinkRules;
use recrawl_model::prediction::{Kind, Model};
use recrawl_model::refresh::{ChangeCalendar, RefreshSettings};
use recrawl_scheduler::book::{Book, BookSettings, Learned};
use recrawl_scheduler::groups::{CrawlSchedule, GroupClasses, HourRule};
use recrawl_scheduler::hosts::Hosts;
use recrawl_scheduler::plan::{choose, PlanSettings};
use recrawl_scheduler::policy::{Discovery, Policy};
use recrawl_schemas::{DiscoveredLinks, PageRef};

use crate::chart::{bars, lines, Labels};
use recrawl::sim::measure::{CopyTracker, Measures};
use recrawl::sim::simulate::{simulate, simulated_request, PolicyResult, SimConfig, SimPolicy, SimulatedWeb};
use recrawl::sim::web::{Truth, Web, WebParams, WorldKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// The five papers' experiments, and the index of their reports (not `worlds`).
    All,
    /// Estimator paper §5: misprediction of downloads and changes over 55 crawls.
    Estimator,
    /// Refresh groups: a month of learning at 20-minute checks, then groups vs daily.
    RefreshGroups,
    /// Scheduler paper: average staleness of its rule against the other policies.
    Scheduler,
    /// In-degree first vs breadth first: authorities and hubs found per page crawled.
    Ifs,
    /// Every policy's freshness at budgets from 2 % to 40 % of the pages a period.
    FreshnessVsBudget,
    /// The family of worlds (`docs/algorithms/worlds.md`): every policy at five budgets,
    /// 100 and 300 periods, three seeds each. Run on its own: it takes half an hour.
    Worlds,
}

#[derive(Debug, Args)]
pub struct PaperArgs {
    /// The experiment to run (default: the papers' five, and the index of their reports).
    #[arg(value_enum, default_value = "all")]
    pub experiment: Experiment,
    /// Folder the reports are written to (one subfolder per experiment).
    #[arg(long, default_value = "reports/sim")]
    pub out: PathBuf,
    /// Seed of the simulated webs: the same seed, the same reports.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Multiplies every experiment's page count (1: the committed reports).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

pub fn run(args: &PaperArgs) -> anyhow::Result<()> {
    let chosen = |e: Experiment| {
        args.experiment == e || (args.experiment == Experiment::All && e != Experiment::Worlds)
    };
    let scaled = |pages: u64| ((pages as f64 * args.scale).round() as u64).max(200);
    let mut summaries = Vec::new();
    type Runner = fn(&Path, u64, u64) -> anyhow::Result<String>;
    let experiments: [(Experiment, &str, u64, Runner); 6] = [
        (Experiment::Estimator, "estimator", 40_000, estimator),
        (Experiment::RefreshGroups, "refresh-groups", 2_000, refresh_groups),
        (Experiment::Scheduler, "scheduler", 20_000, scheduler),
        (Experiment::Ifs, "ifs", 100_000, ifs),
        (Experiment::FreshnessVsBudget, "freshness-vs-budget", 20_000, freshness_vs_budget),
        (Experiment::Worlds, "worlds", 20_000, worlds),
    ];
    for (experiment, name, pages, runner) in experiments {
        if !chosen(experiment) {
            continue;
        }
        let dir = args.out.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("--out {}", dir.display()))?;
        let started = std::time::Instant::now();
        let mut summary = runner(&dir, args.seed, scaled(pages))?;
        let _ = writeln!(
            summary,
            "\nRegenerate: `cargo run --release --bin recrawl-lab -- paper {name} --seed {} --scale {}` ({:.1} s here).",
            args.seed,
            args.scale,
            started.elapsed().as_secs_f64()
        );
        std::fs::write(dir.join("README.md"), &summary)?;
        eprintln!("{name}: written to {}", dir.display());
        summaries.push((name, summary));
    }
    if args.experiment == Experiment::All {
        let mut index = String::from("# The papers' experiments on the simulated web\n\n");
        for (name, summary) in &summaries {
            let _ = writeln!(
                index,
                "- [{name}]({name}/README.md): {}",
                summary.lines().next().unwrap_or("").trim_start_matches("# ")
            );
        }
        std::fs::write(args.out.join("README.md"), index)?;
    }
    Ok(())
}

fn web_of(seed: u64, pages: u64, pages_per_site: u32, period_minutes: f64, median_change_rate: f64) -> Web {
    Web::generate(params_of(seed, pages, pages_per_site, period_minutes, median_change_rate))
}

fn params_of(
    seed: u64,
    pages: u64,
    pages_per_site: u32,
    period_minutes: f64,
    median_change_rate: f64,
) -> WebParams {
    WebParams {
        seed,
        sites: pages.div_ceil(u64::from(pages_per_site)) as u32,
        pages_per_site,
        period_minutes,
        median_change_rate,
        ..WebParams::default()
    }
}

fn model_name(model: Model) -> String {
    model.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.2}%", v * 100.0))
}

/// Estimator paper §5: every page requested at each of 55 daily crawls, its history
/// written as in the paper's Figure 1, then the §5 protocol for DR and MR.
fn estimator(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    const CRAWLS: u64 = 55;
    // A period is a day; the median page changes about every two weeks.
    let web = web_of(seed, pages, 100, 1440.0, 0.07);
    let histories: Vec<(String, String)> = (0..web.len() as u32)
        .map(|page| {
            let mut changes = web.changes(page, 0.0).peekable();
            let (mut version, mut stored, mut letter) = (0u64, None::<u64>, 0u8);
            let history: String = (0..CRAWLS)
                .map(|crawl| {
                    while changes.next_if(|&t| t < crawl as f64).is_some() {
                        version += 1;
                    }
                    if !web.downloads(page, crawl) {
                        return '!';
                    }
                    // A new letter for each download whose content differs from the last.
                    if stored.is_some_and(|s| s != version) {
                        letter = (letter + 1) % 26;
                    }
                    stored = Some(version);
                    char::from(b'a' + letter)
                })
                .collect();
            (web.site_of(page).group.name().to_owned(), history)
        })
        .collect();
    let paper = |kind: Kind, group: &str| match (kind, group) {
        (Kind::Dr, "popular") => 0.0007,
        (Kind::Dr, _) => 0.0011,
        (Kind::Mr, "popular") => 0.048,
        (Kind::Mr, _) => 0.044,
    };
    let reports: Vec<EvaluateReport> = [Kind::Dr, Kind::Mr]
        .into_iter()
        .map(|kind| evaluate(&histories, &EvaluateConfig { kind, ..EvaluateConfig::default() }))
        .collect::<Result<_, _>>()?;
    let mut csv = String::from("kind,group,model,n,distribution_urls,misprediction_rate,paper_rate\n");
    let mut md = format!(
        "# Estimator paper §5: misprediction over 55 daily crawls\n\n{} pages of {} sites, half in the popular and half in the random group (Table 1 download behaviour); every page requested at each of 55 crawls; histories → the §5 protocol (window 5, the next 5 predicted).\n\n| kind | group | model | N | misprediction | paper |\n|---|---|---|---:|---:|---:|\n",
        web.len(),
        web.sites().len()
    );
    let mut categories = Vec::new();
    let mut by_model: Vec<(String, Vec<f64>)> =
        EvaluateConfig::default().models.iter().map(|&m| (model_name(m), Vec::new())).collect();
    by_model.push(("paper".to_owned(), Vec::new()));
    for report in &reports {
        let kind = if report.kind == Kind::Dr { "DR" } else { "MR" };
        for group in ["popular", "random"] {
            categories.push(format!("{kind} {group}"));
            for row in report.rows.iter().filter(|row| row.group == group) {
                let name = model_name(row.model);
                let _ = writeln!(
                    csv,
                    "{kind},{group},{name},{},{},{},{}",
                    row.n,
                    row.distribution_urls,
                    row.misprediction_rate.map_or(String::new(), |r| r.to_string()),
                    paper(report.kind, group)
                );
                let _ = writeln!(
                    md,
                    "| {kind} | {group} | {name} | {} | {} | {} |",
                    row.n,
                    percent(row.misprediction_rate),
                    percent(Some(paper(report.kind, group)))
                );
                if let Some(series) = by_model.iter_mut().find(|(n, _)| *n == name) {
                    series.1.push(row.misprediction_rate.unwrap_or(0.0) * 100.0);
                }
            }
            if let Some(series) = by_model.last_mut() {
                series.1.push(paper(report.kind, group) * 100.0);
            }
        }
    }
    md.push_str(
        "\nThe DR figures compare directly: the simulated pages download by the paper's Table 1. The MR figures do not: the paper published no MR distribution (its Table 2 repeats Table 1), so the simulated change behaviour is this web's log-normal rates, and the comparison says only whether the models predict it as well as the paper's did its own.\n\n![misprediction](misprediction.svg)\n",
    );
    std::fs::write(dir.join("misprediction.csv"), csv)?;
    bars(
        &dir.join("misprediction.svg"),
        &Labels {
            title: "Misprediction rate by model (§5 protocol)",
            x: "kind and group",
            y: "misprediction, %",
        },
        &categories,
        &by_model,
    )?;
    Ok(md)
}

/// Refresh groups: 30 days of checking every page every 20 minutes teach each page its
/// group and crawl time; the next 30 days compare crawling by the groups with crawling
/// every page once a day.
fn refresh_groups(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    const PERIOD_MINUTES: f64 = 20.0;
    const PER_DAY: f64 = 24.0 * 60.0 / PERIOD_MINUTES;
    const DAYS: f64 = 30.0;
    let period_ms = PERIOD_MINUTES * 60_000.0;
    // The median page changes about once in four days.
    let web = web_of(seed, pages, 100, PERIOD_MINUTES, 0.25 / PER_DAY);
    let learn_end = DAYS * PER_DAY;
    let truth = Truth::of_web(&web, 2.0 * learn_end);
    let settings = RefreshSettings::default();
    let mut comparison = GroupsComparison::new(DAYS as usize);
    let schedules: Vec<CrawlSchedule> = (0..web.len() as u32)
        .map(|page| {
            let schedule = learned_schedule(&web, &truth, page, learn_end, period_ms, &settings);
            comparison.group_counts.entry(schedule.group().to_string()).or_default().0 += 1;
            schedule
        })
        .collect();
    // The comparison month: both stores start with a copy taken as it begins.
    let end = 2.0 * learn_end;
    let daily_times: Vec<f64> = (0..DAYS as usize).map(|day| learn_end + day as f64 * PER_DAY).collect();
    for (page, schedule) in (0..web.len() as u32).zip(schedules) {
        let changes: Vec<f64> = truth.changes(page).iter().copied().filter(|&t| t >= learn_end).collect();
        let group_times = scheduled_times(schedule, learn_end, end, period_ms);
        comparison.group_counts.entry(schedule.group().to_string()).or_default().1 +=
            group_times.len() as u64;
        for (strategy, times) in [&group_times, &daily_times].into_iter().enumerate() {
            let copy = StoredCopy { web: &web, page, changes: &changes, start: learn_end, end };
            copy.replay_by_day(
                times,
                PER_DAY,
                &mut comparison.fresh_at_day_end[strategy],
                &mut comparison.measures[strategy],
            );
        }
    }
    comparison.report(dir, &web)
}

/// A page's crawl schedule after a month of checks every period: each detected change
/// recorded by the estimator's weekly counter and hour histogram, then the paper's group
/// and crawl time.
fn learned_schedule(
    web: &Web,
    truth: &Truth,
    page: u32,
    learn_end: f64,
    period_ms: f64,
    settings: &RefreshSettings,
) -> CrawlSchedule {
    let mut calendar = ChangeCalendar::default();
    let changes = truth.changes(page);
    let mut seen = 0;
    for check in 1..learn_end as u64 {
        let at = check as f64;
        let before = changes.partition_point(|&t| t < at);
        if before > seen && web.downloads(page, check) {
            seen = before;
            calendar.record((at * period_ms) as i64, 0, settings);
        }
    }
    let now_ms = (learn_end * period_ms) as i64;
    let plan = calendar.refresh(now_ms, 0, settings);
    CrawlSchedule::from_crawl_time(
        plan.group16,
        &plan.time,
        HourRule::Paper,
        &settings.crawl_time,
        GroupClasses::Six,
    )
}

/// The periods in [`from`, `to`) at which `schedule` crawls.
fn scheduled_times(schedule: CrawlSchedule, from: f64, to: f64, period_ms: f64) -> Vec<f64> {
    let mut times = Vec::new();
    let mut after_ms = (from * period_ms) as i64;
    loop {
        let next = schedule.next_after(after_ms, 0);
        let at = next as f64 / period_ms;
        if at >= to {
            return times;
        }
        times.push(at);
        after_ms = next;
    }
}

/// One page's stored copy over [`start`, `end`), periods.
struct StoredCopy<'a> {
    web: &'a Web,
    page: u32,
    /// The page's change times from `start` on.
    changes: &'a [f64],
    start: f64,
    end: f64,
}

impl StoredCopy<'_> {
    /// Applies changes and fetches at `times` in time order, a day of `day_length`
    /// periods at a time, adding 1 to each day whose end finds the copy fresh.
    fn replay_by_day(&self, times: &[f64], day_length: f64, fresh_at_day_end: &mut [f64], m: &mut Measures) {
        let mut tracker = CopyTracker::new();
        let (mut c, mut f) = (0, 0);
        let mut day_end = self.start + day_length;
        for fresh in fresh_at_day_end.iter_mut() {
            loop {
                let change = self.changes.get(c).copied().filter(|&t| t < day_end);
                let fetch = times.get(f).copied().filter(|&t| t < day_end);
                match (change, fetch) {
                    (Some(tc), Some(tf)) if tc <= tf => {
                        tracker.changed(tc - self.start, m);
                        c += 1;
                    }
                    (_, Some(tf)) => {
                        tracker.fetched(tf - self.start, self.web.downloads(self.page, tf as u64), m);
                        f += 1;
                    }
                    (Some(tc), None) => {
                        tracker.changed(tc - self.start, m);
                        c += 1;
                    }
                    (None, None) => break,
                }
            }
            *fresh += f64::from(u8::from(tracker.is_fresh()));
            day_end += day_length;
        }
        tracker.finish(self.end - self.start, m);
    }
}

/// The comparison month's tallies: index 0 the groups' schedules, 1 the daily crawl.
struct GroupsComparison {
    measures: [Measures; 2],
    /// Pages fresh at the end of each day.
    fresh_at_day_end: [Vec<f64>; 2],
    /// Per group: pages, and requests in the comparison month.
    group_counts: std::collections::BTreeMap<String, (u64, u64)>,
}

impl GroupsComparison {
    fn new(days: usize) -> Self {
        Self {
            measures: [Measures::default(), Measures::default()],
            fresh_at_day_end: [vec![0.0; days], vec![0.0; days]],
            group_counts: std::collections::BTreeMap::new(),
        }
    }

    /// Writes the CSVs and the chart into `dir`; returns the Markdown report.
    fn report(&self, dir: &Path, web: &Web) -> anyhow::Result<String> {
        let n = web.len() as f64;
        let [groups, daily] = &self.measures;
        let load_ratio = groups.requests as f64 / daily.requests.max(1) as f64;
        let mut csv = String::from("strategy,requests,freshness,age_periods,wasted_requests\n");
        for (name, m) in [("groups", groups), ("daily", daily)] {
            let _ =
                writeln!(csv, "{name},{},{},{},{}", m.requests, m.freshness(), m.age(), m.wasted_requests());
        }
        std::fs::write(dir.join("comparison.csv"), csv)?;
        let mut groups_csv = String::from("group,pages,requests_in_30_days\n");
        for (group, (pages, requests)) in &self.group_counts {
            let _ = writeln!(groups_csv, "{group},{pages},{requests}");
        }
        std::fs::write(dir.join("groups.csv"), groups_csv)?;
        let series: Vec<(String, Vec<(f64, f64)>)> = ["groups", "daily"]
            .iter()
            .zip(&self.fresh_at_day_end)
            .map(|(name, fresh)| {
                (name.to_string(), fresh.iter().enumerate().map(|(d, f)| (d as f64 + 1.0, f / n)).collect())
            })
            .collect();
        lines(
            &dir.join("freshness.svg"),
            &Labels {
                title: "Share of pages fresh at the end of each day",
                x: "day of the comparison month",
                y: "freshness",
            },
            &series,
            &[],
        )?;
        let mut md = format!(
            "# Refresh groups: groups against crawling everything daily\n\n{} pages of {} sites. Days 1–30: every page checked every 20 minutes; each detected change is recorded by the estimator's weekly counter and hour histogram, which give the page its group (six groups) and crawl time by the paper's rule. Days 31–60: the same web crawled (a) by the groups' schedules and (b) every page once a day at midnight.\n\n| strategy | requests | freshness (time average) | mean age, periods of 20 min | wasted requests |\n|---|---:|---:|---:|---:|\n",
            web.len(),
            web.sites().len()
        );
        for (name, m) in [("groups", groups), ("daily", daily)] {
            let _ = writeln!(
                md,
                "| {name} | {} | {:.4} | {:.1} | {} |",
                m.requests,
                m.freshness(),
                m.age(),
                m.wasted_requests()
            );
        }
        let _ = writeln!(
            md,
            "\nLoad ratio (groups ÷ daily): **{load_ratio:.2}**. The paper claims about half the load and fresher data; here the groups spend {:.0}% of the daily crawl's requests for freshness {:.4} against {:.4}.\n\n| group | pages | requests in 30 days |\n|---|---:|---:|",
            load_ratio * 100.0,
            groups.freshness(),
            daily.freshness()
        );
        for (group, (pages, requests)) in &self.group_counts {
            let _ = writeln!(md, "| {group} | {pages} | {requests} |");
        }
        md.push_str("\n![freshness](freshness.svg)\n");
        Ok(md)
    }
}

/// Scheduler paper: every policy at the same budget, the paper's s_j(t) and freshness.
fn scheduler(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    let web = web_of(seed, pages, 100, 60.0, 0.03);
    let config = SimConfig { freshness_by_period: true, ..SimConfig::default() };
    let world = SimulatedWeb { truth: Truth::of_web(&web, config.periods as f64), web: &web };
    let results = simulate(&world, &SimPolicy::all(), &config);
    let mut csv = String::from(
        "policy,sees_truth,paper_staleness,freshness,age,harmonic_cost,requests,wasted_requests,ratio_to_optimum\n",
    );
    let mut md = format!(
        "# Scheduler paper: average staleness by policy\n\n{} pages of {} sites, {} periods of an hour, budget {} of the pages per period. Staleness is the paper's s_j(t), periods since the page's last download, averaged over pages and periods; the paper's rule minimises it. Freshness is measured against the true change times.\n\n| policy | staleness s | freshness | age | harmonic cost | requests | wasted | ÷ optimum |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        web.len(),
        web.sites().len(),
        config.periods,
        config.budget
    );
    for r in &results {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{}",
            r.name,
            r.sees_truth,
            r.paper_staleness,
            r.freshness,
            r.age,
            r.harmonic_cost,
            r.requests,
            r.wasted_requests,
            r.ratio_to_optimum.unwrap_or(f64::NAN)
        );
        let _ = writeln!(
            md,
            "| {}{} | {:.2} | {:.4} | {:.2} | {:.3} | {} | {} | {} |",
            r.name,
            if r.sees_truth { " (sees truth)" } else { "" },
            r.paper_staleness,
            r.freshness,
            r.age,
            r.harmonic_cost,
            r.requests,
            r.wasted_requests,
            r.ratio_to_optimum.map_or("-".to_owned(), |v| format!("{v:.3}"))
        );
    }
    std::fs::write(dir.join("policies.csv"), csv)?;
    let names: Vec<String> = results.iter().map(|r| r.name.to_owned()).collect();
    bars(
        &dir.join("staleness.svg"),
        &Labels { title: "Average staleness s_j(t) by policy", x: "policy", y: "periods since download" },
        &names,
        &[("staleness".to_owned(), results.iter().map(|r| r.paper_staleness).collect())],
    )?;
    let series: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|r| {
            let points =
                r.freshness_by_period.iter().enumerate().map(|(p, &f)| (p as f64 + 1.0, f)).collect();
            (r.name.to_owned(), points)
        })
        .collect();
    lines(
        &dir.join("freshness.svg"),
        &Labels { title: "Share of pages fresh at the end of each period", x: "period", y: "freshness" },
        &series,
        &[],
    )?;
    md.push_str(
        "\nThe paper's plain rule ranks by s_j alone. A page that never downloads never has its s_j reset, so it stays at the top: with Table 1's share of pages that never download, the rule spends most of its budget on them (the wasted column), and its average staleness is the highest. On pages that always download it is round robin with a size tie-break (`staleness-schedule.md` §3). change-aware replaces s_j by the expected time out of date and skips pages predicted to fail; lambda-crawl spends the budget at the harmonic-cost optimal rates of the estimated change rates, and the product's default, freshness, picks the pages whose fetch buys the most freshness now (the known-rate optimum's index at the learned rates). The reference policies (optimum, clairvoyant, proportional) read the true rates or change times; the others learn from their own fetches.\n\n![staleness](staleness.svg)\n\n![freshness](freshness.svg)\n",
    );
    Ok(md)
}

/// Budgets of `freshness_vs_budget`: picks per period as a share of the pages.
const BUDGETS: [f64; 5] = [0.02, 0.05, 0.1, 0.2, 0.4];

/// Every policy at each of [`BUDGETS`] on the same web, as `recrawl sim --budget` runs them.
fn freshness_vs_budget(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    let web = web_of(seed, pages, 100, 60.0, 0.03);
    let periods = SimConfig::default().periods;
    let world = SimulatedWeb { truth: Truth::of_web(&web, periods as f64), web: &web };
    let runs: Vec<(f64, Vec<PolicyResult>)> = BUDGETS
        .iter()
        .map(|&budget| {
            (budget, simulate(&world, &SimPolicy::all(), &SimConfig { budget, ..SimConfig::default() }))
        })
        .collect();
    let per_page_period = |requests: u64| requests as f64 / (web.len() as f64 * periods as f64);
    let mut csv =
        String::from("budget,policy,sees_truth,requests_per_page_period,freshness,ratio_to_optimum\n");
    for (budget, results) in &runs {
        for r in results {
            let _ = writeln!(
                csv,
                "{budget},{},{},{},{},{}",
                r.name,
                r.sees_truth,
                per_page_period(r.requests),
                r.freshness,
                r.ratio_to_optimum.unwrap_or(f64::NAN)
            );
        }
    }
    std::fs::write(dir.join("freshness-vs-budget.csv"), csv)?;
    let series: Vec<(String, Vec<(f64, f64)>)> = SimPolicy::all()
        .iter()
        .map(|policy| {
            let points = runs
                .iter()
                .filter_map(|(_, results)| results.iter().find(|r| r.name == policy.name()))
                .map(|r| (per_page_period(r.requests), r.freshness))
                .collect();
            (policy.name().to_owned(), points)
        })
        .collect();
    lines(
        &dir.join("freshness-vs-budget.svg"),
        &Labels { title: "Freshness against requests", x: "requests per page per period", y: "freshness" },
        &series,
        &["optimum", "clairvoyant"],
    )?;
    let mut md = format!(
        "# Freshness against the budget, every policy\n\n{} pages of {} sites, {periods} periods of an hour; {:.0} % of the sites date their pages' latest change in `Last-Modified`, {:.0} % send the time of the response; the store starts with a copy of every page. Each cell is freshness ÷ the known-rate optimum's at that budget (the optimum's own freshness in its row).\n\n| policy |",
        web.len(),
        web.sites().len(),
        100.0 * web.params().truthful_dates_share,
        100.0 * web.params().response_dates_share,
    );
    for (budget, _) in &runs {
        let _ = write!(md, " R = {budget} |");
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(runs.len()));
    for policy in SimPolicy::all() {
        let _ =
            write!(md, "\n| {}{} |", policy.name(), if policy.sees_truth() { " (sees truth)" } else { "" });
        for (_, results) in &runs {
            let cell =
                results.iter().find(|r| r.name == policy.name()).map_or("-".to_owned(), |r| match policy {
                    SimPolicy::Optimum => format!("{:.4}", r.freshness),
                    _ => r.ratio_to_optimum.map_or("-".to_owned(), |v| format!("{v:.3}")),
                });
            let _ = write!(md, " {cell} |");
        }
    }
    md.push_str("\n\nThe chart puts each run at the requests it made per page and period (the clairvoyant needs fewer than its budget). `recrawl sim --budget 0.02,0.05,0.1,0.2,0.4` prints the same runs as tables.\n\n![freshness against requests](freshness-vs-budget.svg)\n");
    Ok(md)
}

/// What `worlds` runs on each world.
struct WorldsScope<'a> {
    /// Run lengths, periods; the charts show the first.
    periods: &'a [u64],
    /// Seeds from the one given: each figure is reported as its spread over them.
    seeds: u64,
    budgets: &'a [f64],
}

/// A cell of the table: world, periods, budget.
type WorldCell = (WorldKind, u64, f64);

/// The committed report's scope.
const WORLDS_REPORTED: WorldsScope<'static> =
    WorldsScope { periods: &[100, 300], seeds: 3, budgets: &BUDGETS };

/// One cell of `worlds`: a policy's freshness ÷ the optimum's over the seeds run.
#[derive(Debug, Default, Clone)]
struct Spread {
    ratios: Vec<f64>,
}

impl Spread {
    fn add(&mut self, ratio: Option<f64>) {
        self.ratios.extend(ratio.filter(|r| r.is_finite()));
    }

    fn low(&self) -> f64 {
        self.ratios.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn high(&self) -> f64 {
        self.ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    fn cell(&self) -> String {
        let (low, high) = (format!("{:.3}", self.low()), format!("{:.3}", self.high()));
        match self.ratios.len() {
            0 => "-".to_owned(),
            _ if low == high => low,
            _ => format!("{low}–{high}"),
        }
    }
}

fn worlds(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    worlds_in(dir, seed, pages, &WORLDS_REPORTED)
}

/// Every policy on each world of the family at each budget, run length and seed of
/// `scope`: a CSV of every run and a chart per world, and one table of the default
/// policy, uniform, the clairvoyant and the best other learned policy against the
/// known-rate optimum, as spreads over the seeds.
fn worlds_in(dir: &Path, seed: u64, pages: u64, scope: &WorldsScope<'_>) -> anyhow::Result<String> {
    let mut csv = String::from("world,periods,seed,budget,policy,sees_truth,freshness,ratio_to_optimum\n");
    // (world, periods, budget) → policy → spread over the seeds.
    let mut cells: Vec<(WorldCell, Vec<(&'static str, Spread)>)> = Vec::new();
    for kind in WorldKind::ALL {
        for &periods in scope.periods {
            for seed in seed..seed + scope.seeds {
                let web = Web::generate(WebParams {
                    world: kind,
                    failures: kind.fails_by_default(),
                    run_periods: periods as f64,
                    ..params_of(seed, pages, 100, 60.0, 0.03)
                });
                let world = SimulatedWeb { truth: Truth::of_web(&web, periods as f64), web: &web };
                for &budget in scope.budgets {
                    let config = SimConfig { periods, budget, ..SimConfig::default() };
                    let results = simulate(&world, &SimPolicy::all(), &config);
                    let key = (kind, periods, budget);
                    let index = match cells.iter().position(|(k, _)| *k == key) {
                        Some(index) => index,
                        None => {
                            cells.push((key, Vec::new()));
                            cells.len() - 1
                        }
                    };
                    for r in &results {
                        let _ = writeln!(
                            csv,
                            "{},{periods},{seed},{budget},{},{},{},{}",
                            kind.name(),
                            r.name,
                            r.sees_truth,
                            r.freshness,
                            r.ratio_to_optimum.unwrap_or(f64::NAN)
                        );
                        let policies = &mut cells[index].1;
                        match policies.iter_mut().find(|(name, _)| *name == r.name) {
                            Some((_, spread)) => spread.add(r.ratio_to_optimum),
                            None => {
                                let mut spread = Spread::default();
                                spread.add(r.ratio_to_optimum);
                                policies.push((r.name, spread));
                            }
                        }
                    }
                }
            }
        }
    }
    std::fs::write(dir.join("worlds.csv"), &csv)?;
    let default = recrawl_scheduler::policy::DEFAULT_POLICY.as_str();
    let mut md = format!(
        "# The family of worlds\n\n{pages} pages a world (`docs/algorithms/worlds.md`), seeds {seed}–{}, periods of an hour, the store starting with a copy of every page. Each cell is freshness ÷ the known-rate optimum's, as its spread over the seeds; *best other* is the freshest learned policy but the default (`{default}`), by its highest ratio.\n\n| world | periods | R | default | uniform | clairvoyant | best other |\n|---|---:|---:|---:|---:|---:|---|\n",
        seed + scope.seeds - 1
    );
    for ((kind, periods, budget), policies) in &cells {
        let of = |name: &str| policies.iter().find(|(n, _)| *n == name).map(|(_, s)| s);
        let cell = |name: &str| of(name).map_or("-".to_owned(), Spread::cell);
        let best_other = policies
            .iter()
            .filter(|(name, _)| {
                *name != default && SimPolicy::parse(name).is_some_and(|policy| !policy.sees_truth())
            })
            .max_by(|a, b| a.1.high().total_cmp(&b.1.high()))
            .map_or("-".to_owned(), |(name, spread)| format!("{name} {}", spread.cell()));
        let _ = writeln!(
            md,
            "| {} | {periods} | {budget} | {} | {} | {} | {best_other} |",
            kind.name(),
            cell(default),
            cell("uniform"),
            cell("clairvoyant")
        );
    }
    for kind in WorldKind::ALL {
        let series: Vec<(String, Vec<(f64, f64)>)> =
            [default, "uniform", "clairvoyant", "lambda-crawl", "change-aware"]
                .iter()
                .map(|&name| {
                    let points = cells
                        .iter()
                        .filter(|((k, periods, _), _)| *k == kind && Some(periods) == scope.periods.first())
                        .filter_map(|((_, _, budget), policies)| {
                            let spread = policies.iter().find(|(n, _)| *n == name).map(|(_, s)| s)?;
                            let mean = spread.ratios.iter().sum::<f64>() / spread.ratios.len().max(1) as f64;
                            Some((*budget, mean))
                        })
                        .collect();
                    (name.to_owned(), points)
                })
                .collect();
        let title = format!(
            "{}: freshness ÷ the known-rate optimum, {} periods",
            kind.name(),
            scope.periods.first().copied().unwrap_or(0)
        );
        lines(
            &dir.join(format!("{}.svg", kind.name())),
            &Labels {
                title: &title,
                x: "budget R (picks per period ÷ pages)",
                y: "÷ optimum (mean of the seeds)",
            },
            &series,
            &["clairvoyant"],
        )?;
        let _ = writeln!(md, "\n![{0}]({0}.svg)", kind.name());
    }
    md.push_str("\nEvery run is in `worlds.csv`.\n");
    Ok(md)
}

/// In-degree first vs breadth first: both crawl the link graph from the same seeds
/// through the scheduler's frontier, a fixed number of pages a period; the top 0.1 % of
/// pages by in-degree (authorities) and out-degree (hubs) found, per page crawled.
fn ifs(dir: &Path, seed: u64, pages: u64) -> anyhow::Result<String> {
    let web = web_of(seed, pages, 100, 60.0, 0.03);
    let graph = LinkGraph::of(&web);
    let n = web.len();
    let seeds: Vec<u32> = (0..10u32).map(|i| (u64::from(i) * n as u64 / 10) as u32).collect();
    let per_period = (n / 1000).max(1);
    let curves = [Discovery::Ifs, Discovery::Bfs]
        .into_iter()
        .map(|discovery| Ok((discovery, discovery_curve(&web, &graph, &seeds, per_period, discovery)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    ifs_report(dir, &web, &graph, &curves, per_period)
}

/// The simulated web's links, and its top 0.1% pages by in-degree (authorities) and by
/// out-degree (hubs).
struct LinkGraph {
    links: Vec<Vec<u32>>,
    authorities: Vec<bool>,
    hubs: Vec<bool>,
    /// Pages in each top set.
    top: usize,
}

impl LinkGraph {
    fn of(web: &Web) -> Self {
        let n = web.len();
        let links: Vec<Vec<u32>> = (0..n as u32).map(|page| web.links(page)).collect();
        let mut in_degree = vec![0u32; n];
        for targets in &links {
            for &target in targets {
                in_degree[target as usize] += 1;
            }
        }
        let top = (n / 1000).max(1);
        let top_by = |degree: &dyn Fn(usize) -> u32| {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&page| (std::cmp::Reverse(degree(page)), page));
            let mut marked = vec![false; n];
            order.into_iter().take(top).for_each(|page| marked[page] = true);
            marked
        };
        let authorities = top_by(&|page| in_degree[page]);
        let hubs = top_by(&|page| links[page].len() as u32);
        Self { links, authorities, hubs, top }
    }
}

/// After each period of a crawl: pages crawled, share of authorities found, share of hubs
/// found.
type DiscoveryCurve = Vec<(f64, f64, f64)>;

/// Crawls the web from `seeds` through the scheduler's frontier in `discovery` order,
/// `per_period` pages a period.
fn discovery_curve(
    web: &Web,
    graph: &LinkGraph,
    seeds: &[u32],
    per_period: usize,
    discovery: Discovery,
) -> anyhow::Result<DiscoveryCurve> {
    let url = |page: u32| format!("http://s{}.sim.test/p/{page}.html", web.page(page).site);
    let (mut book, mut hosts) = (Book::default(), Hosts::default());
    let settings = BookSettings::default();
    let rules = LinkRules { max_depth: u32::MAX, ..LinkRules::default() };
    let plan = PlanSettings {
        policy: Policy::Uniform,
        discovery,
        discovery_share: 1.0,
        pending_periods: 0,
        ..PlanSettings::default()
    };
    let link = |book: &mut Book,
                hosts: &mut Hosts,
                target: u32,
                source: Option<u32>,
                period: u64,
                depth: u32| {
        let page = |page: u32| PageRef::new(&url(page), &format!("s{}.sim.test", web.page(page).site));
        let message =
            DiscoveredLinks { page: page(target), source: source.map(page), occurrences: 1, period, depth };
        book.apply_link(hosts, &message, &rules, u32::MAX, &settings)
    };
    for &page in seeds {
        link(&mut book, &mut hosts, page, None, 0, 0)?;
    }
    let (mut crawled, mut found_authorities, mut found_hubs) = (0usize, 0usize, 0usize);
    let mut curve = vec![(0.0, 0.0, 0.0)];
    let mut period = 0u64;
    while crawled < web.len() {
        let caps = vec![u32::MAX; hosts.len()];
        let picks = choose(&[&book], &hosts, period, 1.0, per_period, &caps, &plan);
        let frontier: Vec<u32> =
            picks.iter().filter(|c| book.page(c.slot).is_frontier()).map(|c| c.slot).collect();
        if frontier.is_empty() {
            break;
        }
        for slot in frontier {
            let address = book.url(slot);
            let page: u32 = address
                .rsplit('/')
                .next()
                .and_then(|file| file.strip_suffix(".html"))
                .and_then(|id| id.parse().ok())
                .context("a simulated page URL")?;
            let depth = u32::from(book.page(slot).depth);
            let request = simulated_request(period, true, None, web.bytes(page), 0.0);
            let learned = Learned {
                period,
                request: &request,
                p_change: 0.5,
                p_download: 1.0,
                change_rate: None,
                change_rate_low: None,
                change_rate_high: None,
                schedule: None,
                last_modified_ms: None,
            };
            book.learn(&mut hosts, slot, &learned, &settings);
            for &target in &graph.links[page as usize] {
                link(&mut book, &mut hosts, target, Some(page), period, depth + 1)?;
            }
            crawled += 1;
            found_authorities += usize::from(graph.authorities[page as usize]);
            found_hubs += usize::from(graph.hubs[page as usize]);
        }
        book.clear_dirty();
        curve.push((
            crawled as f64,
            found_authorities as f64 / graph.top as f64,
            found_hubs as f64 / graph.top as f64,
        ));
        period += 1;
    }
    Ok(curve)
}

/// Writes the CSV and charts into `dir`; returns the Markdown report.
fn ifs_report(
    dir: &Path,
    web: &Web,
    graph: &LinkGraph,
    curves: &[(Discovery, DiscoveryCurve)],
    per_period: usize,
) -> anyhow::Result<String> {
    let n = web.len();
    let name = |d: Discovery| if d == Discovery::Ifs { "IFS" } else { "BFS" };
    let mut csv = String::from("order,pages_crawled,authorities_found,hubs_found\n");
    for (discovery, curve) in curves {
        for &(crawled, a, h) in curve {
            let _ = writeln!(csv, "{},{crawled},{a},{h}", name(*discovery));
        }
    }
    std::fs::write(dir.join("discovery.csv"), csv)?;
    for (file, title, pick) in [
        ("authorities.svg", "Authorities (top 0.1% in-degree) found", 1usize),
        ("hubs.svg", "Hubs (top 0.1% out-degree) found", 2),
    ] {
        let series: Vec<(String, Vec<(f64, f64)>)> = curves
            .iter()
            .map(|(d, curve)| {
                let points = curve
                    .iter()
                    .map(|&(c, a, h)| (c / n as f64 * 100.0, if pick == 1 { a } else { h }))
                    .collect();
                (name(*d).to_owned(), points)
            })
            .collect();
        lines(
            &dir.join(file),
            &Labels { title, x: "pages crawled, % of the web", y: "share found" },
            &series,
            &[],
        )?;
    }
    let at = |curve: &[(f64, f64, f64)], share: f64| {
        curve
            .iter()
            .find(|&&(c, _, _)| c >= share * n as f64)
            .map_or((f64::NAN, f64::NAN), |&(_, a, h)| (a, h))
    };
    let mut md = format!(
        "# In-degree first against breadth first\n\n{n} pages of {} sites, power-law link graph; crawls from the same 10 seeds through the scheduler's frontier, {per_period} pages a period, with `--discovery ifs` and `bfs`. Authorities and hubs: the top 0.1% ({} pages) by in-degree and by out-degree.\n\n| crawled | IFS authorities | BFS authorities | IFS hubs | BFS hubs |\n|---:|---:|---:|---:|---:|\n",
        web.sites().len(),
        graph.top
    );
    for share in [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5] {
        let (ia, ih) = at(&curves[0].1, share);
        let (ba, bh) = at(&curves[1].1, share);
        let _ = writeln!(
            md,
            "| {:.1}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% |",
            share * 100.0,
            ia * 100.0,
            ba * 100.0,
            ih * 100.0,
            bh * 100.0
        );
    }
    md.push_str(
        "\nIn this web a fifth of the pages' links go across sites to pages ranked by popularity, so the most linked-to pages are a link or two from any seed and both orders find them early; out-degree is independent of rank, so hubs are found in proportion to the pages crawled by either order.\n\n![authorities](authorities.svg)\n\n![hubs](hubs.svg)\n",
    );
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_writes_its_csv_chart_and_summary() {
        let out = tempfile::tempdir().expect("tempdir");
        let args =
            PaperArgs { experiment: Experiment::All, out: out.path().to_owned(), seed: 3, scale: 0.01 };
        run(&args).expect("runs");
        for (name, files) in [
            ("estimator", &["misprediction.csv", "misprediction.svg"][..]),
            ("refresh-groups", &["comparison.csv", "groups.csv", "freshness.svg"]),
            ("scheduler", &["policies.csv", "staleness.svg", "freshness.svg"]),
            ("ifs", &["discovery.csv", "authorities.svg", "hubs.svg"]),
            ("freshness-vs-budget", &["freshness-vs-budget.csv", "freshness-vs-budget.svg"]),
        ] {
            let dir = out.path().join(name);
            let summary = std::fs::read_to_string(dir.join("README.md")).expect("summary");
            assert!(summary.starts_with("# "), "{name}");
            for file in files {
                let text = std::fs::read_to_string(dir.join(file)).expect(file);
                assert!(text.lines().count() > 2, "{name}/{file}");
            }
        }
        let index = std::fs::read_to_string(out.path().join("README.md")).expect("index");
        assert_eq!(index.matches("](").count(), 5);
        // One row per policy and budget, after the header.
        let csv = std::fs::read_to_string(out.path().join("freshness-vs-budget/freshness-vs-budget.csv"))
            .expect("csv");
        assert_eq!(csv.lines().count(), 1 + BUDGETS.len() * SimPolicy::all().len());
        assert!(!out.path().join("worlds").exists(), "worlds runs on its own");
    }

    #[test]
    fn worlds_reports_every_world_of_the_family() {
        let out = tempfile::tempdir().expect("tempdir");
        let scope = WorldsScope { periods: &[20], seeds: 2, budgets: &[0.1] };
        let summary = worlds_in(out.path(), 1, 200, &scope).expect("runs");
        let csv = std::fs::read_to_string(out.path().join("worlds.csv")).expect("csv");
        assert_eq!(csv.lines().count(), 1 + WorldKind::ALL.len() * 2 * SimPolicy::all().len());
        for kind in WorldKind::ALL {
            let chart =
                std::fs::read_to_string(out.path().join(format!("{}.svg", kind.name()))).expect("chart");
            assert!(chart.contains("<svg"), "{}", kind.name());
            let row = format!("| {} | 20 | 0.1 | ", kind.name());
            assert!(summary.contains(&row), "{row} in {summary}");
        }
    }
}
