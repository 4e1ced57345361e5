//! What a URL's `Last-Modified` headers say of its changes
//! (`docs/algorithms/freshness-limits.md`, "Dated changes").
//!
//! A download whose header dates the page's latest change at L, fetched at t, shows no
//! change in (L, t] and one at L. Over a run of downloads the likelihood of a Poisson
//! rate λ is then λ^K·e^{−λQ}, K the changes dated and Q the time known to have passed
//! without one (Cho & Garcia-Molina, 2003, estimate λ from the same two sums), where
//! comparisons alone give only 1 − e^{−λt} for an interval that changed. A page whose
//! copy is old by a year says at its first download what many unchanged visits would.
//!
//! Servers also send the time of the response as `Last-Modified`, or a date that does not
//! move when the content does. A URL's headers never count after a date disagrees with
//! the content (refuted): moved without a change, not moved past the previous download
//! with one, absent with one, or past the fetch by more than the clocks' skew. Short of
//! that, they count on their own once confirmed ([`DateVerdict::Truthful`]): a change
//! dated after the first download, to a time before the download, which a date that never
//! moves cannot show, nor the time of the response (a 304 without a date does not move
//! the download past a date at the previous one). A server clock over a minute slow can
//! still make the time of the response look confirmed; its changes then count as at each
//! fetch, which overstates the rate, so the page is fetched more, not less.
//!
//! An unchanged download that kept the date (proven) is not enough alone: a date that
//! never moves passes it until the page changes, and then claims the page has been quiet
//! since, say, a year; believed, it makes a page that changes hourly look static, so it is
//! never fetched again and never found out. Proven but unconfirmed dates (a page that has
//! not changed while watched, as every static page) count only while the URL's group has
//! shown its server dates changes ([`DateTally`]).

use serde::{Deserialize, Serialize};

/// How far a server's clock may run ahead of the crawler's: a date up to this far past
/// the fetch is taken as at the fetch.
pub const CLOCK_SKEW_MS: i64 = 60_000;

/// Whether a download that found its page changed since the previous download (fetched
/// at `previous_download_ms`) dates that change at `last_modified_ms` as only a truthful
/// server can: after the previous download, and before this one by more than the clocks'
/// skew. A date that never moves is not after the previous download, and the time of the
/// response is that of the download; [`DatedChanges::verdict`] confirms a URL's dates on
/// the same two conditions.
pub fn dates_the_change(last_modified_ms: i64, previous_download_ms: i64, fetched_at_ms: i64) -> bool {
    last_modified_ms > previous_download_ms && last_modified_ms < fetched_at_ms.saturating_sub(CLOCK_SKEW_MS)
}

/// Whether a URL's dates have agreed with its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DateTrust {
    /// No unchanged download has kept its date yet.
    Unproven,
    /// One has, and none has disagreed.
    Proven,
    /// A date disagreed with the content, or a changed download came without one.
    Refuted,
}

/// The dated evidence of one URL, built from its downloads in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatedChanges {
    /// The latest download's `Last-Modified`, Unix ms.
    pub last_modified_ms: i64,
    /// When the latest download was fetched, Unix ms.
    pub last_download_ms: i64,
    /// Changes whose time a header gave (the change before the first download among them).
    pub changes: u32,
    /// Time known to have passed without a change, ms.
    pub quiet_ms: u64,
    pub trust: DateTrust,
}

impl DatedChanges {
    /// The evidence after a download fetched at `fetched_at_ms` with `last_modified_ms`
    /// (`None`: no usable header), `changed` as the comparison with the previous download
    /// says (`None`: not compared). `before` is the evidence so far.
    pub fn observe(
        before: Option<DatedChanges>,
        fetched_at_ms: i64,
        last_modified_ms: Option<i64>,
        changed: Option<bool>,
    ) -> Option<DatedChanges> {
        let refuted = |evidence: DatedChanges| Some(DatedChanges { trust: DateTrust::Refuted, ..evidence });
        let age = |at: i64| u64::try_from(fetched_at_ms.saturating_sub(at)).unwrap_or(0);
        let Some(modified) = last_modified_ms else {
            return before.and_then(|evidence| match changed {
                // A date at the previous download may be the time of that response: a 304
                // without one says nothing of it, and moving the download past it would
                // make it look like a date before its download ([`Self::verdict`]). The
                // next dated download counts the quiet time since.
                Some(false)
                    if evidence.trust != DateTrust::Refuted
                        && evidence.last_modified_ms
                            >= evidence.last_download_ms.saturating_sub(CLOCK_SKEW_MS) =>
                {
                    Some(evidence)
                }
                // A 304 need not repeat the date (RFC 9110 §15.4.5): the same content kept it.
                Some(false) if evidence.trust != DateTrust::Refuted => Some(DatedChanges {
                    last_download_ms: fetched_at_ms.max(evidence.last_download_ms),
                    quiet_ms: evidence.quiet_ms.saturating_add(age(evidence.last_download_ms)),
                    ..evidence
                }),
                _ => refuted(evidence),
            });
        };
        let dated_at = modified.min(fetched_at_ms);
        if modified > fetched_at_ms.saturating_add(CLOCK_SKEW_MS) {
            // A date in the future says nothing of the change before it.
            return before.and_then(refuted);
        }
        let Some(evidence) = before else {
            return Some(DatedChanges {
                last_modified_ms: modified,
                last_download_ms: fetched_at_ms,
                changes: 1,
                quiet_ms: age(dated_at),
                trust: DateTrust::Unproven,
            });
        };
        if evidence.trust == DateTrust::Refuted {
            return Some(evidence);
        }
        let kept_its_date = modified == evidence.last_modified_ms;
        let moved_past_the_download = modified > evidence.last_download_ms;
        let (changes, quiet, trust) = match (changed, kept_its_date, moved_past_the_download) {
            // Unchanged with its date: quiet since the previous download, and proven.
            (Some(false), true, _) => (evidence.changes, age(evidence.last_download_ms), DateTrust::Proven),
            // Changed, dated after the previous download: one change, quiet since.
            (Some(true), false, true) | (None, false, true) => {
                (evidence.changes.saturating_add(1), age(dated_at), evidence.trust)
            }
            // Not compared but the date held: the header says no change.
            (None, true, _) => (evidence.changes, age(evidence.last_download_ms), evidence.trust),
            _ => return refuted(evidence),
        };
        Some(DatedChanges {
            last_modified_ms: modified,
            last_download_ms: fetched_at_ms.max(evidence.last_download_ms),
            changes,
            quiet_ms: evidence.quiet_ms.saturating_add(quiet),
            trust,
        })
    }

    /// (changes dated, periods known quiet) where the dates can be believed: confirmed on
    /// the URL, or proven where `server_trusted` (its group's [`DateTally::trusted`]).
    pub fn believed(&self, period_ms: u64, server_trusted: bool) -> Option<(u32, f64)> {
        let believed = match self.verdict() {
            Some(DateVerdict::Truthful) => true,
            Some(DateVerdict::False) => false,
            None => server_trusted && self.await_trust(),
        };
        (believed && period_ms > 0).then(|| (self.changes, self.quiet_ms as f64 / period_ms as f64))
    }

    /// Whether the dates are proven but not confirmed on the URL: they count exactly while
    /// its group's server is trusted, so the URL's rate moves when that trust does.
    pub fn await_trust(&self) -> bool {
        self.trust == DateTrust::Proven && self.verdict().is_none()
    }

    /// What the URL's dates have shown of its server, if anything yet: false once refuted;
    /// truthful while not refuted, with a change dated after the first download, and the
    /// latest date more than the clocks' skew before the latest download (a date that
    /// never moves cannot show a second change, and the time of the response is the time
    /// of the download).
    pub fn verdict(&self) -> Option<DateVerdict> {
        match self.trust {
            DateTrust::Refuted => Some(DateVerdict::False),
            _ if self.changes >= 2
                && self.last_modified_ms < self.last_download_ms.saturating_sub(CLOCK_SKEW_MS) =>
            {
                Some(DateVerdict::Truthful)
            }
            DateTrust::Proven | DateTrust::Unproven => None,
        }
    }
}

/// What a URL's dates showed of its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateVerdict {
    /// They dated a change after the first download, to a time before the download.
    Truthful,
    /// They disagreed with it.
    False,
}

/// A group's URLs by the verdict of their dates, kept as its URLs are observed, and
/// whether the group's proven dates are believed, as of the last [`Self::settle`]: the
/// estimator settles it as a period begins, with the rate prior, so a period's estimates
/// do not depend on the order its requests are applied in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DateTally {
    truthful: u32,
    false_dates: u32,
    trusted: bool,
}

impl DateTally {
    /// Least share of a group's judged URLs whose dates must have been truthful for the
    /// group's merely proven dates to be believed: a server dates all its pages alike, but
    /// a host may serve a few pages another way.
    pub const TRUSTED_SHARE: f64 = 0.9;

    /// Moves one URL from verdict `before` to `after`.
    pub fn replace(&mut self, before: Option<DateVerdict>, after: Option<DateVerdict>) {
        for (verdict, step) in [(before, false), (after, true)] {
            let count = match verdict {
                Some(DateVerdict::Truthful) => &mut self.truthful,
                Some(DateVerdict::False) => &mut self.false_dates,
                None => continue,
            };
            *count = if step { count.saturating_add(1) } else { count.saturating_sub(1) };
        }
    }

    /// Decides from the verdicts so far whether the group's proven dates are believed:
    /// some of its URLs confirmed theirs, and at least [`Self::TRUSTED_SHARE`] of those
    /// judged.
    pub fn settle(&mut self) {
        let judged = f64::from(self.truthful) + f64::from(self.false_dates);
        self.trusted = self.truthful > 0 && f64::from(self.truthful) >= Self::TRUSTED_SHARE * judged;
    }

    /// Whether the group's proven dates were believed at the last [`Self::settle`].
    pub fn trusted(&self) -> bool {
        self.trusted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    /// Downloads at the given hours with their header's hour and comparison.
    fn run(downloads: &[(i64, Option<i64>, Option<bool>)]) -> Option<DatedChanges> {
        downloads.iter().fold(None, |before, &(at, modified, changed)| {
            DatedChanges::observe(before, at * HOUR, modified.map(|hour| hour * HOUR), changed)
        })
    }

    #[test]
    fn a_truthful_server_dates_each_change_and_the_quiet_time_between() {
        // Changes at hours −100 (before the first download), 15 and 27; downloads at 0,
        // 10, 20, 30.
        let evidence = run(&[
            (0, Some(-100), None),
            (10, Some(-100), Some(false)),
            (20, Some(15), Some(true)),
            (30, Some(27), Some(true)),
        ])
        .unwrap();
        assert_eq!((evidence.trust, evidence.verdict()), (DateTrust::Proven, Some(DateVerdict::Truthful)));
        // Dated: −100, 15, 27. Quiet: (−100, 10] = 110, (15, 20] = 5, (27, 30] = 3.
        assert_eq!(evidence.believed(HOUR as u64, false), Some((3, 118.0)));
    }

    /// Kept by an unchanged download, a date may still be one that never moves: alone it
    /// counts only where the URL's group has shown its server dates changes. Moved with a
    /// change, to before the fetch, it is neither stuck nor the time of the response.
    #[test]
    fn a_kept_date_counts_only_where_the_server_is_trusted_and_a_moved_one_on_its_own() {
        let held = run(&[(0, Some(-100), None), (10, Some(-100), Some(false))]).unwrap();
        assert_eq!((held.trust, held.verdict()), (DateTrust::Proven, None));
        assert_eq!(held.believed(HOUR as u64, false), None);
        assert_eq!(held.believed(HOUR as u64, true), Some((1, 110.0)));
        let moved = run(&[(0, Some(-5), None), (10, Some(8), Some(true))]).unwrap();
        assert_eq!((moved.trust, moved.verdict()), (DateTrust::Unproven, Some(DateVerdict::Truthful)));
        assert_eq!(moved.believed(HOUR as u64, false), Some((2, 5.0 + 2.0)));
        // Kept later, it counts what came before.
        let kept =
            run(&[(0, Some(-5), None), (10, Some(8), Some(true)), (12, Some(8), Some(false))]).unwrap();
        assert_eq!(kept.believed(HOUR as u64, false), Some((2, 5.0 + 2.0 + 2.0)));
        // Not yet shown anything: the first download, a date moved to the fetch (the time
        // of the response, a minute's skew allowed).
        let first = run(&[(0, Some(-5), None)]).unwrap();
        let at_the_fetch = run(&[(0, Some(0), None), (10, Some(10), Some(true))]).unwrap();
        for silent in [first, at_the_fetch] {
            assert_eq!(silent.verdict(), None);
            assert_eq!(silent.believed(HOUR as u64, true), None, "{silent:?}");
        }
    }

    #[test]
    fn a_group_trusts_its_servers_dates_once_nine_in_ten_of_its_judged_urls_confirmed_theirs() {
        use DateVerdict::{False, Truthful};
        let mut tally = DateTally::default();
        tally.settle();
        assert!(!tally.trusted(), "nothing shown yet");
        for _ in 0..9 {
            tally.replace(None, Some(Truthful));
        }
        tally.replace(None, Some(False));
        assert!(!tally.trusted(), "settled only when asked");
        tally.settle();
        assert!(tally.trusted(), "9 of 10");
        tally.replace(None, Some(False));
        tally.settle();
        assert!(!tally.trusted(), "9 of 11");
        // A URL refuted after it confirmed moves between the counts.
        tally.replace(Some(False), None);
        tally.replace(Some(Truthful), Some(False));
        tally.settle();
        assert!(!tally.trusted(), "8 of 10");
        tally.replace(Some(False), Some(Truthful));
        tally.settle();
        assert!(tally.trusted());
        // Removing from an empty count saturates.
        let mut empty = DateTally::default();
        empty.replace(Some(False), Some(Truthful));
        empty.settle();
        assert!(empty.trusted());
    }

    #[test]
    fn dates_that_disagree_with_the_content_are_refuted_for_good() {
        // The time of the response: the date moves without a change.
        let now = run(&[(0, Some(0), None), (10, Some(10), Some(false))]).unwrap();
        assert_eq!(now.trust, DateTrust::Refuted);
        // A date that does not move when the content does.
        let stuck =
            run(&[(0, Some(-3), None), (10, Some(-3), Some(false)), (20, Some(-3), Some(true))]).unwrap();
        assert_eq!(stuck.trust, DateTrust::Refuted);
        // Refuted stays refuted, whatever comes after.
        let after =
            run(&[(0, Some(0), None), (10, Some(10), Some(false)), (20, Some(10), Some(false))]).unwrap();
        assert_eq!((after.trust, after.believed(HOUR as u64, true)), (DateTrust::Refuted, None));
        for refuted in [now, stuck, after] {
            assert_eq!(refuted.verdict(), Some(DateVerdict::False));
        }
        // A change without the header, or with a date in the future.
        let dropped =
            run(&[(0, Some(-3), None), (10, Some(-3), Some(false)), (20, None, Some(true))]).unwrap();
        assert_eq!(dropped.trust, DateTrust::Refuted);
        let future =
            run(&[(0, Some(-3), None), (10, Some(-3), Some(false)), (20, Some(30), Some(true))]).unwrap();
        assert_eq!(future.trust, DateTrust::Refuted);
        assert_eq!(run(&[(0, None, None)]), None);
    }

    #[test]
    fn an_unchanged_download_without_the_header_is_a_304_that_kept_the_date() {
        let evidence =
            run(&[(0, Some(-3), None), (10, None, Some(false)), (20, Some(-3), Some(false))]).unwrap();
        assert_eq!(evidence.believed(HOUR as u64, true), Some((1, 23.0)));
        // The time of the response, then a 304 without it: still no verdict, and the
        // quiet time is counted at the next dated download.
        let response_time = [(0, Some(0), None), (10, Some(10), Some(true)), (20, None, Some(false))];
        let after_304 = run(&response_time).unwrap();
        assert_eq!((after_304.verdict(), after_304.last_download_ms), (None, 10 * HOUR));
        let kept = run(&[response_time.as_slice(), &[(30, Some(10), Some(false))]].concat()).unwrap();
        assert_eq!(kept.quiet_ms, 20 * HOUR as u64);
    }

    #[test]
    fn a_date_just_past_the_fetch_is_clock_skew_and_hostile_values_saturate() {
        let skewed = DatedChanges::observe(None, HOUR, Some(HOUR + CLOCK_SKEW_MS), None).unwrap();
        assert_eq!((skewed.quiet_ms, skewed.changes), (0, 1));
        let far = DatedChanges::observe(None, i64::MAX, Some(i64::MIN), None).unwrap();
        assert_eq!(far.quiet_ms, i64::MAX as u64);
        let later = DatedChanges { quiet_ms: u64::MAX - 1, ..far };
        let later = DatedChanges::observe(Some(later), i64::MAX, Some(i64::MIN), Some(false)).unwrap();
        assert_eq!((later.quiet_ms, later.trust), (u64::MAX - 1, DateTrust::Proven));
        // A download fetched before the previous one adds no quiet time.
        let earlier = DatedChanges::observe(Some(later), 0, Some(i64::MIN), Some(false)).unwrap();
        assert_eq!(earlier.quiet_ms, u64::MAX - 1);
        assert_eq!(later.believed(0, true), None);
    }

    proptest::proptest! {
        /// Whatever servers send and in whatever order downloads come: no panic, the sums
        /// never shrink, and a refuted URL stays refuted.
        #[test]
        fn any_sequence_of_headers_keeps_the_sums_growing_and_refutation_final(
            downloads in proptest::collection::vec(
                (proptest::prelude::any::<i64>(), proptest::option::of(proptest::prelude::any::<i64>()), proptest::option::of(proptest::prelude::any::<bool>())),
                0..40,
            ),
        ) {
            let mut evidence: Option<DatedChanges> = None;
            for (fetched_at_ms, last_modified_ms, changed) in downloads {
                let next = DatedChanges::observe(evidence, fetched_at_ms, last_modified_ms, changed);
                if let Some(before) = evidence {
                    let after = next.expect("evidence is never dropped");
                    proptest::prop_assert!(after.changes >= before.changes && after.quiet_ms >= before.quiet_ms);
                    if before.trust == DateTrust::Refuted {
                        proptest::prop_assert_eq!(after, before);
                    }
                }
                evidence = next;
            }
        }
    }
}
