//! The offline report of a whole grouping (`docs/algorithms/refresh-groups.md` §2–4):
//! each URL's group and crawl time from its weekly change rate, the week's timetable and
//! the server load against crawling every URL daily; `recrawl-scheduler groups`.

use std::collections::BTreeMap;

use recrawl_model::refresh::{daily_load, ChangeHours, CrawlTime, CrawlTimeConfig, FrequencyGroup, Refresh};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::groups::{CrawlSchedule, GroupClasses, HourRule, WEEKDAY_NAMES};

/// Why a rates file cannot be read. Lines count from 1, blank ones included.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum GroupsError {
    #[error("line {line}, column {column}: {reason}")]
    Parse { line: usize, column: usize, reason: String },
    #[error("line {line}: weekly_rate must be a finite number, not negative; got {rate}")]
    Rate { line: usize, rate: f64 },
    #[error("line {line}: hours must hold 24 counts, one per hour of the day; got {len}")]
    Hours { line: usize, len: usize },
}

/// One line of a rates file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RatesLine {
    url: String,
    weekly_rate: f64,
    /// Changes seen in each local hour of the day, 00 to 23.
    hours: Option<Vec<u64>>,
}

/// The `groups` report: each URL's group and crawl time, the week's timetable and the
/// load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupsReport {
    pub rule: HourRule,
    /// In input order.
    pub urls: Vec<UrlGroups>,
    /// Monday to Sunday.
    pub timetable: Vec<TimetableDay>,
    pub load: Load,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UrlGroups {
    pub url: String,
    pub weekly_rate: f64,
    pub group16: FrequencyGroup,
    pub group6: FrequencyGroup,
    /// Of the group crawled by: `group6`, or `group16` under [`GroupClasses::Sixteen`].
    pub crawls_per_week: f64,
    /// Weekdays with a crawl at `hour`, Monday = 0.
    pub weekdays: Vec<u8>,
    pub weekday_names: Vec<&'static str>,
    /// Local crawl hour under the report's rule (`G8` to `G14` crawl again 12 hours later
    /// on some days or all: the timetable has those crawls).
    /// Without `hours` in the input the paper gives no time of day; the URL still needs
    /// one, so it crawls at the configured day crawl hour.
    pub hour: u8,
    /// Null without `hours`, or with no changes in them.
    pub paper_hour: Option<u8>,
    /// Null without `hours`, or with no changes in them.
    pub min_wait_hour: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimetableDay {
    /// Monday = 0.
    pub weekday: u8,
    pub name: &'static str,
    /// By hour, then by `every_weeks`.
    pub crawls: Vec<TimetableCrawl>,
}

/// The URLs crawled on one weekday at one hour, in one of every `every_weeks` weeks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimetableCrawl {
    pub hour: u8,
    /// In input order.
    pub urls: Vec<String>,
    pub every_weeks: u8,
}

/// Server load (`refresh-groups.md` §4).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Load {
    pub requests_per_day: f64,
    /// Requests per day of crawling every URL daily: the number of URLs.
    pub daily_baseline: u64,
    /// `requests_per_day / daily_baseline`; 0 with no URLs.
    pub share: f64,
    /// URLs per group of the report's classification, most crawled first.
    pub groups: Vec<GroupCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupCount {
    pub group: FrequencyGroup,
    pub urls: u64,
}

/// The report of a rates file: JSON lines `{"url": …, "weekly_rate": …, "hours": [24
/// counts]}`, `hours` optional, blank lines skipped.
///
/// The file gives hours of the day but not weekdays, so under [`HourRule::LeastWait`] the
/// weekly and rarer groups keep `config`'s weekday and take the least-wait hour. URLs are
/// crawled, and the load counted, by the groups of `classes`.
pub fn groups_report(
    input: &str,
    config: &CrawlTimeConfig,
    rule: HourRule,
    classes: GroupClasses,
) -> Result<GroupsReport, GroupsError> {
    let mut urls = Vec::new();
    let mut timetable: BTreeMap<(u8, u8, u8), Vec<String>> = BTreeMap::new();
    let mut per_group: Vec<(FrequencyGroup, u64)> =
        classes.groups().into_iter().map(|group| (group, 0)).collect();
    for (line, text) in (1..).zip(input.lines()) {
        if text.trim().is_empty() {
            continue;
        }
        let entry: RatesLine = serde_json::from_str(text).map_err(|error| parse_error(line, &error))?;
        if !entry.weekly_rate.is_finite() || entry.weekly_rate < 0.0 {
            return Err(GroupsError::Rate { line, rate: entry.weekly_rate });
        }
        let hours = match &entry.hours {
            None => ChangeHours::default(),
            Some(counts) => hour_histogram(line, counts)?,
        };
        let Refresh { group16, group6, time, .. } = Refresh::new(entry.weekly_rate, &hours, config);
        // Every change was put on Monday: the weekday part of the least-wait slot is void.
        let time = CrawlTime { min_wait_slot: None, ..time };
        let schedule = CrawlSchedule::from_crawl_time(group16, &time, rule, config, classes);
        for day in 0..7 {
            for hour in schedule.hours_on(day) {
                timetable.entry((day, hour, schedule.every_weeks())).or_default().push(entry.url.clone());
            }
        }
        if let Some((_, count)) = per_group.iter_mut().find(|(group, _)| *group == schedule.group()) {
            *count = count.saturating_add(1);
        }
        let weekdays = schedule.weekdays();
        urls.push(UrlGroups {
            weekday_names: weekdays.iter().map(|&day| WEEKDAY_NAMES[usize::from(day)]).collect(),
            weekdays,
            url: entry.url,
            weekly_rate: entry.weekly_rate,
            group16,
            group6,
            crawls_per_week: schedule.group().crawls_per_week(),
            hour: schedule.hour(),
            paper_hour: time.paper_hour,
            min_wait_hour: time.min_wait_hour,
        });
    }

    let mut days: Vec<TimetableDay> = (0u8..)
        .zip(WEEKDAY_NAMES)
        .map(|(weekday, name)| TimetableDay { weekday, name, crawls: Vec::new() })
        .collect();
    for ((day, hour, every_weeks), urls) in timetable {
        days[usize::from(day)].crawls.push(TimetableCrawl { hour, urls, every_weeks });
    }

    let (requests_per_day, share) = daily_load(&per_group);
    let load = Load {
        requests_per_day,
        daily_baseline: per_group.iter().map(|&(_, urls)| urls).sum(),
        share,
        groups: per_group.into_iter().map(|(group, urls)| GroupCount { group, urls }).collect(),
    };
    Ok(GroupsReport { rule, urls, timetable: days, load })
}

/// serde_json's reason without its "at line 1 column N": each input line is parsed alone,
/// so its line would be wrong.
fn parse_error(line: usize, error: &serde_json::Error) -> GroupsError {
    let message = error.to_string();
    let location = format!(" at line {} column {}", error.line(), error.column());
    let reason = message.strip_suffix(&location).unwrap_or(&message).to_owned();
    GroupsError::Parse { line, column: error.column(), reason }
}

fn hour_histogram(line: usize, counts: &[u64]) -> Result<ChangeHours, GroupsError> {
    let counts: &[u64; 24] = counts.try_into().map_err(|_| GroupsError::Hours { line, len: counts.len() })?;
    Ok(ChangeHours::from_hour_counts(counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 3.3 of the paper with the rates of `refresh-groups.md` §2. u1's hours are its Table 3.4
    /// rows (14 changes, 09:00 to 15:59); u10's is the one row the table shows.
    fn table_3_3() -> String {
        let mut u1 = [0u64; 24];
        for (hour, changes) in [(9, 6), (10, 3), (11, 2), (13, 1), (14, 1), (15, 1)] {
            u1[hour] = changes;
        }
        let mut u10 = [0u64; 24];
        u10[11] = 1;
        let rates = [
            ("u1", 4.7),
            ("u5", 3.3),
            ("u3", 3.3),
            ("u2", 2.7),
            ("u4", 2.3),
            ("u11", 2.3),
            ("u10", 2.0),
            ("u9", 1.0),
            ("u8", 1.0),
            ("u7", 1.0),
            ("u6", 1.0),
            ("u12", 1.0),
            ("u15", 0.7),
            ("u13", 0.3),
            ("u14", 0.0),
        ];
        let mut lines = String::new();
        for (url, rate) in rates {
            let mut line = serde_json::json!({ "url": url, "weekly_rate": rate });
            match url {
                "u1" => line["hours"] = serde_json::json!(u1),
                "u10" => line["hours"] = serde_json::json!(u10),
                _ => {}
            }
            lines.push_str(&format!("{line}\n"));
            if url == "u10" {
                lines.push_str("  \n");
            }
        }
        lines
    }

    fn names(urls: &[&str]) -> Vec<String> {
        urls.iter().map(|&url| url.to_owned()).collect()
    }

    #[test]
    fn the_paper_table_gets_the_paper_groups_and_timetable() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        let report =
            groups_report(&table_3_3(), &CrawlTimeConfig::default(), HourRule::Paper, GroupClasses::Six)
                .unwrap();
        let assigned: Vec<_> =
            report.urls.iter().map(|url| (url.url.as_str(), url.group16, url.group6)).collect();
        let g3 = ["u5", "u3", "u2", "u4", "u11", "u10"];
        let g1 = ["u9", "u8", "u7", "u6", "u12", "u15"];
        let mut expected = vec![("u1", Weekly(5), Weekly(7))];
        expected.extend(
            [("u5", 3), ("u3", 3), ("u2", 3), ("u4", 2), ("u11", 2), ("u10", 2)]
                .map(|(url, crawls)| (url, Weekly(crawls), Weekly(3))),
        );
        expected.extend(g1.map(|url| (url, Weekly(1), Weekly(1))));
        expected.extend([("u13", Biweekly, Biweekly), ("u14", Fourweekly, Fourweekly)]);
        assert_eq!(assigned, expected);

        let u1 = &report.urls[0];
        assert_eq!((u1.paper_hour, u1.hour, u1.min_wait_hour), (Some(0), 0, Some(16)));
        assert_eq!(u1.weekday_names, WEEKDAY_NAMES);
        assert_eq!(report.urls[1].weekday_names, ["Mon", "Wed", "Fri"]);
        let u14 = &report.urls[14];
        assert_eq!((u14.paper_hour, u14.hour, u14.weekdays.as_slice()), (None, 0, &[5][..]));

        let crawl =
            |hour, urls: &[&str], every_weeks| TimetableCrawl { hour, urls: names(urls), every_weeks };
        let u1_and_g3: Vec<&str> = ["u1"].into_iter().chain(g3).collect();
        let u1_and_g1: Vec<&str> = ["u1"].into_iter().chain(g1).collect();
        let days: Vec<_> =
            report.timetable.iter().map(|day| (day.weekday, day.name, day.crawls.clone())).collect();
        assert_eq!(
            days,
            [
                (0, "Mon", vec![crawl(0, &u1_and_g3, 1)]),
                (1, "Tue", vec![crawl(0, &["u1"], 1)]),
                (2, "Wed", vec![crawl(0, &u1_and_g3, 1)]),
                (3, "Thu", vec![crawl(0, &["u1"], 1)]),
                (4, "Fri", vec![crawl(0, &u1_and_g3, 1)]),
                (5, "Sat", vec![crawl(0, &u1_and_g1, 1), crawl(0, &["u13"], 2), crawl(0, &["u14"], 4)]),
                (6, "Sun", vec![crawl(0, &["u1"], 1)]),
            ]
        );

        // By hand: u1 7/7 a day, six G3 URLs 3/7, six G1 URLs 1/7, u13 0.5/7, u14 0.25/7:
        // (7 + 18 + 6 + 0.5 + 0.25) / 7 = 31.75 / 7 ≈ 4.536 requests a day of 15 (30.2%).
        let load = &report.load;
        assert!((load.requests_per_day - 31.75 / 7.0).abs() < 1e-9, "{}", load.requests_per_day);
        assert_eq!(load.daily_baseline, 15);
        assert!((load.share - 31.75 / 7.0 / 15.0).abs() < 1e-9, "{}", load.share);
        let counts: Vec<_> = load.groups.iter().map(|count| (count.group.to_string(), count.urls)).collect();
        let expected = [("G14", 0), ("G7", 1), ("G3", 6), ("G1", 6), ("2G1", 1), ("4G1", 1)];
        assert_eq!(counts, expected.map(|(group, urls)| (group.to_owned(), urls)));
    }

    #[test]
    fn least_wait_moves_the_hour_after_the_busiest_changes() {
        let report =
            groups_report(&table_3_3(), &CrawlTimeConfig::default(), HourRule::LeastWait, GroupClasses::Six)
                .unwrap();
        let hours: Vec<_> = report.urls.iter().map(|url| (url.url.as_str(), url.hour)).take(8).collect();
        let expected =
            [("u1", 16), ("u5", 0), ("u3", 0), ("u2", 0), ("u4", 0), ("u11", 0), ("u10", 12), ("u9", 0)];
        assert_eq!(hours, expected);
        // A rates file has no weekdays: the weekly groups stay on Saturday.
        assert!(report.urls[7..].iter().all(|url| url.weekdays == [5]));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rule"], "least-wait");
        assert_eq!(json["urls"][0]["group6"], "G7");
    }

    #[test]
    fn night_changes_and_twice_daily_crawls_in_the_report() {
        let mut night = [0u64; 24];
        night[2] = 3;
        night[20] = 1;
        let input = format!(
            "{}\n{}\n",
            serde_json::json!({ "url": "owl", "weekly_rate": 7.0, "hours": night }),
            serde_json::json!({ "url": "busy", "weekly_rate": 20.0, "hours": night }),
        );
        let report =
            groups_report(&input, &CrawlTimeConfig::default(), HourRule::Paper, GroupClasses::Six).unwrap();
        assert_eq!((report.urls[0].paper_hour, report.urls[0].hour), (Some(12), 12));
        assert_eq!(report.urls[1].group6, FrequencyGroup::Weekly(14));
        for day in &report.timetable {
            let crawls: Vec<_> = day.crawls.iter().map(|crawl| (crawl.hour, crawl.urls.clone())).collect();
            assert_eq!(crawls, [(0, names(&["busy"])), (12, names(&["owl", "busy"]))], "{}", day.name);
        }
        assert!((report.load.requests_per_day - 3.0).abs() < 1e-9);
    }

    #[test]
    fn bad_lines_are_named() {
        let config = CrawlTimeConfig::default();
        let good = r#"{"url": "a", "weekly_rate": 1}"#;
        let cases = [
            (format!("{good}\n\n{{\"url\": \"b\"}}"), 3),
            (format!("{good}\n{{\"url\": \"b\", \"weekly_rate\": -1}}"), 2),
            (r#"{"url": "b", "weekly_rate": 1, "hours": [1, 2]}"#.to_owned(), 1),
            (format!("{good}\n{good}\n{{\"url\": \"b\", \"weekly_rate\": 1, \"rate\": 2}}"), 3),
            (format!("{{\"url\": \"b\", \"weekly_rate\": 1, \"hours\": [{}-1]}}", "0, ".repeat(23)), 1),
            (format!("{{\"url\": \"b\", \"weekly_rate\": 1, \"hours\": [{}0.5]}}", "0, ".repeat(23)), 1),
            ("not json".to_owned(), 1),
            (format!("{good}\n{good}\n{good}\n{good}\n{{\"url\": \"b\", \"weekly_rate\": 1e999}}"), 5),
        ];
        for (input, line) in cases {
            let error = groups_report(&input, &config, HourRule::Paper, GroupClasses::Six).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with(&format!("line {line}")), "{message}");
            assert!(!message.contains("at line"), "{message}");
        }
        let error =
            groups_report("{\"url\": \"b\"}", &config, HourRule::Paper, GroupClasses::Six).unwrap_err();
        assert_eq!(error.to_string(), "line 1, column 12: missing field `weekly_rate`");
        let empty = groups_report("\n \n", &config, HourRule::Paper, GroupClasses::Six).unwrap();
        assert!(empty.urls.is_empty());
        assert_eq!((empty.load.requests_per_day, empty.load.daily_baseline, empty.load.share), (0.0, 0, 0.0));
    }

    #[test]
    fn the_report_by_sixteen_groups() {
        use FrequencyGroup::{Biweekly, Weekly};
        let mut night = [0u64; 24];
        night[2] = 3;
        let input = [
            serde_json::json!({ "url": "u2", "weekly_rate": 2.4 }),
            serde_json::json!({ "url": "owl", "weekly_rate": 9.0, "hours": night }),
            serde_json::json!({ "url": "u3", "weekly_rate": 3.0 }),
            serde_json::json!({ "url": "u13", "weekly_rate": 0.3 }),
            serde_json::json!({ "url": "u1", "weekly_rate": 4.7 }),
        ]
        .map(|line| format!("{line}\n"))
        .concat();
        let report =
            groups_report(&input, &CrawlTimeConfig::default(), HourRule::Paper, GroupClasses::Sixteen)
                .unwrap();
        let assigned: Vec<_> = report
            .urls
            .iter()
            .map(|url| (url.url.as_str(), url.group16, url.group6, url.crawls_per_week, url.hour))
            .collect();
        assert_eq!(
            assigned,
            [
                ("u2", Weekly(2), Weekly(3), 2.0, 0),
                ("owl", Weekly(9), Weekly(7), 9.0, 12),
                ("u3", Weekly(3), Weekly(3), 3.0, 0),
                ("u13", Biweekly, Biweekly, 0.5, 0),
                ("u1", Weekly(5), Weekly(7), 5.0, 0),
            ]
        );
        assert_eq!(report.urls[0].weekday_names, ["Mon", "Thu"]);
        assert_eq!(report.urls[4].weekday_names, ["Mon", "Tue", "Wed", "Fri", "Sat"]);

        let crawl =
            |hour, urls: &[&str], every_weeks| TimetableCrawl { hour, urls: names(urls), every_weeks };
        let owl = crawl(12, &["owl"], 1);
        let days: Vec<_> = report.timetable.iter().map(|day| (day.name, day.crawls.clone())).collect();
        assert_eq!(
            days,
            [
                ("Mon", vec![crawl(0, &["u2", "owl", "u3", "u1"], 1), owl.clone()]),
                ("Tue", vec![crawl(0, &["u1"], 1), owl.clone()]),
                ("Wed", vec![crawl(0, &["u3", "u1"], 1), owl.clone()]),
                ("Thu", vec![crawl(0, &["u2", "owl"], 1), owl.clone()]),
                ("Fri", vec![crawl(0, &["u3", "u1"], 1), owl.clone()]),
                ("Sat", vec![crawl(0, &["u1"], 1), crawl(0, &["u13"], 2), owl.clone()]),
                ("Sun", vec![owl]),
            ]
        );

        // (2 + 9 + 3 + 0.5 + 5) / 7 requests a day of 5.
        let load = &report.load;
        assert!((load.requests_per_day - 19.5 / 7.0).abs() < 1e-9, "{}", load.requests_per_day);
        assert_eq!(load.daily_baseline, 5);
        assert!((load.share - 19.5 / 7.0 / 5.0).abs() < 1e-9, "{}", load.share);
        let counts: Vec<_> = load.groups.iter().map(|count| (count.group, count.urls)).collect();
        let expected: Vec<_> = GroupClasses::Sixteen
            .groups()
            .into_iter()
            .map(|group| (group, u64::from(matches!(group, Weekly(9 | 5 | 3 | 2) | Biweekly))))
            .collect();
        assert_eq!(counts, expected);
    }
}
