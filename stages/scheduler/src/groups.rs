//! Refresh-group crawl schedules (`docs/algorithms/refresh-groups.md`): when a URL of a 6-group (or,
//! on request, a 16-group) is due, under the paper's crawl hour or the least-wait one. The
//! offline report of a whole grouping is [`crate::groups_report`].
//!
//! Pure code on top of `recrawl_model::refresh`: the scheduler stage's `groups` policy,
//! the `recrawl-scheduler groups` command and the simulator all call these functions, so
//! the three cannot disagree on which URL is crawled when.
//!
//! Times are Unix milliseconds; weekdays and hours are local (UTC plus an offset in
//! minutes), weekdays count from Monday = 0.

use std::fmt;
use std::num::NonZeroU8;

use recrawl_model::refresh::{
    crawl_time, ChangeHours, CrawlTime, CrawlTimeConfig, FrequencyGroup, DAY_MS, HOUR_MS, MINUTE_MS, WEEK_MS,
};
use recrawl_schemas::RefreshPlan;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Monday 1970-01-05T00:00, local: week 0. Counting weeks from a fixed Monday lets every
/// scheduler instance agree on the even (and ≡ 0 mod 4) weeks without talking.
const WEEK_ZERO_MS: i64 = 345_600_000;
const EVERY_DAY: u8 = 0b111_1111;
const SLOTS_PER_WEEK: u8 = 7 * 24;

/// Short weekday names, Monday first.
pub const WEEKDAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Which classification the `groups` policy crawls by (`refresh-groups.md` §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupClasses {
    /// The paper's six deployed groups: G14, G7, G3, G1, 2G1, 4G1.
    #[default]
    Six,
    /// The sixteen of the paper's first table: G1 to G14, 2G1, 4G1.
    Sixteen,
}

impl GroupClasses {
    /// The group a URL of 16-group `group16` is crawled by.
    fn classify(self, group16: FrequencyGroup) -> FrequencyGroup {
        match self {
            GroupClasses::Six => group16.six(),
            GroupClasses::Sixteen => group16,
        }
    }

    /// The groups of this classification, most crawled first.
    pub(crate) fn groups(self) -> Vec<FrequencyGroup> {
        (1..=14)
            .rev()
            .map(FrequencyGroup::Weekly)
            .chain([FrequencyGroup::Biweekly, FrequencyGroup::Fourweekly])
            .filter(|&group| self.classify(group) == group)
            .collect()
    }
}

/// A 16-group in one byte where a [`FrequencyGroup`] takes two: `G1` … `G14` as their
/// crawls a week, `2G1` as 15 and `4G1` as 16. Never 0, so an `Option<CrawlSchedule>` takes
/// no more room than a schedule.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct GroupCode(NonZeroU8);

impl GroupCode {
    /// `Weekly` counts outside 1..=14 are clamped, as [`FrequencyGroup::six`] does.
    fn of(group: FrequencyGroup) -> GroupCode {
        let code = match group {
            FrequencyGroup::Weekly(crawls) => crawls.clamp(1, 14),
            FrequencyGroup::Biweekly => 15,
            FrequencyGroup::Fourweekly => 16,
        };
        GroupCode(NonZeroU8::new(code).unwrap_or(NonZeroU8::MIN))
    }

    fn group(self) -> FrequencyGroup {
        match self.0.get() {
            15 => FrequencyGroup::Biweekly,
            16 => FrequencyGroup::Fourweekly,
            crawls => FrequencyGroup::Weekly(crawls),
        }
    }
}

/// The group's name: a schedule's `Debug` output reads as its group, not as a code.
impl fmt::Debug for GroupCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.group(), f)
    }
}

/// Which hour (and, for weekly and rarer groups, which weekday) to crawl at (`refresh-groups.md` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HourRule {
    /// The paper's rule: midnight after daytime changes, noon after night-time ones.
    #[default]
    Paper,
    /// The slot that leaves the observed changes least time unfetched.
    LeastWait,
}

/// A URL's crawl schedule under the `groups` policy: its group, crawl weekdays and local
/// hour, in three bytes (it sits in the scheduler's per-URL record).
///
/// Scheduled instants: `G14` every day at `hour` and `hour + 12` (mod 24), `G7` every day
/// at `hour`, `G3` at `hour` on each of its weekdays, `G1` on its weekday at `hour`, `2G1`
/// likewise in even weeks only and `4G1` in weeks ≡ 0 mod 4, weeks counted in local time
/// from Monday 1970-01-05.
///
/// The other 16-groups ([`GroupClasses::Sixteen`]) follow a rule of this product's, as the
/// paper gives weekdays to its six deployed groups only: `Gi` for `i` in 2, 4, 5, 6 crawls
/// at `hour` on `i` weekdays spread from Monday, days ⌊k·7/i⌋ for k < i (`G2` Mon, Thu; `G4`
/// Mon, Tue, Thu, Sat), the rule that gives `G3` the paper's Mon, Wed, Fri; `Gi` for `i` in
/// 8 … 13 crawls every day at `hour` and at `hour + 12` on `i − 7` days spread the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CrawlSchedule {
    group: GroupCode,
    /// Bit `d` set: crawl on weekday `d` at `hour`. Never 0. The days of a second crawl
    /// follow from the group alone, so they take no room.
    weekdays: u8,
    /// Local hour, 0..24.
    hour: u8,
}

impl CrawlSchedule {
    /// The schedule of `group` (taken to its 6-group) at local `hour` (mod 24).
    ///
    /// Daily groups crawl every day whatever `weekdays` says; `G3` crawls on every listed
    /// weekday, the weekly and rarer groups on the first one. Weekdays of 7 or more are
    /// ignored; with none left, the default [`CrawlTimeConfig`]'s weekdays are used, so a
    /// schedule always has a next crawl.
    pub fn new(group: FrequencyGroup, weekdays: &[u8], hour: u8) -> Self {
        CrawlSchedule::sixteen(group.six(), weekdays, hour)
    }

    /// The schedule of `group` kept as it is, a 16-group (a 6-group gets the schedule
    /// [`new`](Self::new) gives it), at local `hour` (mod 24). `G3`, `G1`, `2G1` and `4G1`
    /// take `weekdays` as `new` does; the other groups crawl on their spread days and
    /// ignore them. A `Weekly` count outside 1..=14 is clamped.
    pub fn sixteen(group: FrequencyGroup, weekdays: &[u8], hour: u8) -> Self {
        let group = GroupCode::of(group);
        let mut mask = weekday_mask(group.group(), weekdays);
        if mask == 0 {
            let defaults =
                crawl_time(&ChangeHours::default(), group.group(), &CrawlTimeConfig::default()).weekdays;
            mask = weekday_mask(group.group(), &defaults).max(1);
        }
        CrawlSchedule { group, weekdays: mask, hour: hour % 24 }
    }

    /// The `groups` policy's schedule of an estimator refresh plan, by its `group6` or, with
    /// [`GroupClasses::Sixteen`], its `group16`. A
    /// plan does not carry the estimator's configuration, so a URL with no changes seen
    /// crawls at the default [`CrawlTimeConfig`]'s day crawl hour.
    pub fn from_plan(plan: &RefreshPlan, rule: HourRule, classes: GroupClasses) -> CrawlSchedule {
        let group = match classes {
            GroupClasses::Six => plan.group6,
            GroupClasses::Sixteen => plan.group16,
        };
        let times = Times {
            weekdays: &plan.weekdays,
            paper_hour: plan.paper_hour,
            min_wait_hour: plan.min_wait_hour,
            min_wait_slot: plan.min_wait_slot,
        };
        choose(classes.classify(group), &times, rule, CrawlTimeConfig::default().day_crawl_hour)
    }

    /// The schedule of a [`crawl_time`] result for a URL of 16-group `group` (for the
    /// simulator and the `groups` report): as [`from_plan`](Self::from_plan) would make it
    /// from the plan built out of `time`, except that a URL with no changes seen crawls at
    /// `config`'s day crawl hour.
    pub fn from_crawl_time(
        group: FrequencyGroup,
        time: &CrawlTime,
        rule: HourRule,
        config: &CrawlTimeConfig,
        classes: GroupClasses,
    ) -> CrawlSchedule {
        let times = Times {
            weekdays: &time.weekdays,
            paper_hour: time.paper_hour,
            min_wait_hour: time.min_wait_hour,
            min_wait_slot: time.min_wait_slot,
        };
        choose(classes.classify(group), &times, rule, config.day_crawl_hour)
    }

    /// The group: the 6-group, unless made by [`sixteen`](Self::sixteen) or under
    /// [`GroupClasses::Sixteen`].
    pub fn group(self) -> FrequencyGroup {
        self.group.group()
    }

    /// Weekdays with a crawl at [`hour`](Self::hour), ascending, Monday = 0.
    pub fn weekdays(self) -> Vec<u8> {
        days_of(self.weekdays)
    }

    /// Weekdays with a second crawl 12 hours after [`hour`](Self::hour), ascending: every
    /// day for `G14`, `i − 7` spread days for `Gi` with `i` in 8 … 13, none otherwise.
    pub fn second_weekdays(self) -> Vec<u8> {
        days_of(self.second_days())
    }

    /// The first crawl hour of a crawl day (`G8` to `G14` crawl again 12 hours later on
    /// their [`second_weekdays`](Self::second_weekdays)).
    pub fn hour(self) -> u8 {
        self.hour
    }

    /// Crawl hours, ascending: two for `G8` to `G14` (the second of `hour` and
    /// `hour + 12` only on their [`second_weekdays`](Self::second_weekdays)), one otherwise.
    pub fn hours(self) -> Vec<u8> {
        let mut hours = vec![self.hour];
        if self.second_days() != 0 {
            hours.push(self.second_hour());
            hours.sort_unstable();
        }
        hours
    }

    /// 1, or 2 for `2G1` and 4 for `4G1`: the weeks between crawl weeks.
    pub fn every_weeks(self) -> u8 {
        match self.group() {
            FrequencyGroup::Weekly(_) => 1,
            FrequencyGroup::Biweekly => 2,
            FrequencyGroup::Fourweekly => 4,
        }
    }

    /// The latest scheduled crawl instant `t` with `after_ms < t <= now_ms`, or `None`:
    /// a URL last crawled at `after_ms` is due at `now_ms` when this is `Some`.
    pub fn latest_due(self, after_ms: i64, now_ms: i64, utc_offset_minutes: i32) -> Option<i64> {
        if after_ms >= now_ms {
            return None;
        }
        // i128 throughout: no input comes near its limits, so the saturating operations are
        // exact and the answer is clamped only at the end.
        let offset_ms = local_offset_ms(utc_offset_minutes);
        let now = i128::from(now_ms).saturating_add(offset_ms);
        let period = i128::from(self.every_weeks());
        let week = week_of(now);
        // The last crawl week at or before `now`, and the one before it: the latter holds
        // the answer when `now` comes before the first crawl of the former.
        let last = week.saturating_sub(week.rem_euclid(period));
        [last, last.saturating_sub(period)]
            .into_iter()
            .flat_map(|week| self.instants_in(week).rev())
            .find(|&instant| instant <= now)
            .map(|instant| instant.saturating_sub(offset_ms))
            .filter(|&instant| instant > i128::from(after_ms))
            .and_then(|instant| i64::try_from(instant).ok())
    }

    /// The first scheduled instant strictly after `after_ms`; `i64::MAX` when that is too
    /// late for an `i64`.
    pub fn next_after(self, after_ms: i64, utc_offset_minutes: i32) -> i64 {
        let offset_ms = local_offset_ms(utc_offset_minutes);
        let after = i128::from(after_ms).saturating_add(offset_ms);
        let period = i128::from(self.every_weeks());
        let week = week_of(after);
        // The first crawl week at or after `after`, and the next: the latter's first crawl
        // is in a later week, so it is after `after`.
        let first = week.saturating_add(week.saturating_neg().rem_euclid(period));
        [first, first.saturating_add(period)]
            .into_iter()
            .flat_map(|week| self.instants_in(week))
            .find(|&instant| instant > after)
            .and_then(|instant| i64::try_from(instant.saturating_sub(offset_ms)).ok())
            .unwrap_or(i64::MAX)
    }

    /// Bit `d` set: a second crawl on weekday `d`, at `hour + 12` (mod 24).
    fn second_days(self) -> u8 {
        match self.group() {
            FrequencyGroup::Weekly(crawls) => spread(crawls.saturating_sub(7)),
            FrequencyGroup::Biweekly | FrequencyGroup::Fourweekly => 0,
        }
    }

    /// The hour of the second crawl of a day, 12 hours after [`hour`](Self::hour).
    fn second_hour(self) -> u8 {
        // Never saturates: `hour` is below 24.
        self.hour.saturating_add(12) % 24
    }

    /// Crawl hours of weekday `day`, ascending: from `hour` 12 on, the second crawl comes
    /// first.
    pub(crate) fn hours_on(self, day: u8) -> impl DoubleEndedIterator<Item = u8> {
        let first = (self.weekdays & 1 << day != 0).then_some(self.hour);
        let second = (self.second_days() & 1 << day != 0).then_some(self.second_hour());
        let (early, late) = if self.hour < 12 { (first, second) } else { (second, first) };
        early.into_iter().chain(late)
    }

    /// Scheduled instants of a crawl week as milliseconds after its local Monday 00:00 (of
    /// week 0), ascending.
    fn week_offsets(self) -> impl DoubleEndedIterator<Item = i128> {
        let start = i128::from(WEEK_ZERO_MS);
        (0..7u8).flat_map(move |day| {
            let midnight = start.saturating_add(i128::from(day).saturating_mul(i128::from(DAY_MS)));
            self.hours_on(day).map(move |hour| {
                midnight.saturating_add(i128::from(hour).saturating_mul(i128::from(HOUR_MS)))
            })
        })
    }

    /// Scheduled instants of crawl week `week`, local milliseconds, ascending.
    fn instants_in(self, week: i128) -> impl DoubleEndedIterator<Item = i128> {
        let week_start = week.saturating_mul(i128::from(WEEK_MS));
        self.week_offsets().map(move |offset| week_start.saturating_add(offset))
    }
}

/// The week, counted from week 0, of local time `local_ms`.
fn week_of(local_ms: i128) -> i128 {
    local_ms.saturating_sub(i128::from(WEEK_ZERO_MS)).div_euclid(i128::from(WEEK_MS))
}

fn local_offset_ms(utc_offset_minutes: i32) -> i128 {
    i128::from(utc_offset_minutes).saturating_mul(i128::from(MINUTE_MS))
}

/// Weekdays of a day mask, ascending.
fn days_of(mask: u8) -> Vec<u8> {
    (0..7).filter(|&day| mask & 1 << day != 0).collect()
}

/// The mask of `days` (0 to 7) weekdays spread over the week from Monday: ⌊k·7/days⌋ for
/// k < days.
fn spread(days: u8) -> u8 {
    (0..days).filter_map(|k| k.checked_mul(7)?.checked_div(days)).fold(0, |mask, day| mask | 1 << day)
}

/// Days with a crawl at the hour of `group` (1..=14 crawls if `Weekly`): 0 when it takes
/// them from `weekdays` and none of those is valid.
fn weekday_mask(group: FrequencyGroup, weekdays: &[u8]) -> u8 {
    let mut valid = weekdays.iter().copied().filter(|&day| day < 7);
    match group {
        FrequencyGroup::Weekly(3) => valid.fold(0, |mask, day| mask | 1 << day),
        FrequencyGroup::Weekly(1) | FrequencyGroup::Biweekly | FrequencyGroup::Fourweekly => {
            valid.next().map_or(0, |day| 1 << day)
        }
        FrequencyGroup::Weekly(crawls) => spread(crawls.min(7)),
    }
}

/// Stored form of a [`CrawlSchedule`]: readable in JSON, checked when read back. The days
/// of a second crawl follow from the group, so a 16-group needs no more fields than a
/// 6-group, and records stored before 16-groups still read.
#[derive(Serialize, Deserialize)]
#[serde(rename = "CrawlSchedule", deny_unknown_fields)]
struct StoredSchedule {
    group: FrequencyGroup,
    weekdays: u8,
    hour: u8,
}

impl Serialize for CrawlSchedule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredSchedule { group: self.group(), weekdays: self.weekdays, hour: self.hour }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CrawlSchedule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = StoredSchedule::deserialize(deserializer)?;
        if stored.weekdays == 0 || stored.weekdays > EVERY_DAY || stored.hour >= 24 {
            return Err(serde::de::Error::custom(format_args!(
                "invalid crawl schedule: weekday bits {:#b}, hour {}",
                stored.weekdays, stored.hour
            )));
        }
        Ok(CrawlSchedule::sixteen(stored.group, &days_of(stored.weekdays), stored.hour))
    }
}

/// The crawl-time fields shared by [`RefreshPlan`] and [`CrawlTime`].
struct Times<'a> {
    weekdays: &'a [u8],
    paper_hour: Option<u8>,
    min_wait_hour: Option<u8>,
    min_wait_slot: Option<u8>,
}

/// Applies `rule` to a URL crawled by `group`; `default_hour` stands in for an hour the
/// history cannot give (no changes seen).
fn choose(group: FrequencyGroup, times: &Times<'_>, rule: HourRule, default_hour: u8) -> CrawlSchedule {
    match rule {
        HourRule::Paper => {
            CrawlSchedule::sixteen(group, times.weekdays, times.paper_hour.unwrap_or(default_hour))
        }
        HourRule::LeastWait => match times.min_wait_slot.filter(|&slot| slot < SLOTS_PER_WEEK) {
            // Crawling once a week or less: the weekday is free too, so take the best slot.
            Some(slot) if group.crawls_per_week() <= 1.0 => {
                CrawlSchedule::sixteen(group, &[slot / 24], slot % 24)
            }
            _ => CrawlSchedule::sixteen(group, times.weekdays, times.min_wait_hour.unwrap_or(default_hour)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KST: i32 = 9 * 60;
    /// 2026-11-02T00:00 in Seoul, a Monday of week 2965 (odd; ≡ 1 mod 4).
    const MONDAY_KST: i64 = 1_793_577_600_000 - 9 * HOUR_MS;

    fn at(day: i64, hour: i64) -> i64 {
        MONDAY_KST + day * DAY_MS + hour * HOUR_MS
    }

    fn plan(group6: &str, weekdays: Vec<u8>, hours: [Option<u8>; 3]) -> RefreshPlan {
        RefreshPlan {
            weekly_change_rate: 1.0,
            group16: group6.parse().unwrap(),
            group6: group6.parse().unwrap(),
            crawls_per_week: 1.0,
            paper_hour: hours[0],
            weekdays,
            min_wait_hour: hours[1],
            min_wait_slot: hours[2],
        }
    }

    #[test]
    fn a_daily_crawl_follows_local_midnight() {
        let daily = CrawlSchedule::new(FrequencyGroup::Weekly(5), &[], 0);
        assert_eq!(daily.group(), FrequencyGroup::Weekly(7));
        assert_eq!(daily.weekdays(), [0, 1, 2, 3, 4, 5, 6]);
        // Midnight in Seoul is 15:00 UTC the day before.
        assert_eq!(at(1, 0) % DAY_MS, 15 * HOUR_MS);
        assert_eq!(daily.latest_due(at(0, 3), at(1, 10), KST), Some(at(1, 0)));
        assert_eq!(daily.latest_due(at(1, 0), at(1, 10), KST), None);
        assert_eq!(daily.latest_due(at(1, 0) - 1, at(1, 0), KST), Some(at(1, 0)));
        assert_eq!(daily.latest_due(at(0, 3), at(5, 1), KST), Some(at(5, 0)));
        assert_eq!(daily.next_after(at(1, 0), KST), at(2, 0));
        assert_eq!(daily.next_after(at(1, 0) - 1, KST), at(1, 0));
        assert_eq!(daily.next_after(at(4, 20), KST), at(5, 0));
        assert_eq!(daily.latest_due(at(4, 20), at(6, 1), KST), Some(at(6, 0)));
        // In UTC the same schedule crawls nine hours later.
        assert_eq!(daily.next_after(at(1, 0), 0), at(1, 9));
    }

    #[test]
    fn three_times_a_week_on_its_weekdays() {
        let g3 = CrawlSchedule::new(FrequencyGroup::Weekly(3), &[0, 2, 4], 12);
        assert_eq!(g3.weekdays(), [0, 2, 4]);
        // Asked on Tuesday: Monday noon.
        assert_eq!(g3.latest_due(at(-3, 0), at(1, 15), KST), Some(at(0, 12)));
        assert_eq!(g3.next_after(at(1, 15), KST), at(2, 12));
        assert_eq!(g3.next_after(at(4, 12), KST), at(7, 12));
        // Asked on Sunday: Friday noon; nothing since Saturday.
        assert_eq!(g3.latest_due(at(0, 0), at(6, 23), KST), Some(at(4, 12)));
        assert_eq!(g3.latest_due(at(5, 0), at(6, 23), KST), None);
    }

    #[test]
    fn twice_daily_crawls_both_half_days() {
        let g14 = CrawlSchedule::new(FrequencyGroup::Weekly(12), &[3], 15);
        assert_eq!((g14.group(), g14.hour(), g14.hours()), (FrequencyGroup::Weekly(14), 15, vec![3, 15]));
        assert_eq!(g14.latest_due(at(0, 0), at(2, 10), KST), Some(at(2, 3)));
        assert_eq!(g14.latest_due(at(0, 0), at(2, 20), KST), Some(at(2, 15)));
        assert_eq!(g14.latest_due(at(2, 3), at(2, 14), KST), None);
        assert_eq!(g14.next_after(at(2, 3), KST), at(2, 15));
        assert_eq!(g14.next_after(at(2, 15), KST), at(3, 3));
    }

    #[test]
    fn rare_groups_crawl_only_in_their_weeks() {
        let biweekly = CrawlSchedule::new(FrequencyGroup::Biweekly, &[5, 0], 0);
        let fourweekly = CrawlSchedule::new(FrequencyGroup::Fourweekly, &[5], 0);
        assert_eq!((biweekly.weekdays(), biweekly.every_weeks()), (vec![5], 2));
        // The week of MONDAY_KST is odd: its Saturday is skipped, the next one is taken.
        assert_eq!(biweekly.next_after(at(0, 0), KST), at(12, 0));
        assert_eq!(biweekly.latest_due(at(0, 0), at(11, 0), KST), None);
        assert_eq!(biweekly.next_after(at(11, 20), KST), at(12, 0), "asked late in a week");
        assert_eq!(biweekly.latest_due(at(0, 0), at(30, 0), KST), Some(at(26, 0)));
        assert_eq!(biweekly.latest_due(at(-30, 0), at(11, 0), KST), Some(at(-2, 0)));
        // Week 2965 ≡ 1 mod 4: the next crawl week is 2968.
        assert_eq!(fourweekly.next_after(at(0, 0), KST), at(26, 0));
        assert_eq!(fourweekly.next_after(at(26, 0), KST), at(54, 0));
        assert_eq!(fourweekly.latest_due(at(-100, 0), at(25, 0), KST), Some(at(-2, 0)));
        // Weeks count by floor division: week −2 (even) is a crawl week, week −1 is not.
        let saturday_1969_12_27 = -5 * DAY_MS;
        assert_eq!(biweekly.next_after(-10 * DAY_MS, 0), saturday_1969_12_27);
        assert_eq!(biweekly.next_after(saturday_1969_12_27, 0), 9 * DAY_MS);
        assert_eq!(fourweekly.next_after(-10 * DAY_MS, 0), 9 * DAY_MS);
    }

    #[test]
    fn nothing_is_due_in_an_empty_interval() {
        let daily = CrawlSchedule::new(FrequencyGroup::Weekly(7), &[], 0);
        assert_eq!(daily.latest_due(at(3, 0), at(3, 0), KST), None);
        assert_eq!(daily.latest_due(at(9, 0), at(3, 0), KST), None);
    }

    #[test]
    fn extreme_times_and_offsets_do_not_panic() {
        let times = [i64::MIN, i64::MIN + 1, -1, 0, 1, at(0, 0), i64::MAX - WEEK_MS, i64::MAX - 1, i64::MAX];
        let offsets = [i32::MIN, -720, 0, KST, i32::MAX];
        for group in GroupClasses::Sixteen.groups() {
            let schedule = CrawlSchedule::sixteen(group, &[6, 1], 23);
            for offset in offsets {
                for after in times {
                    let next = schedule.next_after(after, offset);
                    assert!(next > after || next == i64::MAX, "{group} {after} {offset}");
                    for now in times {
                        if let Some(due) = schedule.latest_due(after, now, offset) {
                            assert!(after < due && due <= now, "{group} {after} {now} {offset}");
                        }
                    }
                }
            }
        }
        let daily = CrawlSchedule::new(FrequencyGroup::Weekly(7), &[], 0);
        assert!(daily.latest_due(i64::MIN, i64::MAX, 0).is_some());
        assert_eq!(daily.next_after(i64::MAX, 0), i64::MAX);
    }

    #[test]
    fn latest_due_is_the_last_instant_next_after_reaches() {
        // A fixed xorshift stream: reproducible without a dev-dependency.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let groups = GroupClasses::Sixteen.groups();
        for case in 0..4000 {
            let group = groups[next(16) as usize];
            let weekdays: Vec<u8> = (0..=next(4)).map(|_| next(8) as u8).collect();
            let schedule = if case % 4 < 2 {
                CrawlSchedule::new(group, &weekdays, next(26) as u8)
            } else {
                CrawlSchedule::sixteen(group, &weekdays, next(26) as u8)
            };
            let offset = next(1681) as i32 - 840;
            let after =
                (next(40 * WEEK_MS as u64) as i64 - 20 * WEEK_MS) * if case % 2 == 0 { 1 } else { 1_000 };
            let now = after + next(9 * WEEK_MS as u64) as i64 - WEEK_MS;
            let mut expected = None;
            let mut instant = after;
            loop {
                instant = schedule.next_after(instant, offset);
                if instant > now {
                    break;
                }
                expected = Some(instant);
            }
            assert_eq!(schedule.latest_due(after, now, offset), expected, "case {case}: {schedule:?}");
        }
    }

    #[test]
    fn plans_become_schedules_under_either_rule() {
        let weekly = plan("G1", vec![5], [Some(12), Some(11), Some(2 * 24 + 11)]);
        let paper = CrawlSchedule::from_plan(&weekly, HourRule::Paper, GroupClasses::Six);
        assert_eq!((paper.group(), paper.weekdays(), paper.hour()), (FrequencyGroup::Weekly(1), vec![5], 12));
        let least = CrawlSchedule::from_plan(&weekly, HourRule::LeastWait, GroupClasses::Six);
        assert_eq!((least.weekdays(), least.hour()), (vec![2], 11));

        let g3 = plan("G3", vec![0, 2, 4], [Some(0), Some(16), Some(6 * 24 + 16)]);
        let least = CrawlSchedule::from_plan(&g3, HourRule::LeastWait, GroupClasses::Six);
        assert_eq!((least.weekdays(), least.hour()), (vec![0, 2, 4], 16));

        let daily = plan("G7", (0..7).collect(), [Some(0), Some(16), Some(3)]);
        let least = CrawlSchedule::from_plan(&daily, HourRule::LeastWait, GroupClasses::Six);
        assert_eq!((least.weekdays().len(), least.hour()), (7, 16));

        let unseen = plan("4G1", vec![5], [None; 3]);
        for rule in [HourRule::Paper, HourRule::LeastWait] {
            let schedule = CrawlSchedule::from_plan(&unseen, rule, GroupClasses::Six);
            assert_eq!((schedule.weekdays(), schedule.hour(), schedule.every_weeks()), (vec![5], 0, 4));
        }
        let sixteen = CrawlSchedule::from_plan(
            &plan("G5", vec![], [Some(12), None, None]),
            HourRule::Paper,
            GroupClasses::Six,
        );
        assert_eq!((sixteen.group(), sixteen.hour()), (FrequencyGroup::Weekly(7), 12));
        // An impossible slot falls back to the weekdays and least-wait hour.
        let odd = CrawlSchedule::from_plan(
            &plan("2G1", vec![5], [None, Some(7), Some(200)]),
            HourRule::LeastWait,
            GroupClasses::Six,
        );
        assert_eq!((odd.weekdays(), odd.hour()), (vec![5], 7));
    }

    #[test]
    fn schedules_are_small_and_always_have_a_crawl_day() {
        assert_eq!(std::mem::size_of::<CrawlSchedule>(), 3);
        assert_eq!(std::mem::size_of::<Option<CrawlSchedule>>(), 3);
        let g3 = CrawlSchedule::new(FrequencyGroup::Weekly(2), &[9, 200], 30);
        assert_eq!((g3.weekdays(), g3.hour()), (vec![0, 2, 4], 6));
        let g1 = CrawlSchedule::new(FrequencyGroup::Weekly(1), &[], 3);
        assert_eq!(g1.weekdays(), [5]);
    }

    #[test]
    fn stored_schedules_read_back_checked() {
        let g3 = CrawlSchedule::new(FrequencyGroup::Weekly(3), &[1, 3], 12);
        let json = serde_json::to_string(&g3).unwrap();
        assert_eq!(json, r#"{"group":"G3","weekdays":10,"hour":12}"#);
        assert_eq!(serde_json::from_str::<CrawlSchedule>(&json).unwrap(), g3);
        for bad in [
            r#"{"group":"G3","weekdays":0,"hour":12}"#,
            r#"{"group":"G3","weekdays":128,"hour":12}"#,
            r#"{"group":"G3","weekdays":1,"hour":24}"#,
            r#"{"group":"G99","weekdays":1,"hour":1}"#,
        ] {
            assert!(serde_json::from_str::<CrawlSchedule>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn group_classes_by_name_and_members() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        assert_eq!(GroupClasses::default(), GroupClasses::Six);
        for (classes, name) in [(GroupClasses::Six, "six"), (GroupClasses::Sixteen, "sixteen")] {
            assert_eq!(serde_json::to_string(&classes).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<GroupClasses>(&format!("\"{name}\"")).unwrap(), classes);
            assert_eq!(<GroupClasses as clap::ValueEnum>::from_str(name, false), Ok(classes));
        }
        let six = [Weekly(14), Weekly(7), Weekly(3), Weekly(1), Biweekly, Fourweekly];
        assert_eq!(GroupClasses::Six.groups(), six);
        let sixteen = GroupClasses::Sixteen.groups();
        assert_eq!(sixteen.len(), 16);
        assert_eq!(
            (sixteen[0], sixteen[13], sixteen[14], sixteen[15]),
            (Weekly(14), Weekly(1), Biweekly, Fourweekly)
        );
    }

    #[test]
    fn sixteen_groups_spread_their_crawl_days_from_monday() {
        use FrequencyGroup::Weekly;
        let days = |crawls| CrawlSchedule::sixteen(Weekly(crawls), &[], 0).weekdays();
        assert_eq!(days(2), [0, 3]);
        assert_eq!(days(4), [0, 1, 3, 5]);
        assert_eq!(days(5), [0, 1, 2, 4, 5]);
        assert_eq!(days(6), [0, 1, 2, 3, 4, 5]);
        // The same rule gives G3 the paper's Mon, Wed, Fri; G3 still takes its weekdays.
        assert_eq!(days_of(spread(3)), [0, 2, 4]);
        assert_eq!(days(3), [0, 2, 4]);
        assert_eq!(CrawlSchedule::sixteen(Weekly(3), &[1, 3], 0).weekdays(), [1, 3]);
        // Spread groups ignore the weekdays given; `new` still takes a group to its 6-group.
        let g2 = CrawlSchedule::sixteen(Weekly(2), &[6], 9);
        assert_eq!((g2.group(), g2.weekdays(), g2.hours()), (Weekly(2), vec![0, 3], vec![9]));
        assert_eq!(CrawlSchedule::new(Weekly(2), &[6], 9).group(), Weekly(3));
        assert_eq!(g2.next_after(at(0, 9), KST), at(3, 9));
        assert_eq!(g2.latest_due(at(0, 9), at(6, 23), KST), Some(at(3, 9)));
        // Every Gi crawls i times a week, and a 6-group is the same schedule either way.
        for crawls in 1..=14 {
            let schedule = CrawlSchedule::sixteen(Weekly(crawls), &[], 7);
            assert_eq!(schedule.week_offsets().count(), usize::from(crawls), "G{crawls}");
            assert_eq!(schedule.every_weeks(), 1);
            let six = Weekly(crawls).six();
            assert_eq!(CrawlSchedule::sixteen(six, &[4], 7), CrawlSchedule::new(Weekly(crawls), &[4], 7));
        }
    }

    #[test]
    fn g10_crawls_daily_and_again_on_three_spread_days() {
        let g10 = CrawlSchedule::sixteen(FrequencyGroup::Weekly(10), &[5], 4);
        assert_eq!(g10.group(), FrequencyGroup::Weekly(10));
        assert_eq!((g10.weekdays(), g10.second_weekdays()), ((0..7).collect(), vec![0, 2, 4]));
        assert_eq!((g10.hour(), g10.hours()), (4, vec![4, 16]));
        assert_eq!(g10.next_after(at(0, 4), KST), at(0, 16));
        assert_eq!(g10.next_after(at(0, 16), KST), at(1, 4));
        assert_eq!(g10.next_after(at(1, 4), KST), at(2, 4), "no second crawl on Tuesday");
        assert_eq!(g10.next_after(at(2, 4), KST), at(2, 16));
        assert_eq!(g10.latest_due(at(0, 0), at(1, 20), KST), Some(at(1, 4)));
        assert_eq!(g10.latest_due(at(0, 0), at(4, 20), KST), Some(at(4, 16)));
        let g7 = CrawlSchedule::sixteen(FrequencyGroup::Weekly(7), &[], 4);
        assert!(g7.second_weekdays().is_empty());
        let g14 = CrawlSchedule::sixteen(FrequencyGroup::Weekly(14), &[], 4);
        assert_eq!(g14.second_weekdays(), g14.weekdays());
    }

    #[test]
    fn a_late_g9_crawls_again_early_the_same_day() {
        let g9 = CrawlSchedule::sixteen(FrequencyGroup::Weekly(9), &[], 15);
        // Second crawls on Monday and Thursday, at 03:00: before the day's 15:00 crawl.
        assert_eq!((g9.second_weekdays(), g9.hours()), (vec![0, 3], vec![3, 15]));
        assert_eq!(g9.next_after(at(-1, 15), KST), at(0, 3));
        assert_eq!(g9.next_after(at(0, 3), KST), at(0, 15));
        assert_eq!(g9.next_after(at(0, 15), KST), at(1, 15));
        assert_eq!(g9.next_after(at(2, 15), KST), at(3, 3));
        assert_eq!(g9.next_after(at(6, 20), KST), at(7, 3));
        assert_eq!(g9.latest_due(at(-1, 0), at(0, 10), KST), Some(at(0, 3)));
        assert_eq!(g9.latest_due(at(0, 3), at(0, 14), KST), None);
        assert_eq!(g9.latest_due(at(0, 0), at(0, 16), KST), Some(at(0, 15)));
        assert_eq!(g9.latest_due(at(0, 0), at(3, 10), KST), Some(at(3, 3)));
        assert_eq!(g9.latest_due(at(0, 0), at(7, 2), KST), Some(at(6, 15)));
        let offsets: Vec<_> = g9.week_offsets().collect();
        assert!(offsets.windows(2).all(|pair| pair[0] < pair[1]), "{offsets:?}");
    }

    #[test]
    fn plans_become_sixteen_group_schedules() {
        let sixteen = |group16: &str, group6: &str, weekdays, hours| RefreshPlan {
            group16: group16.parse().unwrap(),
            ..plan(group6, weekdays, hours)
        };
        let g5 = sixteen("G5", "G7", (0..7).collect(), [Some(12), Some(16), Some(3 * 24 + 5)]);
        let paper = CrawlSchedule::from_plan(&g5, HourRule::Paper, GroupClasses::Sixteen);
        assert_eq!(
            (paper.group(), paper.weekdays(), paper.hour()),
            (FrequencyGroup::Weekly(5), vec![0, 1, 2, 4, 5], 12)
        );
        let six = CrawlSchedule::from_plan(&g5, HourRule::Paper, GroupClasses::Six);
        assert_eq!(six.group(), FrequencyGroup::Weekly(7));
        // More than weekly: the least-wait hour, not the slot.
        let least = CrawlSchedule::from_plan(&g5, HourRule::LeastWait, GroupClasses::Sixteen);
        assert_eq!((least.weekdays(), least.hour()), (vec![0, 1, 2, 4, 5], 16));
        let g9 = sixteen("G9", "G7", (0..7).collect(), [Some(0), Some(15), Some(15)]);
        let least = CrawlSchedule::from_plan(&g9, HourRule::LeastWait, GroupClasses::Sixteen);
        assert_eq!(
            (least.group(), least.hours(), least.second_weekdays()),
            (FrequencyGroup::Weekly(9), vec![3, 15], vec![0, 3])
        );
        // Weekly or rarer: the least-wait slot, as with six groups.
        for group in ["G1", "2G1", "4G1"] {
            let rare = sixteen(group, group, vec![5], [Some(0), Some(11), Some(2 * 24 + 11)]);
            let least = CrawlSchedule::from_plan(&rare, HourRule::LeastWait, GroupClasses::Sixteen);
            assert_eq!((least.weekdays(), least.hour()), (vec![2], 11), "{group}");
        }
        let g3 = sixteen("G3", "G3", vec![1, 3], [Some(12), None, None]);
        let paper = CrawlSchedule::from_plan(&g3, HourRule::Paper, GroupClasses::Sixteen);
        assert_eq!((paper.weekdays(), paper.hour()), (vec![1, 3], 12));
    }

    #[test]
    fn stored_sixteen_group_schedules_read_back_checked() {
        let g9 = CrawlSchedule::sixteen(FrequencyGroup::Weekly(9), &[], 15);
        let json = serde_json::to_string(&g9).unwrap();
        assert_eq!(json, r#"{"group":"G9","weekdays":127,"hour":15}"#);
        assert_eq!(serde_json::from_str::<CrawlSchedule>(&json).unwrap(), g9);
        for group in GroupClasses::Sixteen.groups() {
            let schedule = CrawlSchedule::sixteen(group, &[2, 6], 21);
            let json = serde_json::to_string(&schedule).unwrap();
            assert_eq!(serde_json::from_str::<CrawlSchedule>(&json).unwrap(), schedule, "{json}");
        }
        for bad in [
            r#"{"group":"G9","weekdays":128,"hour":15}"#,
            r#"{"group":"G2","weekdays":9,"hour":24}"#,
            r#"{"group":"G15","weekdays":9,"hour":1}"#,
            r#"{"group":"G9","weekdays":127,"second":128,"hour":15}"#,
        ] {
            assert!(serde_json::from_str::<CrawlSchedule>(bad).is_err(), "{bad}");
        }
    }
}
