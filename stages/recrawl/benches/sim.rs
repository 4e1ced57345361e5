//! The policy simulator on a 100,000-page web, ten periods of 20,000 picks: learned
//! policies (estimator functions, book update and the scheduler's `choose` every period)
//! against change-proportional crawling in the same run, a credit schedule with nothing
//! to learn; the optimum adds solving for its frequencies; and generating the truth.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use recrawl::sim::simulate::{run_policy, SimConfig, SimPolicy, SimulatedWeb};
use recrawl::sim::web::{Truth, Web, WebParams};
use recrawl_scheduler::policy::Policy;

fn policies(c: &mut Criterion) {
    let web = Web::generate(WebParams { sites: 1000, pages_per_site: 100, ..WebParams::default() });
    let config = SimConfig { periods: 10, threads: 1, ..SimConfig::default() };
    let world = SimulatedWeb { truth: Truth::of_web(&web, config.periods as f64), web: &web };
    let mut group = c.benchmark_group("sim_100000_pages_10_periods");
    group.sample_size(10);
    for policy in [
        SimPolicy::Proportional,
        SimPolicy::Optimum,
        SimPolicy::Scheduler(Policy::Uniform),
        SimPolicy::Scheduler(Policy::ChangeAware),
        SimPolicy::Scheduler(Policy::LambdaCrawl),
        SimPolicy::Scheduler(Policy::Freshness),
    ] {
        group.bench_function(policy.name(), |b| b.iter(|| black_box(run_policy(&world, policy, &config))));
    }
    group
        .bench_function("truth_of_web", |b| b.iter(|| black_box(Truth::of_web(&web, config.periods as f64))));
    group.finish();
}

criterion_group!(benches, policies);
criterion_main!(benches);
