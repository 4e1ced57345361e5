//! How many requests a policy needs to be as fresh as a reference policy (round robin),
//! from runs at several budgets: the freshness issue's "reaches uniform's freshness with
//! ≤ 60 % of uniform's requests", measured by `recrawl sim` itself.

use serde::Serialize;

use super::simulate::PolicyResult;

/// One policy's need at one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestsToMatch {
    pub policy: &'static str,
    pub budget: f64,
    /// The policy's requests for the reference's freshness at `budget`, as a share of the
    /// reference's requests there.
    pub share: f64,
    pub bound: Bound,
}

/// How `share` bounds the need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// Interpolated between two runs.
    Exact,
    /// At the fewest requests run the policy was already at least as fresh.
    AtMost,
    /// Not as fresh at the most requests run.
    MoreThan,
}

/// For every policy but `reference` and every budget of `runs` (each budget's results, as
/// `simulate` returns them), the requests the policy needs to match the reference's
/// freshness there. Between two runs of the policy its freshness is taken as linear in
/// its requests; the first crossing counts, as freshness need not rise with requests
/// (the paper's rule).
pub fn requests_to_match(runs: &[(f64, Vec<PolicyResult>)], reference: &str) -> Vec<RequestsToMatch> {
    let Some((_, first)) = runs.first() else { return Vec::new() };
    let mut needs = Vec::new();
    for policy in first.iter().map(|r| r.name).filter(|&name| name != reference) {
        let mut curve: Vec<(f64, f64)> = runs
            .iter()
            .filter_map(|(_, results)| find(results, policy))
            .map(|r| (r.requests as f64, r.freshness))
            .collect();
        curve.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (budget, results) in runs {
            let Some(target) = find(results, reference).filter(|r| r.requests > 0) else { continue };
            let Some((requests, bound)) = crossing(&curve, target.freshness) else { continue };
            needs.push(RequestsToMatch {
                policy,
                budget: *budget,
                share: requests / target.requests as f64,
                bound,
            });
        }
    }
    needs
}

fn find<'a>(results: &'a [PolicyResult], name: &str) -> Option<&'a PolicyResult> {
    results.iter().find(|result| result.name == name)
}

/// The requests at which the (requests, freshness) curve first reaches `target`, or the
/// bound its ends give; `None` for an empty curve.
fn crossing(curve: &[(f64, f64)], target: f64) -> Option<(f64, Bound)> {
    let (&(fewest, freshness), &(most, _)) = (curve.first()?, curve.last()?);
    if freshness >= target {
        return Some((fewest, Bound::AtMost));
    }
    let crossed = curve.windows(2).find_map(|pair| {
        let [(r0, f0), (r1, f1)] = [pair[0], pair[1]];
        (f0 < target && target <= f1).then(|| r0 + (target - f0) / (f1 - f0) * (r1 - r0))
    });
    Some(crossed.map_or((most, Bound::MoreThan), |requests| (requests, Bound::Exact)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &'static str, requests: u64, freshness: f64) -> PolicyResult {
        PolicyResult {
            name,
            sees_truth: false,
            freshness,
            age: 0.0,
            harmonic_cost: 0.0,
            paper_staleness: 0.0,
            requests,
            sitemap_requests: 0,
            wasted_requests: 0,
            unchanged_downloads: 0,
            failures: 0,
            ratio_to_optimum: None,
            ratio_to_clairvoyant: None,
            seconds: 0.0,
            freshness_by_period: Vec::new(),
        }
    }

    #[test]
    fn the_need_is_interpolated_between_the_runs_that_straddle_it() {
        let runs = vec![
            (0.1, vec![result("uniform", 100, 0.50), result("learned", 100, 0.60), result("slow", 50, 0.10)]),
            (
                0.2,
                vec![result("uniform", 200, 0.70), result("learned", 200, 0.80), result("slow", 100, 0.20)],
            ),
            (
                0.4,
                vec![result("uniform", 400, 0.90), result("learned", 400, 0.85), result("slow", 200, 0.30)],
            ),
        ];
        let needs = requests_to_match(&runs, "uniform");
        let need = |policy: &str, budget: f64| {
            needs.iter().find(|n| n.policy == policy && n.budget == budget).map(|n| (n.share, n.bound))
        };
        // Uniform's 0.70 lies between learned's 0.60 at 100 and 0.80 at 200: 150 of 200.
        let (share, bound) = need("learned", 0.2).unwrap();
        assert!((share - 0.75).abs() < 1e-12 && bound == Bound::Exact, "{share} {bound:?}");
        // Learned is fresher than uniform's 0.50 already at its fewest requests.
        assert_eq!(need("learned", 0.1), Some((1.0, Bound::AtMost)));
        // Neither reaches uniform's 0.90: more than their most requests, 400 and 200.
        assert_eq!(need("learned", 0.4), Some((1.0, Bound::MoreThan)));
        assert_eq!(need("slow", 0.1), Some((2.0, Bound::MoreThan)));
        assert!(needs.iter().all(|n| n.policy != "uniform"));
        assert_eq!(needs.len(), 6);
    }

    #[test]
    fn the_first_crossing_counts_when_freshness_falls_with_requests() {
        let curve = [(10.0, 0.2), (20.0, 0.6), (30.0, 0.4), (40.0, 0.8)];
        assert_eq!(crossing(&curve, 0.5), Some((17.5, Bound::Exact)));
        // Past 0.6 at 20 the curve falls to 0.4 at 30 and crosses 0.7 on the way to 40.
        assert_eq!(crossing(&curve, 0.7), Some((37.5, Bound::Exact)));
        assert_eq!(crossing(&curve, 0.9), Some((40.0, Bound::MoreThan)));
        assert_eq!(crossing(&curve, 0.1), Some((10.0, Bound::AtMost)));
        assert_eq!(crossing(&[], 0.5), None);
    }
}
