//! The prediction models (`docs/algorithms/estimator.md` §4, §6) at the paper's sizes.
//!
//! - `predict_5_of_5/<model>`: one prediction of the next 5 requests after 4 successes and
//!   1 failure, against the popular group of Table 1, prepared once (the stage's case:
//!   a prediction per event).
//! - `prepare_prior`: preparing a group's prior from a fine histogram with every bin used
//!   (the stage does it when a group's distribution changes).
//! - `posterior_rate`: a URL's change rate from 12 comparisons, 5 changed, under a group
//!   prior (the estimator's case: one per event, beside `predict_5_of_5/paper`);
//!   `posterior_rate/flat`, the same under the flat prior, is what placing the URL in its
//!   group's counts costs, twice per event.

use criterion::{criterion_group, criterion_main, Criterion};
use recrawl_model::prediction::{predict, Kind, Model, PreparedPrior, RateHistogram, PAPER_POPULAR};
use recrawl_model::rate::{posterior_rate, RateCounts, RatePrior, RATE_BINS};
use std::hint::black_box;

fn models(c: &mut Criterion) {
    let prior = PreparedPrior::from_coarse_shares(&PAPER_POPULAR, 10);
    let mut group = c.benchmark_group("predict_5_of_5");
    for (name, model) in
        [("paper", Model::Paper), ("beta-binomial", Model::BetaBinomial), ("poisson", Model::Poisson)]
    {
        group.bench_function(name, |b| {
            b.iter(|| predict(black_box(model), Kind::Dr, black_box(&prior), black_box(4), black_box(1), 5))
        });
    }
    group.finish();

    let histogram = RateHistogram::from_counts(std::array::from_fn(|fine| (fine * 7 % 13) as u64 + 1));
    c.bench_function("prepare_prior", |b| b.iter(|| PreparedPrior::new(black_box(&histogram), 10)));

    let mut counts = RateCounts::default();
    (0..RATE_BINS).for_each(|bin| (0..bin % 7 + 1).for_each(|_| counts.add(bin)));
    let (grouped, flat) = (RatePrior::new(&counts), RatePrior::default());
    let mut group = c.benchmark_group("posterior_rate");
    for (name, prior) in [("group", &grouped), ("flat", &flat)] {
        group.bench_function(name, |b| {
            b.iter(|| posterior_rate(black_box(prior), black_box(12), black_box(5), black_box(3.5)))
        });
    }
    group.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
