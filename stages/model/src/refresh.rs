//! Refresh groups (`docs/algorithms/refresh-groups.md`): per-URL change counts over a learning window
//! and a weekday × hour histogram of change times, the crawl-frequency group they imply,
//! the time of day to crawl, and the server load of a grouping. Pure: the stage, the
//! scheduler and the simulator call the same code.
//!
//! Times are Unix milliseconds; days and hours are in the configured local time, given as
//! an offset from UTC in minutes. Weekdays count from Monday = 0.
//!
//! State size per URL on a 64-bit target: [`WeeklyChanges`] is 24 bytes inline plus 2
//! bytes a day on the heap (56 bytes for the default 28-day window); [`ChangeHours`] is 24
//! bytes inline (its slots and the least wait it remembers) plus 16 bytes per weekday-hour
//! slot that has seen a change (at most 168).

use std::sync::atomic::{AtomicU16, Ordering};

use serde::{Deserialize, Serialize};

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;
pub const WEEK_MS: i64 = 7 * DAY_MS;
const HOURS_PER_DAY: usize = 24;
const SLOTS_PER_WEEK: usize = 7 * HOURS_PER_DAY;
/// 1970-01-01 was a Thursday: the epoch is 72 hours into a week starting on Monday.
const EPOCH_HOUR_OF_WEEK: i64 = 3 * 24;

/// The learning window of the paper: a month of observation, in whole weeks.
pub const DEFAULT_WINDOW_DAYS: u16 = 28;

fn local_ms(at_ms: i64, utc_offset_minutes: i32) -> i64 {
    at_ms.saturating_add(i64::from(utc_offset_minutes).saturating_mul(MINUTE_MS))
}

/// Days since the Unix epoch in local time (negative before it).
fn local_day(at_ms: i64, utc_offset_minutes: i32) -> i64 {
    local_ms(at_ms, utc_offset_minutes).div_euclid(DAY_MS)
}

/// The weekday × hour slot (`weekday * 24 + hour`, Monday = 0) of a local time.
pub fn slot_of(at_ms: i64, utc_offset_minutes: i32) -> u8 {
    let hours = local_ms(at_ms, utc_offset_minutes).div_euclid(HOUR_MS);
    hours.saturating_add(EPOCH_HOUR_OF_WEEK).rem_euclid(SLOTS_PER_WEEK as i64) as u8
}

/// Changes per local day over the last `window_days` days: a ring indexed by day number,
/// so advancing a day only clears the buckets it skips.
///
/// The window is a parameter of every call so that it stays configurable without touching
/// stored state. When [`record`](Self::record) sees a different window than the ring
/// holds, it re-buckets the newest days that fit into a ring of the new length: shrinking
/// forgets the oldest days, growing keeps every day known and counts zero for the rest.
/// A window of 0 days is taken as 1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeeklyChanges {
    /// Changes on day `d` live at `d mod len`; counts saturate rather than wrap.
    ring: Box<[u16]>,
    /// Local day number of the newest bucket; meaningless while `ring` is empty.
    newest_day: i64,
}

impl WeeklyChanges {
    /// Counts a change detected at `at_ms`. A change older than the newest bucket counts
    /// into its own day while that day is inside the window, and is dropped otherwise.
    pub fn record(&mut self, at_ms: i64, window_days: u16, utc_offset_minutes: i32) {
        let day = local_day(at_ms, utc_offset_minutes);
        let window = usize::from(window_days.max(1));
        if self.ring.is_empty() {
            self.ring = vec![0; window].into_boxed_slice();
            self.newest_day = day;
        } else if self.ring.len() != window {
            self.resize(window);
        }
        if day > self.newest_day {
            // The days after the newest bucket, up to a whole ring of them, start empty.
            for skipped in (self.newest_day.saturating_add(1)..=day).rev().take(window) {
                let bucket = self.bucket(skipped);
                self.ring[bucket] = 0;
            }
            self.newest_day = day;
        }
        if day > self.newest_day.saturating_sub(window as i64) {
            let bucket = self.bucket(day);
            self.ring[bucket] = self.ring[bucket].saturating_add(1);
        }
    }

    /// Changes on the `window_days` local days ending with the day of `now_ms`. Buckets
    /// dated after `now_ms` still count, so a clock running behind the recorded times
    /// loses nothing.
    pub fn changes_in_window(&self, now_ms: i64, window_days: u16, utc_offset_minutes: i32) -> u32 {
        // A window of 0 days is taken as 1, which counts today only.
        let oldest_counted =
            local_day(now_ms, utc_offset_minutes).saturating_sub(i64::from(window_days.saturating_sub(1)));
        if self.ring.is_empty() {
            return 0;
        }
        // The newest `counted` days of the ring, walked back from the newest bucket: one
        // division per call rather than one per day. Not past the oldest representable
        // day, where `days` stops (only a damaged ring reaches it). In i128, where no
        // difference of two days overflows.
        let span = i128::from(self.newest_day).saturating_sub(i128::from(oldest_counted)).saturating_add(1);
        let representable =
            i128::from(self.newest_day).saturating_sub(i128::from(i64::MIN)).saturating_add(1);
        let counted = span.min(representable).clamp(0, self.ring.len() as i128) as usize;
        let newest = self.bucket(self.newest_day);
        let (recent, older) = self.ring.split_at(newest.saturating_add(1));
        // Saturating: a ring restored from a damaged changelog may be longer than any window.
        recent
            .iter()
            .rev()
            .chain(older.iter().rev())
            .take(counted)
            .map(|&changes| u32::from(changes))
            .fold(0, u32::saturating_add)
    }

    #[cfg(test)]
    fn changes_in_window_day_by_day(&self, now_ms: i64, window_days: u16, utc_offset_minutes: i32) -> u32 {
        let oldest_counted =
            local_day(now_ms, utc_offset_minutes).saturating_sub(i64::from(window_days.saturating_sub(1)));
        self.days()
            .filter(|&(day, _)| day >= oldest_counted)
            .map(|(_, changes)| u32::from(changes))
            .fold(0, u32::saturating_add)
    }

    /// Changes per week over the time the URL has been observed inside the window: a URL
    /// first seen two days ago is not diluted by a four-week window. At least one day is
    /// assumed observed, so a first sighting does not divide by zero.
    pub fn weekly_rate(
        &self,
        now_ms: i64,
        first_seen_ms: i64,
        window_days: u16,
        utc_offset_minutes: i32,
    ) -> f64 {
        let window_ms = i64::from(window_days.max(1)).saturating_mul(DAY_MS);
        let observed_ms = now_ms.saturating_sub(first_seen_ms).clamp(DAY_MS, window_ms);
        let changes = self.changes_in_window(now_ms, window_days, utc_offset_minutes);
        f64::from(changes) * WEEK_MS as f64 / observed_ms as f64
    }

    fn bucket(&self, day: i64) -> usize {
        day.rem_euclid(self.ring.len() as i64) as usize
    }

    /// (day, changes) for every day the ring holds, newest first; days before the first
    /// representable one (only in a damaged ring) are left out.
    fn days(&self) -> impl Iterator<Item = (i64, u16)> + '_ {
        (0..self.ring.len() as i64).map_while(move |age| {
            let day = self.newest_day.checked_sub(age)?;
            Some((day, self.ring[self.bucket(day)]))
        })
    }

    fn resize(&mut self, window: usize) {
        let mut ring = vec![0; window].into_boxed_slice();
        for (day, changes) in self.days().take(window) {
            ring[day.rem_euclid(window as i64) as usize] = changes;
        }
        self.ring = ring;
    }
}

/// The changes seen in one weekday × hour slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSlot {
    /// `weekday * 24 + hour`, Monday = 0.
    pub slot: u8,
    pub changes: u32,
    /// Sum of the changes' `update_size` (bytes the size moved by).
    pub update_size: u64,
}

/// Histogram of change detection times over the 168 weekday × hour slots, storing only
/// the slots that have seen a change, sorted by slot. A boxed slice rather than a `Vec`
/// saves the capacity word and the growth slack; a new slot reallocates, which happens at
/// most 168 times in a URL's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeHours {
    slots: Box<[ChangeSlot]>,
    /// The least-wait hour and weekly slot of `slots`: a URL's refresh plan is asked for at
    /// every request, its slots change only with a change. Not stored.
    #[serde(skip)]
    least_wait: LeastWaitMemo,
}

/// The least-wait crawl hour of the day and slot of the week of a histogram's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeastWait {
    hour: Option<u8>,
    slot: Option<u8>,
}

/// A [`LeastWait`] found when first asked for after a change, so that a caller that
/// never asks (the simulator's other policies) never searches. Atomic, so that a shared
/// `&ChangeHours` can fill it in and the state stays shareable across a stage's tasks;
/// relaxed, as whatever it holds was found from the same slots. Packed as the hour's and
/// the slot's bytes ([`NO_POSITION`] for none), [`NOT_FOUND`] until found. Equality
/// ignores it: it follows from the slots.
#[derive(Debug)]
struct LeastWaitMemo(AtomicU16);

/// A least-wait position the search did not give: hours are below 24, slots below 168.
const NO_POSITION: u8 = 0xFE;
const NOT_FOUND: u16 = u16::MAX;

impl LeastWaitMemo {
    fn get(&self) -> Option<LeastWait> {
        let packed = self.0.load(Ordering::Relaxed);
        let [hour, slot] = packed.to_le_bytes();
        let position = |byte: u8| (byte != NO_POSITION).then_some(byte);
        (packed != NOT_FOUND).then(|| LeastWait { hour: position(hour), slot: position(slot) })
    }

    fn set(&self, found: LeastWait) {
        let byte = |position: Option<u8>| position.unwrap_or(NO_POSITION);
        self.0.store(u16::from_le_bytes([byte(found.hour), byte(found.slot)]), Ordering::Relaxed);
    }

    fn forget(&self) {
        self.0.store(NOT_FOUND, Ordering::Relaxed);
    }
}

impl Default for LeastWaitMemo {
    fn default() -> Self {
        Self(AtomicU16::new(NOT_FOUND))
    }
}

impl Clone for LeastWaitMemo {
    fn clone(&self) -> Self {
        Self(AtomicU16::new(self.0.load(Ordering::Relaxed)))
    }
}

impl PartialEq for LeastWaitMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LeastWaitMemo {}

impl ChangeHours {
    #[cfg(test)]
    fn with_slots(slots: Box<[ChangeSlot]>) -> Self {
        ChangeHours { slots, least_wait: LeastWaitMemo::default() }
    }

    /// The least-wait hour and slot, searched for only the first time after a change.
    fn least_wait(&self) -> LeastWait {
        self.least_wait.get().unwrap_or_else(|| {
            let found = LeastWait {
                hour: least_wait_position(&self.changes_by_hour()),
                slot: self.least_wait_slot(),
            };
            self.least_wait.set(found);
            found
        })
    }

    pub fn record(&mut self, at_ms: i64, update_size: u64, utc_offset_minutes: i32) {
        let slot = slot_of(at_ms, utc_offset_minutes);
        match self.slots.binary_search_by_key(&slot, |entry| entry.slot) {
            Ok(found) => {
                let entry = &mut self.slots[found];
                entry.changes = entry.changes.saturating_add(1);
                entry.update_size = entry.update_size.saturating_add(update_size);
            }
            Err(insert_at) => {
                // Allocated at its final length: growing a vector by one and shrinking
                // it back to a boxed slice would copy the slots twice.
                let (before, after) = self.slots.split_at(insert_at);
                let mut slots = Vec::with_capacity(self.slots.len().saturating_add(1));
                slots.extend_from_slice(before);
                slots.push(ChangeSlot { slot, changes: 1, update_size });
                slots.extend_from_slice(after);
                self.slots = slots.into_boxed_slice();
            }
        }
        self.least_wait.forget();
    }

    /// A histogram from changes per local hour of the day with the weekday unknown: all
    /// are put on Monday, which no per-hour reading can tell apart.
    pub fn from_hour_counts(counts: &[u64; HOURS_PER_DAY]) -> ChangeHours {
        let slots = (0u8..)
            .zip(counts)
            .filter(|&(_, &changes)| changes > 0)
            .map(|(slot, &changes)| ChangeSlot {
                slot,
                changes: u32::try_from(changes).unwrap_or(u32::MAX),
                update_size: 0,
            })
            .collect();
        ChangeHours { slots, least_wait: LeastWaitMemo::default() }
    }

    /// The slots that have seen a change, in slot order.
    pub fn slots(&self) -> &[ChangeSlot] {
        &self.slots
    }

    pub fn total_changes(&self) -> u64 {
        self.slots.iter().map(|entry| u64::from(entry.changes)).sum()
    }

    /// Changes per hour of the day, all weekdays together.
    fn changes_by_hour(&self) -> [u64; HOURS_PER_DAY] {
        let mut by_hour = [0u64; HOURS_PER_DAY];
        for entry in self.slots.iter() {
            let count = &mut by_hour[usize::from(entry.slot) % HOURS_PER_DAY];
            *count = count.saturating_add(u64::from(entry.changes));
        }
        by_hour
    }

    /// [`least_wait_position`] over the week's slots, from the slots seen; a histogram
    /// out of order or past the week (a damaged changelog) is summed by slot first.
    fn least_wait_slot(&self) -> Option<u8> {
        let in_order = self.slots.windows(2).all(|pair| pair[0].slot < pair[1].slot)
            && self.slots.last().is_none_or(|entry| usize::from(entry.slot) < SLOTS_PER_WEEK);
        if !in_order {
            return least_wait_position(&self.changes_by_slot());
        }
        let seen = self.slots.iter().map(|entry| (u64::from(entry.slot), u64::from(entry.changes)));
        least_wait_among(seen.filter(|&(_, count)| count > 0), SLOTS_PER_WEEK as u64)
    }

    fn changes_by_slot(&self) -> [u64; SLOTS_PER_WEEK] {
        let mut by_slot = [0u64; SLOTS_PER_WEEK];
        for entry in self.slots.iter() {
            let count = &mut by_slot[usize::from(entry.slot) % SLOTS_PER_WEEK];
            *count = count.saturating_add(u64::from(entry.changes));
        }
        by_slot
    }
}

pub use recrawl_schemas::{FrequencyGroup, UnknownFrequencyGroup};

/// When to crawl (`refresh-groups.md` §3). Hours are local, weekdays count from Monday = 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrawlTimeConfig {
    /// The day is `[day_start_hour, day_end_hour)`; it wraps past midnight when the start
    /// is the later hour.
    pub day_start_hour: u8,
    pub day_end_hour: u8,
    /// Crawl hour for a URL whose changes fall mostly in the day: after they are over.
    pub day_crawl_hour: u8,
    /// Crawl hour for a URL whose changes fall mostly at night.
    pub night_crawl_hour: u8,
    /// Crawl days of the three-times-a-week group.
    pub g3_weekdays: Vec<u8>,
    /// Crawl day of the weekly and rarer groups.
    pub weekly_weekday: u8,
}

impl Default for CrawlTimeConfig {
    fn default() -> Self {
        CrawlTimeConfig {
            day_start_hour: 9,
            day_end_hour: 18,
            day_crawl_hour: 0,
            night_crawl_hour: 12,
            g3_weekdays: vec![0, 2, 4],
            weekly_weekday: 5,
        }
    }
}

impl CrawlTimeConfig {
    fn is_day(&self, hour: u8) -> bool {
        if self.day_start_hour <= self.day_end_hour {
            (self.day_start_hour..self.day_end_hour).contains(&hour)
        } else {
            hour >= self.day_start_hour || hour < self.day_end_hour
        }
    }
}

/// A URL's crawl time under both rules of `refresh-groups.md` §3, for the simulator to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrawlTime {
    /// The paper's rule: the configured day or night crawl hour; `None` with no changes.
    pub paper_hour: Option<u8>,
    /// Crawl weekdays of the URL's 6-group.
    pub weekdays: Vec<u8>,
    /// The hour of a daily crawl that minimises how long changes wait to be fetched.
    pub min_wait_hour: Option<u8>,
    /// The weekday × hour slot of a weekly crawl that minimises the wait.
    pub min_wait_slot: Option<u8>,
}

/// The crawl time of a URL with change histogram `hours` in group `group` (a 16-group is
/// taken to its 6-group).
pub fn crawl_time(hours: &ChangeHours, group: FrequencyGroup, config: &CrawlTimeConfig) -> CrawlTime {
    let least_wait = hours.least_wait();
    let (mut day, mut night) = (0u64, 0u64);
    for entry in hours.slots.iter() {
        let (hour, changes) = (entry.slot % 24, u64::from(entry.changes));
        if config.is_day(hour) {
            day = day.saturating_add(changes);
        } else {
            night = night.saturating_add(changes);
        }
    }
    let paper_hour = match (day, night) {
        (0, 0) => None,
        _ if day >= night => Some(config.day_crawl_hour),
        _ => Some(config.night_crawl_hour),
    };
    let weekdays = match group.six() {
        FrequencyGroup::Weekly(14 | 7) => (0..7).collect(),
        FrequencyGroup::Weekly(3) => config.g3_weekdays.clone(),
        _ => vec![config.weekly_weekday],
    };
    CrawlTime { paper_hour, weekdays, min_wait_hour: least_wait.hour, min_wait_slot: least_wait.slot }
}

/// The position on a cycle of `changes.len()` slots at which one crawl per cycle leaves
/// the changes least time unfetched; the smallest on a tie, `None` with no changes.
fn least_wait_position(changes: &[u64]) -> Option<u8> {
    let seen = (0u64..).zip(changes.iter().copied()).filter(|&(_, count)| count > 0);
    least_wait_among(seen, changes.len() as u64)
}

/// [`least_wait_position`] from the slots that have seen changes, `(slot, changes)` in
/// strictly ascending slot order below `len`, so that a week's few busy slots cost a pass
/// over them rather than over all 168.
///
/// A change in slot `j` happens mid-slot on average and is fetched by the next crawl at
/// the start of slot `c`, after `((c - j - 1) mod len) + 0.5` slots. The half is common to
/// all changes, so comparing the whole-slot parts picks the same crawl. Moving the crawl
/// one slot later adds a slot of wait to every change except those of the slot just
/// passed, which now wait a whole cycle less one; past a slot without changes the wait
/// only grows, so the least is at 0 or just after a slot with changes.
fn least_wait_among(seen: impl Iterator<Item = (u64, u64)> + Clone, len: u64) -> Option<u8> {
    // Checked: waits too large for a u64, which only a damaged histogram has, give `None`.
    let total = seen.clone().try_fold(0u64, |total, (_, count)| total.checked_add(count))?;
    if total == 0 {
        return None;
    }
    // Wait of a crawl at 0: a change in slot j waits (−j − 1) mod len = len − 1 − j slots.
    let mut wait = seen.clone().try_fold(0u64, |wait, (slot, count)| {
        wait.checked_add(count.checked_mul(len.checked_sub(1)?.checked_sub(slot)?)?)
    })?;
    let (mut best, mut at) = ((wait, 0), 0u64);
    for (slot, count) in seen {
        // No changes in [at, slot): one more slot of wait for every change at each step.
        wait = wait.checked_add(total.checked_mul(slot.checked_sub(at)?)?)?;
        at = slot.checked_add(1)?;
        if at >= len {
            break;
        }
        wait = wait.checked_add(total)?.checked_sub(len.checked_mul(count)?)?;
        if wait < best.0 {
            best = (wait, at);
        }
    }
    // The rest of the cycle only adds wait; checked as a pass over every slot would be.
    wait.checked_add(total.checked_mul(len.saturating_sub(1).saturating_sub(at))?)?;
    u8::try_from(best.1).ok()
}

/// The load of a grouping (`refresh-groups.md` §4): crawl requests per day for `(group, URLs)` pairs,
/// and their share of crawling every one of those URLs daily (0 with no URLs).
pub fn daily_load(groups: &[(FrequencyGroup, u64)]) -> (f64, f64) {
    let requests_per_day: f64 =
        groups.iter().map(|&(group, urls)| urls as f64 * group.crawls_per_week() / 7.0).sum();
    let daily_baseline = groups.iter().fold(0u64, |total, &(_, urls)| total.saturating_add(urls));
    let share = if daily_baseline == 0 { 0.0 } else { requests_per_day / daily_baseline as f64 };
    (requests_per_day, share)
}

/// Where and how a URL's changes are counted: the learning window, the local time zone
/// and the crawl hours and days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshSettings {
    pub window_days: u16,
    pub utc_offset_minutes: i32,
    pub crawl_time: CrawlTimeConfig,
}

impl Default for RefreshSettings {
    fn default() -> Self {
        Self {
            window_days: DEFAULT_WINDOW_DAYS,
            utc_offset_minutes: 0,
            crawl_time: CrawlTimeConfig::default(),
        }
    }
}

/// When a URL's changes were seen: what its refresh group and crawl time are learned from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeCalendar {
    pub weekly: WeeklyChanges,
    pub hours: ChangeHours,
}

impl ChangeCalendar {
    /// Counts a change seen at `at_ms` whose size moved by `update_size` bytes.
    pub fn record(&mut self, at_ms: i64, update_size: u64, settings: &RefreshSettings) {
        self.weekly.record(at_ms, settings.window_days, settings.utc_offset_minutes);
        self.hours.record(at_ms, update_size, settings.utc_offset_minutes);
    }

    /// The URL's refresh at `now_ms`, for a URL first seen at `first_seen_ms`.
    pub fn refresh(&self, now_ms: i64, first_seen_ms: i64, settings: &RefreshSettings) -> Refresh {
        let weekly_rate =
            self.weekly.weekly_rate(now_ms, first_seen_ms, settings.window_days, settings.utc_offset_minutes);
        Refresh::new(weekly_rate, &self.hours, &settings.crawl_time)
    }
}

/// A URL's refresh: its weekly change rate, its 16- and 6-group and when to crawl it
/// (`refresh-groups.md` §2–3).
#[derive(Debug, Clone, PartialEq)]
pub struct Refresh {
    pub weekly_change_rate: f64,
    pub group16: FrequencyGroup,
    pub group6: FrequencyGroup,
    pub time: CrawlTime,
}

impl Refresh {
    /// The plan of a URL changing `weekly_change_rate` times a week at the times `hours`.
    pub fn new(weekly_change_rate: f64, hours: &ChangeHours, config: &CrawlTimeConfig) -> Refresh {
        let group16 = FrequencyGroup::sixteen(weekly_change_rate);
        let group6 = group16.six();
        Refresh { weekly_change_rate, group16, group6, time: crawl_time(hours, group6, config) }
    }
}

#[cfg(test)]
mod tests {
    use recrawl_schemas::{decode, encode, Format, Message};

    use super::*;

    const KST: i32 = 9 * 60;
    /// 2026-11-20T23:30Z, Saturday 08:30 in Seoul.
    const FRIDAY_NIGHT_UTC: i64 = 1_795_217_400_000;
    /// 2026-11-02T00:00 in Seoul, a Monday.
    const MONDAY_KST: i64 = 1_793_577_600_000 - 9 * HOUR_MS;

    fn at(day: i64, hour: i64) -> i64 {
        MONDAY_KST + day * DAY_MS + hour * HOUR_MS
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Stored(WeeklyChanges, ChangeHours);

    impl Message for Stored {
        const NAME: &'static str = "RefreshStateTest";
        const FORMAT: Format = Format::Bincode;
    }

    #[test]
    fn slots_follow_the_local_weekday_and_hour() {
        assert_eq!(slot_of(FRIDAY_NIGHT_UTC, KST), 5 * 24 + 8);
        assert_eq!(slot_of(FRIDAY_NIGHT_UTC, 0), 4 * 24 + 23);
        assert_eq!(slot_of(MONDAY_KST, KST), 0);
        // One millisecond before the epoch: Wednesday 1969-12-31 23:59 UTC.
        assert_eq!(slot_of(-1, 0), 2 * 24 + 23);
    }

    #[test]
    fn days_split_at_local_midnight() {
        let (before_midnight, midnight) = (at(4, 23) + 59 * MINUTE_MS, at(5, 0));
        let mut kst = WeeklyChanges::default();
        let mut utc = WeeklyChanges::default();
        for time in [before_midnight, midnight] {
            kst.record(time, 28, KST);
            utc.record(time, 28, 0);
        }
        assert_eq!(kst.changes_in_window(midnight, 1, KST), 1);
        assert_eq!(utc.changes_in_window(midnight, 1, 0), 2);
    }

    #[test]
    fn the_window_slides_and_late_changes_count_only_inside_it() {
        let mut changes = WeeklyChanges::default();
        changes.record(at(0, 10), 7, KST);
        changes.record(at(5, 10), 7, KST);
        changes.record(at(5, 11), 7, KST);
        assert_eq!(changes.changes_in_window(at(5, 12), 7, KST), 3);
        assert_eq!(changes.changes_in_window(at(7, 0), 7, KST), 2);
        assert_eq!(changes.changes_in_window(at(12, 0), 7, KST), 0);

        changes.record(at(20, 1), 7, KST);
        changes.record(at(18, 1), 7, KST);
        changes.record(at(13, 1), 7, KST);
        assert_eq!(changes.changes_in_window(at(20, 2), 7, KST), 2);
        assert_eq!(changes.changes_in_window(at(20, 2), 2, KST), 1);
    }

    #[test]
    fn the_window_is_summed_as_the_days_are_counted() {
        let rings: [(Vec<u16>, i64); 5] = [
            ((1..=28).collect(), 20_000),
            (vec![5, 0, 7], 3),
            (vec![u16::MAX; 40], -2),
            ((1..=10).collect(), i64::MIN + 4),
            ((1..=10).collect(), i64::MAX),
        ];
        for (ring, newest_day) in rings {
            let weekly = WeeklyChanges { ring: ring.into_boxed_slice(), newest_day };
            for day in [
                newest_day.saturating_sub(50),
                newest_day.saturating_sub(5),
                newest_day,
                newest_day.saturating_add(3),
            ] {
                let now_ms = day.saturating_mul(DAY_MS).saturating_add(HOUR_MS);
                for window in [0, 1, 3, 7, 28, 60] {
                    assert_eq!(
                        weekly.changes_in_window(now_ms, window, 0),
                        weekly.changes_in_window_day_by_day(now_ms, window, 0),
                        "{weekly:?} at {now_ms}, {window} days"
                    );
                }
            }
        }
    }

    #[test]
    fn changing_the_window_keeps_the_days_that_fit() {
        let mut changes = WeeklyChanges::default();
        for day in 0..28 {
            changes.record(at(day, 10), 28, KST);
        }
        changes.record(at(27, 11), 7, KST);
        assert_eq!(changes.changes_in_window(at(27, 12), 7, KST), 8);
        changes.record(at(27, 12), 28, KST);
        assert_eq!(changes.changes_in_window(at(27, 13), 28, KST), 9);
        changes.record(at(27, 13), 0, KST);
        assert_eq!(changes.changes_in_window(at(27, 14), 0, KST), 4);
    }

    #[test]
    fn counts_saturate() {
        let mut changes = WeeklyChanges::default();
        let mut hours = ChangeHours::default();
        for _ in 0..=u16::MAX {
            changes.record(at(0, 10), 28, KST);
        }
        hours.record(at(0, 10), u64::MAX, KST);
        hours.record(at(0, 10), 1, KST);
        assert_eq!(changes.changes_in_window(at(0, 11), 28, KST), u32::from(u16::MAX));
        assert_eq!(hours.slots()[0].update_size, u64::MAX);
    }

    #[test]
    fn a_new_url_is_rated_over_the_days_it_was_seen() {
        let mut changes = WeeklyChanges::default();
        changes.record(at(1, 10), 28, KST);
        changes.record(at(2, 10), 28, KST);
        let rate = changes.weekly_rate(at(2, 11), at(0, 11), 28, KST);
        assert!((rate - 7.0).abs() < 1e-9, "{rate}");
        let first_sighting = changes.weekly_rate(at(2, 11), at(2, 11), 28, KST);
        assert!((first_sighting - 14.0).abs() < 1e-9, "{first_sighting}");
    }

    #[test]
    fn the_histogram_is_sparse_sorted_and_sums_update_sizes() {
        let mut hours = ChangeHours::default();
        hours.record(FRIDAY_NIGHT_UTC, 40, KST);
        hours.record(at(0, 3), 5, KST);
        hours.record(FRIDAY_NIGHT_UTC + 10 * MINUTE_MS, 2, KST);
        assert_eq!(
            hours.slots(),
            [
                ChangeSlot { slot: 3, changes: 1, update_size: 5 },
                ChangeSlot { slot: 5 * 24 + 8, changes: 2, update_size: 42 },
            ]
        );
        assert_eq!(hours.total_changes(), 3);
    }

    /// u1 of the paper: 14 changes in three weeks, all between 09:00 and 15:00.
    #[test]
    fn u1_is_crawled_daily_at_midnight() {
        let mut changes = WeeklyChanges::default();
        let mut hours = ChangeHours::default();
        for i in 0..14 {
            let time = at(i * 3 / 2, 9 + i % 6);
            changes.record(time, 21, KST);
            hours.record(time, 100, KST);
        }
        let now = at(20, 23);
        let rate = changes.weekly_rate(now, now - 60 * DAY_MS, 21, KST);
        assert!((rate - 14.0 / 3.0).abs() < 1e-9, "{rate}");
        let group = FrequencyGroup::sixteen(rate);
        assert_eq!((group, group.six()), (FrequencyGroup::Weekly(5), FrequencyGroup::Weekly(7)));

        let time = crawl_time(&hours, group.six(), &CrawlTimeConfig::default());
        assert_eq!(time.paper_hour, Some(0));
        assert_eq!(time.weekdays, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(time.min_wait_hour, Some(15));
        assert!(time.min_wait_slot.is_some());
    }

    /// Tables 3.3 → 3.5 of the paper.
    #[test]
    fn the_paper_urls_fall_in_its_groups() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        let urls = [
            ("u1", 4.7, Weekly(5), Weekly(7)),
            ("u5", 3.3, Weekly(3), Weekly(3)),
            ("u3", 3.3, Weekly(3), Weekly(3)),
            ("u2", 2.7, Weekly(3), Weekly(3)),
            ("u4", 2.3, Weekly(2), Weekly(3)),
            ("u11", 2.3, Weekly(2), Weekly(3)),
            ("u10", 2.0, Weekly(2), Weekly(3)),
            ("u9", 1.0, Weekly(1), Weekly(1)),
            ("u8", 1.0, Weekly(1), Weekly(1)),
            ("u7", 1.0, Weekly(1), Weekly(1)),
            ("u6", 1.0, Weekly(1), Weekly(1)),
            ("u12", 1.0, Weekly(1), Weekly(1)),
            ("u15", 0.7, Weekly(1), Weekly(1)),
            ("u13", 0.3, Biweekly, Biweekly),
            ("u14", 0.0, Fourweekly, Fourweekly),
        ];
        for (url, rate, sixteen, six) in urls {
            let group = FrequencyGroup::sixteen(rate);
            assert_eq!((group, group.six()), (sixteen, six), "{url}");
        }
    }

    #[test]
    fn group_boundaries_round_half_away_from_zero() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        let cases = [
            (13.49, Weekly(13)),
            (13.5, Weekly(14)),
            (40.0, Weekly(14)),
            (f64::INFINITY, Weekly(14)),
            (4.5, Weekly(5)),
            (0.5, Weekly(1)),
            (0.49, Biweekly),
            (0.25, Biweekly),
            (0.24, Fourweekly),
            (-1.0, Fourweekly),
            (f64::NAN, Fourweekly),
        ];
        for (rate, group) in cases {
            assert_eq!(FrequencyGroup::sixteen(rate), group, "{rate}");
        }
        let six: Vec<_> = (1..=14).map(|crawls| Weekly(crawls).six()).collect();
        let expected = [1, 3, 3, 3, 7, 7, 7, 7, 7, 7, 14, 14, 14, 14].map(Weekly);
        assert_eq!(six, expected);
    }

    #[test]
    fn groups_are_named_and_serialised_as_in_the_paper() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        for (group, name) in [(Weekly(14), "G14"), (Weekly(1), "G1"), (Biweekly, "2G1"), (Fourweekly, "4G1")]
        {
            assert_eq!(group.to_string(), name);
            assert_eq!(name.parse(), Ok(group));
            // As it appears in a JSON message's field.
            let text = serde_json::to_string(&group).unwrap();
            assert_eq!(text, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<FrequencyGroup>(&text).unwrap(), group);
        }
        for bad in ["G0", "G15", "g3", "3G1", ""] {
            assert!(bad.parse::<FrequencyGroup>().is_err(), "{bad}");
        }
        assert_eq!(Weekly(3).crawls_per_week(), 3.0);
        assert_eq!(Biweekly.crawls_per_week(), 0.5);
        assert_eq!(Fourweekly.crawls_per_week(), 0.25);
    }

    /// The paper's timetable: weekdays by 6-group.
    #[test]
    fn weekdays_follow_the_six_group() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        let config = CrawlTimeConfig::default();
        let no_changes = ChangeHours::default();
        let every_day = vec![0, 1, 2, 3, 4, 5, 6];
        let cases = [
            (Weekly(12), every_day.clone()),
            (Weekly(7), every_day),
            (Weekly(2), vec![0, 2, 4]),
            (Weekly(1), vec![5]),
            (Biweekly, vec![5]),
            (Fourweekly, vec![5]),
        ];
        for (group, weekdays) in cases {
            let time = crawl_time(&no_changes, group, &config);
            assert_eq!(time.weekdays, weekdays, "{group}");
            assert_eq!((time.paper_hour, time.min_wait_hour, time.min_wait_slot), (None, None, None));
        }
    }

    #[test]
    fn the_paper_rule_compares_day_and_night_changes() {
        let config = CrawlTimeConfig::default();
        let group = FrequencyGroup::Weekly(7);
        let mut hours = ChangeHours::default();
        hours.record(at(0, 20), 0, KST);
        hours.record(at(1, 3), 0, KST);
        hours.record(at(1, 17), 0, KST);
        assert_eq!(crawl_time(&hours, group, &config).paper_hour, Some(12));
        hours.record(at(2, 9), 0, KST);
        assert_eq!(crawl_time(&hours, group, &config).paper_hour, Some(0), "a tie counts as day");

        let night_shift = CrawlTimeConfig { day_start_hour: 22, day_end_hour: 6, ..config };
        let mut late = ChangeHours::default();
        late.record(at(0, 23), 0, KST);
        late.record(at(0, 2), 0, KST);
        late.record(at(0, 12), 0, KST);
        assert_eq!(crawl_time(&late, group, &night_shift).paper_hour, Some(0));
    }

    #[test]
    fn the_linear_least_wait_search_equals_trying_every_slot() {
        let brute_force = |changes: &[u64]| {
            let len = changes.len();
            let wait = |crawl: usize| -> u64 {
                changes.iter().enumerate().map(|(j, &n)| n * ((crawl + 2 * len - j - 1) % len) as u64).sum()
            };
            (0..len).min_by_key(|&crawl| wait(crawl)).map(|crawl| crawl as u8)
        };
        for seed in 0..50u64 {
            let slots: Vec<u64> =
                (0..168u64).map(|i| (i * 7919 + seed * 104_729) % 97 % (seed % 5 + 2)).collect();
            assert_eq!(least_wait_position(&slots), brute_force(&slots), "seed {seed}");
            let hours: Vec<u64> = slots[..24].to_vec();
            if hours.iter().any(|&n| n > 0) {
                assert_eq!(least_wait_position(&hours), brute_force(&hours), "seed {seed}");
            }
        }
    }

    /// The week's slot comes from the slots seen, not from all 168: the same slot as the
    /// search over every slot, for histograms of a few busy slots or many, and for one out
    /// of order or past the week, which a damaged changelog could hold.
    #[test]
    fn the_least_wait_slot_from_the_slots_seen_equals_the_search_over_the_week() {
        let slot = |slot: u8, changes: u32| ChangeSlot { slot, changes, update_size: 0 };
        for seed in 0..200u64 {
            let busy = (seed % 40 + 1) as usize;
            let mut slots: Vec<ChangeSlot> = (0..busy)
                .map(|i| {
                    slot(((i as u64 * 7919 + seed * 104_729) % 168) as u8, ((i as u64 + seed) % 9) as u32)
                })
                .collect();
            slots.sort_by_key(|entry| entry.slot);
            slots.dedup_by_key(|entry| entry.slot);
            let hours = ChangeHours::with_slots(slots.into_boxed_slice());
            assert_eq!(hours.least_wait_slot(), least_wait_position(&hours.changes_by_slot()), "seed {seed}");
        }
        let damaged = ChangeHours::with_slots(
            vec![slot(200, 3), slot(5, 1), slot(5, 2), slot(0, 0)].into_boxed_slice(),
        );
        assert_eq!(damaged.least_wait_slot(), least_wait_position(&damaged.changes_by_slot()));
        assert_eq!(ChangeHours::default().least_wait_slot(), None);
        assert_eq!(ChangeHours::with_slots(vec![slot(9, 0)].into_boxed_slice()).least_wait_slot(), None);
        // Crawled at slot 4, the change of slot 3 waits no whole slot and the five of slot
        // 167 wait 4 each (20); at 0, after the five, the one waits 164.
        let late = ChangeHours::with_slots(vec![slot(3, 1), slot(167, 5)].into_boxed_slice());
        assert_eq!(late.least_wait_slot(), Some(4));
    }

    /// The least-wait hour and slot remembered with the histogram are those its slots
    /// give: searched for when first asked after each change, never before, and again
    /// after a round trip through the changelog's encoding, which stores the slots alone.
    #[test]
    fn the_remembered_least_wait_is_the_one_the_slots_give() {
        let found = |hours: &ChangeHours| LeastWait {
            hour: least_wait_position(&hours.changes_by_hour()),
            slot: hours.least_wait_slot(),
        };
        let mut hours = ChangeHours::default();
        assert_eq!(hours.least_wait(), LeastWait { hour: None, slot: None });
        for step in 0..300i64 {
            let at_ms = (step * 7_919 % 1_000) * 3_700_000 + step % 3 * 60_000;
            hours.record(at_ms, 1, KST);
            assert_eq!(hours.least_wait.get(), None, "forgotten at a change, step {step}");
            if step % 7 != 0 {
                // Some changes are never asked about: the next ask finds the latest.
                continue;
            }
            assert_eq!(hours.least_wait(), found(&hours), "step {step}");
            assert_eq!(hours.least_wait.get(), Some(found(&hours)), "remembered, step {step}");
        }
        let stored = serde_json::to_value(&hours).expect("serialises");
        assert_eq!(stored.as_object().map(|fields| fields.len()), Some(1), "the slots alone: {stored}");
        let read: ChangeHours = serde_json::from_value(stored).expect("reads");
        assert_eq!((read.least_wait.get(), read.least_wait()), (None, found(&hours)));
        let copy = hours.clone();
        assert_eq!(copy.least_wait.get(), hours.least_wait.get(), "a clone keeps what was found");
        let counts: [u64; HOURS_PER_DAY] = std::array::from_fn(|hour| (hour as u64 * 5) % 7);
        let from_counts = ChangeHours::from_hour_counts(&counts);
        assert_eq!(from_counts.least_wait(), found(&from_counts));
    }

    #[test]
    fn the_least_wait_crawl_follows_the_busiest_hours() {
        let config = CrawlTimeConfig::default();
        let group = FrequencyGroup::Weekly(7);
        let mut midnight = ChangeHours::default();
        midnight.record(at(6, 23), 0, KST);
        let time = crawl_time(&midnight, group, &config);
        assert_eq!((time.min_wait_hour, time.min_wait_slot), (Some(0), Some(0)));

        let mut wednesday = ChangeHours::default();
        wednesday.record(at(2, 9), 0, KST);
        wednesday.record(at(2, 10), 0, KST);
        wednesday.record(at(2, 10), 0, KST);
        let time = crawl_time(&wednesday, group, &config);
        assert_eq!((time.min_wait_hour, time.min_wait_slot), (Some(11), Some(2 * 24 + 11)));

        let mut everywhere = ChangeHours::default();
        for hour in 0..24 {
            everywhere.record(at(0, hour), 0, KST);
        }
        assert!(crawl_time(&everywhere, group, &config).min_wait_hour.is_some());
    }

    /// The paper's deployment. It reports 644 requests a day (53.8%) because its table
    /// counts 7 a day for the 216 URLs crawled three times a week and 6 a day for the 480
    /// weekly ones.
    #[test]
    fn the_paper_deployment_costs_two_thirds_of_daily_crawling() {
        use FrequencyGroup::{Biweekly, Fourweekly, Weekly};
        let groups = [
            (Weekly(14), 240),
            (Weekly(7), 144),
            (Weekly(3), 216),
            (Weekly(1), 480),
            (Biweekly, 60),
            (Fourweekly, 60),
        ];
        let (requests, share) = daily_load(&groups);
        assert!((requests - 5541.0 / 7.0).abs() < 1e-9, "{requests}");
        assert_eq!(requests.round(), 792.0);
        assert!((share - 0.66).abs() < 0.001, "{share}");
        assert_eq!(daily_load(&[]), (0.0, 0.0));
    }

    #[test]
    fn state_stays_small_and_survives_storage() {
        assert_eq!(std::mem::size_of::<WeeklyChanges>(), 24);
        // The slots' 16 and their least-wait hour and slot, padded.
        assert_eq!(std::mem::size_of::<ChangeHours>(), 24);
        assert_eq!(std::mem::size_of::<ChangeSlot>(), 16);

        let mut changes = WeeklyChanges::default();
        let mut hours = ChangeHours::default();
        for day in 0..28 {
            changes.record(at(day, 10), DEFAULT_WINDOW_DAYS, KST);
            hours.record(at(day, 10), 300, KST);
        }
        assert_eq!(std::mem::size_of_val(&*changes.ring), 56);
        assert_eq!(hours.slots().len(), 7);

        let stored = Stored(changes, hours);
        let bytes = encode(&stored).unwrap();
        assert_eq!(decode::<Stored>(&bytes).unwrap(), stored);
    }
}
