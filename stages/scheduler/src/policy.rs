//! The scheduling rule of `spec/staleness-schedule.md`: each period pick the m pages with
//! the largest (T − t)·s_j(t) − p_j·g_i(t). Pure: the stage, benches and the simulator
//! call the same code.

use std::str::FromStr;

use thiserror::Error;

/// How T − t is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// T − t replaced by a constant window W.
    Rolling(u64),
    /// Horizons of T + 1 periods (t = 0..T) that restart; T − t shrinks to 0 at the end.
    Fixed(u64),
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("horizon {0:?}: expected rolling:W or fixed:T with a positive whole number")]
pub struct HorizonError(String);

impl FromStr for Horizon {
    type Err = HorizonError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let error = || HorizonError(raw.to_owned());
        let (kind, n) = raw.split_once(':').ok_or_else(error)?;
        let n: u64 = n.parse().map_err(|_| error())?;
        match kind {
            "rolling" if n > 0 => Ok(Self::Rolling(n)),
            "fixed" if n > 0 => Ok(Self::Fixed(n)),
            _ => Err(error()),
        }
    }
}

impl Horizon {
    /// T − t for `period`.
    pub fn remaining(self, period: u64) -> f64 {
        match self {
            Self::Rolling(window) => window as f64,
            Self::Fixed(horizon) => (horizon - period % horizon.saturating_add(1)) as f64,
        }
    }
}

/// s_j(t): 0 in the period after a download, +1 for every period without one. A page
/// never downloaded counts from the period it was discovered, as if downloaded just
/// before it.
pub fn staleness(period: u64, last_download: Option<u64>, discovered: u64) -> f64 {
    match last_download {
        // Periods come from input: saturate rather than overflow on a garbled one.
        Some(downloaded) => period.saturating_sub(downloaded.saturating_add(1)) as f64,
        None => period.saturating_sub(discovered) as f64 + 1.0,
    }
}

/// (T − t)·s − cost, with the cost p·g already converted to periods.
pub fn score(remaining: f64, staleness: f64, cost_periods: f64) -> f64 {
    remaining * staleness - cost_periods
}

/// Keeps the `m` best-scored candidates, best first; ties go to the smaller key so the
/// choice is deterministic. O(n) selection, then a sort of the m kept.
pub fn top_m<K: Ord>(candidates: &mut Vec<(f64, K)>, m: usize) {
    let better = |a: &(f64, K), b: &(f64, K)| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1));
    if m == 0 {
        candidates.clear();
        return;
    }
    if candidates.len() > m {
        candidates.select_nth_unstable_by(m - 1, better);
        candidates.truncate(m);
    }
    candidates.sort_unstable_by(better);
}

/// This instance's share of the m picks: partition p of `total` carries m / total picks,
/// plus one for the first m mod total partitions, so instances that own disjoint
/// partitions pick exactly m together without talking to each other.
pub fn quota(m: usize, assigned: &[i32], total: i32) -> usize {
    if total <= 0 {
        return 0;
    }
    let total = total as usize;
    assigned
        .iter()
        .filter(|&&p| p >= 0 && (p as usize) < total)
        .map(|&p| m / total + usize::from((p as usize) < m % total))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_follows_the_paper_recurrence() {
        // s(t+1) = (s(t) + 1)(1 − x(t)): downloaded in 4 → 0 in 5, 1 in 6.
        assert_eq!(staleness(5, Some(4), 0), 0.0);
        assert_eq!(staleness(6, Some(4), 0), 1.0);
        assert_eq!(staleness(4, Some(4), 0), 0.0);
        assert_eq!(staleness(7, None, 7), 1.0);
        assert_eq!(staleness(9, None, 7), 3.0);
    }

    #[test]
    fn equal_sizes_pick_the_stalest_and_equal_staleness_the_smallest() {
        let remaining = Horizon::Rolling(10).remaining(3);
        let mut by_staleness = vec![(score(remaining, 2.0, 0.5), "a"), (score(remaining, 5.0, 0.5), "b")];
        top_m(&mut by_staleness, 1);
        assert_eq!(by_staleness[0].1, "b");
        let mut by_size = vec![(score(remaining, 2.0, 0.9), "big"), (score(remaining, 2.0, 0.1), "small")];
        top_m(&mut by_size, 1);
        assert_eq!(by_size[0].1, "small");
    }

    #[test]
    fn top_m_matches_a_full_sort() {
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f64 / 1000.0
        };
        for m in [0, 1, 7, 50, 200] {
            let all: Vec<(f64, u32)> = (0..100).map(|k| ((next() * 4.0).floor(), k)).collect();
            let mut sorted = all.clone();
            sorted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            sorted.truncate(m);
            let mut picked = all;
            top_m(&mut picked, m);
            assert_eq!(picked, sorted, "m = {m}");
        }
    }

    #[test]
    fn extreme_periods_do_not_overflow() {
        assert_eq!(staleness(u64::MAX, Some(u64::MAX), 0), 0.0);
        assert_eq!(staleness(u64::MAX, None, 0), u64::MAX as f64 + 1.0);
        assert_eq!(Horizon::Fixed(u64::MAX).remaining(u64::MAX), u64::MAX as f64);
    }

    #[test]
    fn fixed_horizon_counts_down_and_restarts() {
        let fixed = Horizon::Fixed(3);
        let remaining: Vec<f64> = (0..6).map(|t| fixed.remaining(t)).collect();
        assert_eq!(remaining, vec![3.0, 2.0, 1.0, 0.0, 3.0, 2.0]);
        assert_eq!("rolling:7".parse(), Ok(Horizon::Rolling(7)));
        assert_eq!("fixed:9".parse(), Ok(Horizon::Fixed(9)));
        assert!("fixed:0".parse::<Horizon>().is_err());
        assert!("weekly".parse::<Horizon>().is_err());
    }

    #[test]
    fn quotas_of_disjoint_owners_sum_to_m() {
        for (m, total) in [(10, 7), (3, 7), (7, 7), (100, 7)] {
            let split: usize =
                [vec![0, 2, 4], vec![1], vec![3, 5, 6]].iter().map(|owned| quota(m, owned, total)).sum();
            let all: Vec<i32> = (0..total).collect();
            assert_eq!(quota(m, &all, total), m, "m = {m}, total = {total}");
            assert_eq!(split, m, "m = {m}");
        }
        assert_eq!(quota(5, &[], 6), 0);
    }
}
