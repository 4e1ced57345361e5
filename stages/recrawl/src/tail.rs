//! `recrawl tail`: a topic's messages for people and their tools, as JSON lines or a table,
//! filtered, up to the end of the topic (or on, with `--follow`).

use std::time::Duration;

use clap::{Args, ValueEnum};
use recrawl_common::config::ClusterArgs;
use recrawl_common::format_http_date;
use recrawl_common::service::{print_line, stop_signal, StdoutError};

use crate::observe::{ObserveError, Observed, Observer, Position, OBSERVABLE};
use crate::sim::parse_fraction;

/// Past where the topic ended at start, tail reads on while records keep coming within
/// this long: a broker can under-report a partition's end (tansu 0.6 does after
/// multi-record batches), and what it serves beyond it arrives at once.
const SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TailFormat {
    /// One JSON object per line, as `jq`, DuckDB's `read_json_auto` or pandas read them.
    Jsonl,
    /// One line per message: when it was written, its period, what it says.
    Table,
}

#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// Topic without prefix: fetch, fetch-results, links, change-events, estimates,
    /// distributions, host-trust, dead-letter.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(OBSERVABLE))]
    pub topic: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub filter: Filter,
    /// How to print each message.
    #[arg(long, value_enum, default_value = "jsonl", env = "RECRAWL_TAIL_FORMAT")]
    pub format: TailFormat,
    /// Keep reading past the end of the topic until SIGTERM or SIGINT; without it, tail
    /// stops where the topic ended when it started.
    #[arg(long, env = "RECRAWL_TAIL_FOLLOW")]
    pub follow: bool,
    /// Stop after printing this many messages.
    #[arg(long, env = "RECRAWL_TAIL_LIMIT")]
    pub limit: Option<u64>,
}

/// Which messages are printed; every condition given must hold.
#[derive(Debug, Clone, Default, Args)]
pub struct Filter {
    /// Only messages about this host (a distribution's group counts as its host).
    #[arg(long, env = "RECRAWL_TAIL_HOST")]
    pub host: Option<String>,
    /// Only change events that found the page changed.
    #[arg(long, env = "RECRAWL_TAIL_CHANGED")]
    pub changed: bool,
    /// Only change events whose degree of change (IED, 0 to 1) is at least this.
    #[arg(long, value_parser = parse_fraction, env = "RECRAWL_TAIL_MIN_DEGREE")]
    pub min_degree: Option<f64>,
    /// Only messages written within this long before now: 90s, 30m, 24h, 7d.
    #[arg(long, value_parser = parse_age, env = "RECRAWL_TAIL_SINCE")]
    pub since: Option<Duration>,
}

/// `90s`, `30m`, `24h`, `7d`: a whole number and its unit.
pub fn parse_age(raw: &str) -> Result<Duration, String> {
    let expected = || format!("{raw:?}: expected a whole number and s, m, h or d, e.g. 24h");
    let split = raw.len().checked_sub(1).filter(|&at| raw.is_char_boundary(at)).ok_or_else(expected)?;
    let (number, unit) = raw.split_at(split);
    let number: u64 = number.parse().map_err(|_| expected())?;
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(expected()),
    };
    number.checked_mul(seconds_per).map(Duration::from_secs).ok_or_else(expected)
}

impl Filter {
    /// Whether `observed`, written at `written_ms` (Unix ms, if known), is printed at `now_ms`.
    pub fn matches(&self, observed: &Observed, written_ms: Option<i64>, now_ms: i64) -> bool {
        if let (Some(age), Some(written)) = (self.since, written_ms) {
            let oldest = now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            if written < oldest {
                return false;
            }
        }
        if let Some(host) = &self.host {
            if host_of(observed) != Some(host.as_str()) {
                return false;
            }
        }
        if self.changed || self.min_degree.is_some() {
            let Observed::Change(event) = observed else { return false };
            if self.changed && event.changed != Some(true) {
                return false;
            }
            if let Some(min) = self.min_degree {
                if !event.degrees.as_ref().is_some_and(|d| d.ied >= min) {
                    return false;
                }
            }
        }
        true
    }
}

fn host_of(observed: &Observed) -> Option<&str> {
    match observed {
        Observed::Pick(m) => Some(&m.host),
        Observed::Result(m) => Some(&m.host),
        Observed::Link(m) => Some(&m.page.host),
        Observed::Announcement(m) => Some(&m.page.host),
        Observed::Change(m) => Some(&m.page.host),
        Observed::Estimate(m) => Some(&m.page.host),
        Observed::Distribution(m) => Some(&m.group),
        Observed::Trust(m) => Some(&m.host),
        Observed::DeadLetter(_) | Observed::Undecodable { .. } => None,
    }
}

/// One table line: when the message was written (HTTP date, UTC), its period, what it says.
pub fn table_row(observed: &Observed, written_ms: Option<i64>) -> String {
    let written = written_ms.and_then(format_http_date).unwrap_or_else(|| "-".to_owned());
    let (period, what) = match observed {
        Observed::Pick(m) => (Some(m.period), format!("pick {:?} {}", m.reason, m.url)),
        Observed::Result(m) => (
            Some(m.period),
            format!(
                "{} {} {}",
                m.outcome.as_str(),
                m.http_status.map_or("-".into(), |s| s.to_string()),
                m.url
            ),
        ),
        Observed::Link(m) => (Some(m.period), format!("link {}", m.page.url)),
        Observed::Announcement(m) => {
            (Some(m.period), format!("announced by {} {} {}", m.document.as_str(), m.source.url, m.page.url))
        }
        Observed::Change(m) => {
            let verdict = match (m.downloaded, m.first_seen, m.changed) {
                (false, ..) => "not downloaded".to_owned(),
                (true, true, _) => "first seen".to_owned(),
                (true, false, Some(true)) => {
                    format!("changed {:.3}", m.degrees.as_ref().map_or(f64::NAN, |d| d.ied))
                }
                _ => "unchanged".to_owned(),
            };
            (Some(m.period), format!("{verdict} {}", m.page.url))
        }
        Observed::Estimate(m) => {
            let rate = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.2}"));
            (
                Some(m.period),
                format!("DR {} MR {} {}", rate(m.download_rate), rate(m.modification_rate), m.page.url),
            )
        }
        Observed::Distribution(m) => {
            (Some(m.period), format!("group {} partition {}: {} URLs", m.group, m.partition, m.urls))
        }
        Observed::Trust(m) => (
            Some(m.period),
            format!(
                "host {} partition {}: {} ({} confirmed, {} agreed, {} refuted, {} silent)",
                m.host,
                m.partition,
                m.trust.as_str(),
                m.confirmed,
                m.agreed,
                m.refuted,
                m.silent
            ),
        ),
        Observed::DeadLetter(letter) => {
            (None, format!("dead letter {} from {}: {}", letter.kind, letter.stage, letter.reason))
        }
        Observed::Undecodable { error, .. } => (None, format!("undecodable: {error}")),
    };
    let period = period.map_or_else(|| "-".to_owned(), |p| p.to_string());
    format!("{written:<29}  {period:>7}  {what}")
}

#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Stdout(#[from] StdoutError),
    #[error("installing the signal handler: {0}")]
    Signal(std::io::Error),
}

/// Prints `args.topic`'s messages that pass the filter, from the beginning.
pub async fn run(args: &TailArgs) -> Result<(), TailError> {
    let stopped = stop_signal().map_err(TailError::Signal)?;
    tokio::pin!(stopped);
    let observer = Observer::new(&args.cluster, &[args.topic.as_str()]).await?;
    let mut unread = observer.ends_at_start().clone();
    // On stderr, so what goes to stdout stays clean for a pipe.
    let until = if args.follow { "SIGTERM or SIGINT stops" } else { "to where it ends now" };
    eprintln!("reading {} from its beginning, {until}", args.topic);
    let mut printed = 0u64;
    loop {
        if args.limit.is_some_and(|limit| printed >= limit) {
            return Ok(());
        }
        let caught_up = !args.follow && unread.is_empty();
        let (observed, Position { topic, partition, offset, timestamp_ms }) = tokio::select! {
            next = observer.next_at() => next?,
            _ = stopped.as_mut() => return Ok(()),
            _ = tokio::time::sleep(SETTLE), if caught_up => return Ok(()),
        };
        if unread.get(&(topic.clone(), partition)).is_some_and(|end| offset.saturating_add(1) >= *end) {
            unread.remove(&(topic, partition));
        }
        if args.filter.matches(&observed, timestamp_ms, recrawl_common::unix_ms()) {
            match args.format {
                TailFormat::Jsonl => print_line(observed.json_line())?,
                TailFormat::Table => print_line(table_row(&observed, timestamp_ms))?,
            }
            printed = printed.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use recrawl_diff::change::{DiffSettings, Differ};
    use recrawl_schemas::{ChangeEvent, FetchResult, PagePick};

    use super::*;

    const URL: &str = "http://a.example/page.html";

    /// A page's first download, then a download with one word of four replaced (IED 0.25),
    /// as the diff stage's own code sees them.
    fn first_then_changed() -> (ChangeEvent, ChangeEvent) {
        let mut differ = Differ::new(DiffSettings::default());
        let mut kept = None;
        let page = |period, body: &str| FetchResult::html_page(URL, "a.example", period, body);
        let first = differ.apply(&mut kept, &page(1, "<p>one two three four</p>"));
        let changed = differ.apply(&mut kept, &page(2, "<p>one two three five</p>"));
        (first, changed)
    }

    #[test]
    fn ages_are_a_number_and_a_unit() {
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_age("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in ["", "d", "7", "7w", "-1d", "1.5h", "99999999999999999999d", "7дн"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_condition_given_must_hold() {
        let now = 1_800_000_000_000;
        let (first, changed) = first_then_changed();
        let (first, changed) = (Observed::Change(first), Observed::Change(changed));
        let on = |filter: Filter, observed: &Observed, written: Option<i64>| {
            filter.matches(observed, written, now)
        };
        assert!(on(Filter::default(), &first, None));
        assert!(on(Filter { host: Some("a.example".into()), ..Filter::default() }, &changed, None));
        assert!(!on(Filter { host: Some("b.example".into()), ..Filter::default() }, &changed, None));
        assert!(on(Filter { changed: true, min_degree: Some(0.25), ..Filter::default() }, &changed, None));
        assert!(!on(Filter { min_degree: Some(0.26), ..Filter::default() }, &changed, None));
        assert!(!on(Filter { changed: true, ..Filter::default() }, &first, None));
        // Conditions on change events exclude every other kind of message.
        let pick = Observed::Pick(PagePick::discovery(URL, 3).expect("pick"));
        assert!(on(Filter { host: Some("a.example".into()), ..Filter::default() }, &pick, None));
        assert!(!on(Filter { changed: true, ..Filter::default() }, &pick, None));
        let week = Filter { since: Some(Duration::from_secs(7 * 86_400)), ..Filter::default() };
        assert!(on(week.clone(), &changed, Some(now - 6 * 86_400_000)));
        assert!(!on(week.clone(), &changed, Some(now - 8 * 86_400_000)));
        assert!(on(week, &changed, None), "a message without a timestamp is not judged by age");
    }

    #[test]
    fn table_rows_say_when_which_period_and_what() {
        let (first, changed) = first_then_changed();
        let row = table_row(&Observed::Change(changed), Some(86_400_000));
        assert!(row.starts_with("Fri, 02 Jan 1970 00:00:00 GMT"), "{row}");
        assert!(row.ends_with(&format!("  2  changed 0.250 {URL}")), "{row}");
        assert!(table_row(&Observed::Change(first), None).ends_with(&format!("  1  first seen {URL}")));
        let undecodable = Observed::Undecodable { topic: "t".into(), error: "bad".into() };
        assert!(table_row(&undecodable, None).starts_with("-  "));
    }
}
