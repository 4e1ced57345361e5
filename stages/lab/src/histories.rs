//! `recrawl-lab histories`: a world of the family as the change histories a daily crawl of
//! it would record, in the `urlid_offset_history.txt` format `recrawl sim --replay` reads
//! (URL id, the first crawl's day, then per crawl the days since the previous one and
//! whether the page had changed). Replayed, such a history has no process behind it, only
//! the changes each page made, as a real crawl log has: the known-rate optimum is then told
//! each page's changes over the span (`docs/algorithms/worlds.md`).

use std::fmt::Write as _;

use clap::Args;
use recrawl::sim::web::{Truth, Web, WebParams, WorldKind};

#[derive(Debug, Args)]
pub struct HistoriesArgs {
    /// The world: web, periodic, bursty, drifting, heavy-tailed or mixed.
    #[arg(long, value_enum, default_value_t = WorldKind::Mixed)]
    pub world: WorldKind,
    /// Pages, one history each.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub pages: u64,
    /// Crawls, one a period, each a day of the history.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub periods: u64,
    /// Seed of the world: the same seed, the same histories.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One line per page: whether it changed between each two crawls, a crawl a period.
pub fn histories(args: &HistoriesArgs) -> String {
    let web = Web::generate(WebParams {
        seed: args.seed,
        sites: args.pages.div_ceil(100) as u32,
        pages_per_site: 100,
        world: args.world,
        run_periods: args.periods as f64,
        ..WebParams::default()
    });
    let truth = Truth::of_web(&web, args.periods as f64);
    let mut out = String::new();
    for page in 0..args.pages.min(web.len() as u64) as u32 {
        let mut changes = truth.changes(page).iter().peekable();
        let _ = write!(out, "{page}\t0\t[");
        for day in 1..=args.periods {
            let mut changed = false;
            while changes.next_if(|&&t| t <= day as f64).is_some() {
                changed = true;
            }
            let _ = write!(out, "{}[1,{}]", if day > 1 { "," } else { "" }, u8::from(changed));
        }
        out.push_str("]\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl::sim::replay::ReplayWorld;

    #[test]
    fn a_world_s_histories_replay_as_its_changes_a_day_apart() {
        let args = HistoriesArgs { world: WorldKind::Periodic, pages: 300, periods: 40, seed: 2 };
        let text = histories(&args);
        let replayed = ReplayWorld::parse(&text).expect("the replay format");
        assert_eq!(replayed.url_ids.len(), 300);
        let web = Web::generate(WebParams {
            seed: 2,
            sites: 3,
            pages_per_site: 100,
            world: WorldKind::Periodic,
            run_periods: 40.0,
            ..WebParams::default()
        });
        let truth = Truth::of_web(&web, 40.0);
        for page in 0..300u32 {
            // A day with changes is one change, midway between the crawls around it.
            let mut days: Vec<u64> = truth.changes(page).iter().map(|&t| t.ceil().max(1.0) as u64).collect();
            days.dedup();
            let midway: Vec<f64> = days.iter().map(|&day| day as f64 - 0.5).collect();
            assert_eq!(replayed.truth.changes(page), midway, "page {page}");
        }
    }
}
