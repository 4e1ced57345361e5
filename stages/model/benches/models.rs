//! The prediction models (`docs/algorithms/estimator.md` §4, §6) at the paper's sizes.
//!
//! - `predict_5_of_5/<model>`: one prediction of the next 5 requests after 4 successes and
//!   1 failure, against the popular group of Table 1, prepared once (the stage's case:
//!   a prediction per event).
//! - `predict_next`: the chance of a success at the next request after the same history,
//!   as the estimator asks it at every event (the simulator once a period per history): `forecast_of_1` through
//!   `predict(…, 1)`, `one_pass` with `predict_next`.
//! - `prepare_prior`: preparing a group's prior from a fine histogram with every bin used
//!   (the stage does it when a group's distribution changes).
//! - `posterior_rate`: a URL's change rate from 12 comparisons, 5 changed, under a group
//!   prior (the estimator's case: one per event, beside `predict_5_of_5/paper`);
//!   `posterior_rate/flat`, the same under the flat prior; `posterior_rate/dated`, under
//!   the group prior from 5 changes `Last-Modified` dated over 120 quiet periods (a URL
//!   whose dates are believed).
//! - `forecast/memoised`: the forecasts of `predict_5_of_5/beta-binomial` and
//!   `predict_next` for a history a group prior already gave them for (the estimator's
//!   usual case).
//! - `crawl_time/<n>_busy_slots`: a URL's crawl time (paper hour, least-wait hour and
//!   weekday slot), part of its refresh plan at every event, with changes seen in n of
//!   the week's 168 hours.
//! - `fit_rate_prior/400_evidences`: fitting a group's rate prior to 400 distinct
//!   evidences (a 1,000,000-page simulated web has about that many per group after 100
//!   periods); the stage does it once per group and partition each period.

use criterion::{criterion_group, criterion_main, Criterion};
use recrawl_model::prediction::{
    forecast, predict, predict_next, Kind, Model, PreparedPrior, RateHistogram, PAPER_POPULAR,
};
use recrawl_model::rate::{posterior_rate, RateCounts, RateEvidence, RateLikelihood, RatePrior};
use recrawl_model::refresh::{crawl_time, ChangeHours, CrawlTimeConfig, FrequencyGroup};
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

    // The chance of the next request alone, as the estimator asks it at every event:
    // through the one-step forecast, and the one-pass function.
    let mut group = c.benchmark_group("predict_next");
    group.bench_function("forecast_of_1/beta-binomial", |b| {
        b.iter(|| {
            predict(Model::BetaBinomial, Kind::Dr, black_box(&prior), black_box(4), black_box(1), 1)
                .probabilities[1]
        })
    });
    group.bench_function("one_pass/beta-binomial", |b| {
        b.iter(|| predict_next(Model::BetaBinomial, Kind::Dr, black_box(&prior), black_box(4), black_box(1)))
    });
    group.finish();

    let histogram = RateHistogram::from_counts(std::array::from_fn(|fine| (fine * 7 % 13) as u64 + 1));
    c.bench_function("prepare_prior", |b| b.iter(|| PreparedPrior::new(black_box(&histogram), 10)));

    // 400 distinct evidences: 1 to 13 comparisons, each number of changes, spacings of
    // 5 to 50 periods; some shared by several pages.
    let mut counts = RateCounts::default();
    let mut distinct = 0;
    'fill: for comparisons in 1..=20u32 {
        for changes in 0..=comparisons {
            for spacing in [5.0, 12.5, 20.0, 50.0] {
                (0..(comparisons + changes) % 7 + 1).for_each(|_| {
                    counts.replace(None, Some(RateEvidence::new(comparisons, changes, spacing)))
                });
                distinct += 1;
                if distinct == 400 {
                    break 'fill;
                }
            }
        }
    }
    c.bench_function("fit_rate_prior/400_evidences", |b| b.iter(|| RatePrior::new(black_box(&counts))));
    let (grouped, flat) = (RatePrior::new(&counts), RatePrior::default());
    let mut group = c.benchmark_group("posterior_rate");
    for (name, prior) in [("group", &grouped), ("flat", &flat)] {
        group.bench_function(name, |b| {
            b.iter(|| posterior_rate(black_box(prior), black_box(12), black_box(5), black_box(3.5)))
        });
    }
    // A group's pages share few (comparisons, changes, spacing): most find theirs computed.
    group.bench_function("memoised", |b| {
        b.iter(|| black_box(&grouped).compared_posterior(black_box(12), black_box(5), black_box(3.5)))
    });
    group.bench_function("dated", |b| {
        b.iter(|| RateLikelihood::dated(black_box(5), black_box(120.0)).posterior(black_box(&grouped)))
    });
    group.finish();

    // The forecasts the estimator asks per event, from the prior's memo (beside
    // `predict_5_of_5/beta-binomial`, what a miss computes, and `predict_next`).
    let group_prior = PreparedPrior::new(&histogram, 10);
    forecast(Model::BetaBinomial, Kind::Mr, &group_prior, 4, 1, 5);
    c.bench_function("forecast/memoised", |b| {
        b.iter(|| {
            forecast(Model::BetaBinomial, Kind::Mr, black_box(&group_prior), black_box(4), black_box(1), 5)
        })
    });

    // A URL's crawl time (its refresh plan, every event) with changes seen in 1, 12 or
    // all 168 of the week's hours, and the same after a change is recorded there (the
    // least-wait hour and slot searched for again).
    let mut group = c.benchmark_group("crawl_time");
    for busy in [1_i64, 12, 168] {
        let mut hours = ChangeHours::default();
        for slot in 0..busy {
            hours.record(slot * 168 / busy * HOUR_MS, 100, 0);
        }
        let config = CrawlTimeConfig::default();
        group.bench_function(format!("{busy}_busy_slots"), |b| {
            b.iter(|| crawl_time(black_box(&hours), FrequencyGroup::Weekly(7), &config))
        });
        group.bench_function(format!("{busy}_busy_slots_record"), |b| {
            b.iter_batched_ref(
                || hours.clone(),
                |hours| {
                    hours.record(black_box(5 * HOUR_MS), 100, 0);
                    crawl_time(hours, FrequencyGroup::Weekly(7), &config)
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

const HOUR_MS: i64 = 3_600_000;

criterion_group!(benches, models);
criterion_main!(benches);
