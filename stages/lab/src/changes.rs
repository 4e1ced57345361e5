//! An analyst's report of a run's change events, from the JSON lines `recrawl tail
//! change-events` prints: the share of compared downloads that changed per host and
//! period, how much the changed pages changed (the degrees' distribution), the hour of day
//! changes were detected, and the most changed pages. Each chart is an SVG with the CSV it
//! was drawn from; `README.md` shows them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use recrawl_schemas::{decode, ChangeDegrees, ChangeEvent};
use thiserror::Error;

use crate::chart::{bars, lines, Labels};
use crate::report::{write, ReportError};

#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// JSON lines of change events (`recrawl tail change-events > events.jsonl`).
    #[arg(long)]
    pub events: PathBuf,
    /// Directory the report is written to.
    #[arg(long)]
    pub out: PathBuf,
    /// Hosts drawn in the change-share chart: those with the most compared downloads.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=10))]
    pub hosts: u16,
    /// Pages in the most-changed chart and table.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub pages: u16,
}

#[derive(Debug, Error)]
pub enum ChangesError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} line {line}: not a change event: {reason}")]
    NotAnEvent { path: PathBuf, line: usize, reason: String },
    #[error("{0} holds no change events")]
    Empty(PathBuf),
    #[error(transparent)]
    Write(#[from] ReportError),
    /// A chart could not be drawn; the message names it.
    #[error(transparent)]
    Chart(#[from] std::io::Error),
}

/// One of a change's degrees, where it was computed.
type Degree = fn(&ChangeDegrees) -> Option<f64>;

/// The degrees drawn in the distribution chart, by field name (BW is 0 or 1 by definition).
const DEGREES: [(&str, Degree); 5] =
    [("ied", |d| Some(d.ied)), ("ed", |d| d.ed), ("wd", |d| d.wd), ("cos", |d| d.cos), ("sh", |d| d.sh)];
const DEGREE_BINS: usize = 10;
const MS_PER_HOUR: i64 = 3_600_000;

/// Fetches compared with a previous download, and how many of those had changed.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Tally {
    compared: u64,
    changed: u64,
}

impl Tally {
    fn add(&mut self, changed: bool) {
        self.compared += 1;
        self.changed += u64::from(changed);
    }

    fn share(self) -> f64 {
        if self.compared == 0 {
            0.0
        } else {
            self.changed as f64 / self.compared as f64
        }
    }
}

/// One page's record in the run.
#[derive(Debug, Default)]
struct PageTally {
    host: String,
    fetches: u64,
    changes: u64,
    ied_sum: f64,
}

/// What the report is drawn from, gathered in one pass over the events.
#[derive(Debug, Default)]
struct Summary {
    events: u64,
    /// The first and last period of any event.
    periods: Option<(u64, u64)>,
    by_period_host: BTreeMap<(u64, String), Tally>,
    by_host: HashMap<String, Tally>,
    /// Changes per degree and bin of width 1/DEGREE_BINS (1.0 in the last).
    degree_bins: [[u64; DEGREE_BINS]; DEGREES.len()],
    /// Changes and comparisons by the UTC hour of the fetch.
    by_hour: [Tally; 24],
    pages: HashMap<String, PageTally>,
}

impl Summary {
    fn add(&mut self, event: ChangeEvent) {
        self.events += 1;
        let (first, last) = self.periods.unwrap_or((event.period, event.period));
        self.periods = Some((first.min(event.period), last.max(event.period)));
        let page = self
            .pages
            .entry(event.page.url)
            .or_insert_with(|| PageTally { host: event.page.host.clone(), ..Default::default() });
        page.fetches += 1;
        let Some(changed) = event.changed else { return };
        self.by_period_host.entry((event.period, event.page.host.clone())).or_default().add(changed);
        self.by_host.entry(event.page.host).or_default().add(changed);
        let hour = usize::try_from(event.fetched_at_ms.div_euclid(MS_PER_HOUR).rem_euclid(24)).unwrap_or(0);
        self.by_hour[hour].add(changed);
        if !changed {
            return;
        }
        page.changes += 1;
        if let Some(degrees) = &event.degrees {
            page.ied_sum += degrees.ied;
            for (bins, (_, degree)) in self.degree_bins.iter_mut().zip(DEGREES) {
                if let Some(value) = degree(degrees).filter(|v| (0.0..=1.0).contains(v)) {
                    bins[((value * DEGREE_BINS as f64) as usize).min(DEGREE_BINS - 1)] += 1;
                }
            }
        }
    }

    /// The hosts with the most comparisons, at most `count`, by name.
    fn busiest_hosts(&self, count: usize) -> Vec<&str> {
        let mut hosts: Vec<(&str, u64)> =
            self.by_host.iter().map(|(h, t)| (h.as_str(), t.compared)).collect();
        hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut chosen: Vec<&str> = hosts.into_iter().take(count).map(|(h, _)| h).collect();
        chosen.sort_unstable();
        chosen
    }

    /// The pages with the most changes (then the highest mean IED, then by URL).
    fn most_changed(&self, count: usize) -> Vec<(&str, &PageTally)> {
        let mean_ied = |p: &PageTally| if p.changes == 0 { 0.0 } else { p.ied_sum / p.changes as f64 };
        let mut pages: Vec<(&str, &PageTally)> =
            self.pages.iter().filter(|(_, p)| p.changes > 0).map(|(url, p)| (url.as_str(), p)).collect();
        pages.sort_by(|a, b| {
            b.1.changes.cmp(&a.1.changes).then(mean_ied(b.1).total_cmp(&mean_ied(a.1))).then(a.0.cmp(b.0))
        });
        pages.truncate(count);
        pages
    }
}

fn read_events(path: &Path) -> Result<Summary, ChangesError> {
    let read_error = |source| ChangesError::Read { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut summary = Summary::default();
    for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        if line.trim().is_empty() {
            continue;
        }
        // Each line as `recrawl tail` writes it: a plain JSON record, of schema 2 or 1.
        let event: ChangeEvent = decode(line.as_bytes()).map_err(|e| ChangesError::NotAnEvent {
            path: path.to_owned(),
            line: index + 1,
            reason: e.to_string(),
        })?;
        summary.add(event);
    }
    if summary.events == 0 {
        return Err(ChangesError::Empty(path.to_owned()));
    }
    Ok(summary)
}

/// Writes the report of `args.events` into `args.out`; returns its README.
pub fn changes_report(args: &ChangesArgs) -> Result<String, ChangesError> {
    let summary = read_events(&args.events)?;
    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|source| ReportError::Io { path: out.clone(), source })?;

    let hosts = summary.busiest_hosts(usize::from(args.hosts));
    let mut csv = String::from("period,host,compared,changed,share\n");
    let mut series: Vec<(String, Vec<(f64, f64)>)> =
        hosts.iter().map(|h| ((*h).to_owned(), Vec::new())).collect();
    for ((period, host), tally) in &summary.by_period_host {
        let _ = writeln!(csv, "{period},{host},{},{},{:.4}", tally.compared, tally.changed, tally.share());
        if let Some(index) = hosts.iter().position(|h| h == host) {
            series[index].1.push((*period as f64, tally.share()));
        }
    }
    write(out.join("change-share-by-host.csv"), &csv)?;
    let labels =
        Labels { title: "Share of compared downloads that changed", x: "period", y: "changed ÷ compared" };
    lines(&out.join("change-share-by-host.svg"), &labels, &series, &[])?;

    let mut csv = String::from("bin_low,bin_high");
    for (name, _) in DEGREES {
        let _ = write!(csv, ",{name}");
    }
    csv.push('\n');
    let categories: Vec<String> =
        (0..DEGREE_BINS).map(|bin| format!("{:.1}", bin as f64 / DEGREE_BINS as f64)).collect();
    for bin in 0..DEGREE_BINS {
        let low = bin as f64 / DEGREE_BINS as f64;
        let _ = write!(csv, "{low:.1},{:.1}", low + 1.0 / DEGREE_BINS as f64);
        for bins in &summary.degree_bins {
            let _ = write!(csv, ",{}", bins[bin]);
        }
        csv.push('\n');
    }
    write(out.join("change-degrees.csv"), &csv)?;
    let series: Vec<(String, Vec<f64>)> = DEGREES
        .iter()
        .zip(&summary.degree_bins)
        .map(|((name, _), bins)| (name.to_uppercase(), bins.iter().map(|&n| n as f64).collect()))
        .collect();
    let labels =
        Labels { title: "How much the changed pages changed", x: "degree (bin's lower edge)", y: "changes" };
    bars(&out.join("change-degrees.svg"), &labels, &categories, &series)?;

    let mut csv = String::from("hour_utc,compared,changed,share\n");
    for (hour, tally) in summary.by_hour.iter().enumerate() {
        let _ = writeln!(csv, "{hour},{},{},{:.4}", tally.compared, tally.changed, tally.share());
    }
    write(out.join("changes-by-hour.csv"), &csv)?;
    let hours: Vec<String> = (0..24).map(|hour: u8| hour.to_string()).collect();
    let changes = vec![("changes".to_owned(), summary.by_hour.iter().map(|t| t.changed as f64).collect())];
    let labels =
        Labels { title: "Changes by the hour they were detected", x: "hour of day (UTC)", y: "changes" };
    bars(&out.join("changes-by-hour.svg"), &labels, &hours, &changes)?;

    let top = summary.most_changed(usize::from(args.pages));
    let mut csv = String::from("rank,url,host,fetches,changes,mean_ied\n");
    let mut table =
        String::from("| rank | page | fetches | changes | mean IED |\n|---:|---|---:|---:|---:|\n");
    for (rank, (url, page)) in top.iter().enumerate() {
        let mean = page.ied_sum / page.changes as f64;
        let _ = writeln!(csv, "{},{url},{},{},{},{mean:.4}", rank + 1, page.host, page.fetches, page.changes);
        let _ = writeln!(table, "| {} | {url} | {} | {} | {mean:.3} |", rank + 1, page.fetches, page.changes);
    }
    write(out.join("most-changed.csv"), &csv)?;
    let ranks: Vec<String> = (1..=top.len()).map(|rank| rank.to_string()).collect();
    let counts = vec![("changes".to_owned(), top.iter().map(|(_, p)| p.changes as f64).collect())];
    let labels = Labels { title: "The most changed pages (ranks as in the table)", x: "rank", y: "changes" };
    bars(&out.join("most-changed.svg"), &labels, &ranks, &counts)?;

    let compared: u64 = summary.by_host.values().map(|t| t.compared).sum();
    let changed: u64 = summary.by_host.values().map(|t| t.changed).sum();
    let (first, last) = summary.periods.unwrap_or_default();
    let readme = format!(
        "# Change events report\n\n\
         {} change events of {} pages on {} hosts, periods {first}–{last}: {compared} downloads compared \
         with a previous one, {changed} of them changed ({:.1} %).\n\n\
         ## Share of compared downloads that changed, per host and period\n\n\
         ![change share by host](change-share-by-host.svg)\n\n\
         The {} hosts with the most comparisons; every host is in [the CSV](change-share-by-host.csv).\n\n\
         ## How much the changed pages changed\n\n\
         ![change degrees](change-degrees.svg)\n\n\
         Changes per degree in bins of 0.1 (`docs/algorithms/change-degree.md`; 1.0 falls in the last): \
         [CSV](change-degrees.csv).\n\n\
         ## Hour of day\n\n\
         ![changes by hour](changes-by-hour.svg)\n\n\
         Changes by the UTC hour of the fetch that detected them (a change happened at some time \
         since the previous download): [CSV](changes-by-hour.csv).\n\n\
         ## The most changed pages\n\n\
         ![most changed pages](most-changed.svg)\n\n{table}\n[CSV](most-changed.csv)\n",
        summary.events,
        summary.pages.len(),
        summary.by_host.len(),
        100.0 * changed as f64 / compared.max(1) as f64,
        hosts.len(),
    );
    write(out.join("README.md"), &readme)?;
    Ok(readme)
}

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl_schemas::{encode, PageRef, UtcTime};

    fn event(
        url: &str,
        host: &str,
        period: u64,
        changed: Option<bool>,
        ied: f64,
        fetched_at_ms: i64,
    ) -> String {
        let fixture = include_str!("../../../schemas/fixtures/v2/change-event.json");
        let mut event: ChangeEvent = decode(fixture.as_bytes()).unwrap();
        (event.page, event.period, event.changed) = (PageRef::new(url, host), period, changed);
        (event.fetched_at, event.fetched_at_ms) = (UtcTime::from_ms(fetched_at_ms), fetched_at_ms);
        match &mut event.degrees {
            Some(degrees) if changed == Some(true) => degrees.ied = ied,
            _ => event.degrees = None,
        }
        String::from_utf8(encode(&event).unwrap()).unwrap()
    }

    #[test]
    fn the_report_counts_what_the_events_say() {
        let hour = MS_PER_HOUR;
        let lines = [
            event("http://a/1", "a", 0, None, 0.0, 0),
            event("http://a/1", "a", 1, Some(true), 0.25, 5 * hour),
            event("http://a/1", "a", 2, Some(true), 0.95, 5 * hour + 10),
            event("http://a/2", "a", 2, Some(false), 0.0, 29 * hour),
            event("http://b/1", "b", 2, Some(true), 1.0, 6 * hour),
            String::new(),
        ];
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        std::fs::write(&events, lines.join("\n")).unwrap();
        let out = dir.path().join("report");
        let args = ChangesArgs { events, out: out.clone(), hosts: 8, pages: 15 };
        let readme = changes_report(&args).unwrap();
        assert!(
            readme.contains("5 change events of 3 pages on 2 hosts, periods 0–2: 4 downloads compared"),
            "{readme}"
        );
        assert!(readme.contains("3 of them changed (75.0 %)"), "{readme}");
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
        assert_eq!(
            read("change-share-by-host.csv"),
            "period,host,compared,changed,share\n1,a,1,1,1.0000\n2,a,2,1,0.5000\n2,b,1,1,1.0000\n"
        );
        let degrees = read("change-degrees.csv");
        let ied: Vec<&str> = degrees.lines().skip(1).map(|row| row.split(',').nth(2).unwrap()).collect();
        assert_eq!(ied, ["0", "0", "1", "0", "0", "0", "0", "0", "0", "2"], "0.25, then 0.95 and 1.0");
        let by_hour = read("changes-by-hour.csv");
        assert!(by_hour.contains("\n5,3,2,0.6667\n") && by_hour.contains("\n6,1,1,1.0000\n"), "{by_hour}");
        assert_eq!(
            read("most-changed.csv"),
            "rank,url,host,fetches,changes,mean_ied\n1,http://a/1,a,3,2,0.6000\n2,http://b/1,b,1,1,1.0000\n"
        );
        for chart in ["change-share-by-host", "change-degrees", "changes-by-hour", "most-changed"] {
            assert!(read(&format!("{chart}.svg")).starts_with("<svg"), "{chart}");
        }
    }

    #[test]
    fn a_line_that_is_not_an_event_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        std::fs::write(&events, format!("{}\n{{\"url\": 1}}\n", event("http://a/1", "a", 0, None, 0.0, 0)))
            .unwrap();
        let args = ChangesArgs { events, out: dir.path().join("out"), hosts: 8, pages: 15 };
        let error = changes_report(&args).unwrap_err().to_string();
        assert!(error.contains("line 2: not a change event"), "{error}");
        std::fs::write(&args.events, "\n").unwrap();
        assert!(matches!(changes_report(&args), Err(ChangesError::Empty(_))));
    }
}
