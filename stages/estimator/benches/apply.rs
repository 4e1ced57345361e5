//! The estimator's per-event path: apply a change event to the URL's state and its
//! partition's share of the group, then predict downloads and changes and build the
//! refresh plan — the work `recrawl-estimator` does per input message, without Kafka.
//!
//! - `apply/<model>`: one period of 20,000 URLs (4 partitions, 8 groups), after 6 periods
//!   of history, in batches of 500 with the shares filed after each batch as the stage does;
//!   the state restored before the clock starts.
//! - `apply/record_only` (baseline, same run): the same events, only the state lookup and
//!   the request counters — what any per-URL state costs before estimating anything.

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use recrawl_common::StateStore;
use recrawl_estimator::estimate::{Estimator, EstimatorState, GroupBy, Settings};
use recrawl_model::history::{Observation, PageHistory};
use recrawl_model::prediction::Model;
use recrawl_schemas::{ChangeEvent, RequestOutcome};
use support::clone_store;

const URLS: u64 = 20_000;
const HISTORY_PERIODS: u64 = 6;
const BATCH: usize = 500;

fn event(index: u64, period: u64) -> (i32, ChangeEvent) {
    let url = format!("http://h{}.example/{index}.html", index % 97);
    let downloaded = !(index.is_multiple_of(11) && period.is_multiple_of(2));
    let changed =
        (downloaded && period > 1).then_some(index.is_multiple_of(3) || (index + period).is_multiple_of(5));
    let outcome = RequestOutcome {
        period,
        downloaded,
        changed,
        fetched_at_ms: 1_780_000_000_000 + (period * 3_600_000 + index) as i64,
    };
    let event = ChangeEvent {
        latency_ms: 25.0,
        size_bytes: 10_000 + index,
        size_change_bytes: changed.map(|c| if c { 12 } else { 0 }),
        // 97 hosts on 8 sites: grouped by site, as schema 1's events were by label.
        ..ChangeEvent::request(&url, &format!("h{}.site{}.example", index % 97, index % 8), outcome)
    };
    ((index % 4) as i32, event)
}

fn period_events(period: u64) -> Vec<(i32, ChangeEvent)> {
    (0..URLS).map(|index| event(index, period)).collect()
}

fn apply_all(
    estimator: &mut Estimator,
    state: &mut StateStore<EstimatorState>,
    events: &[(i32, ChangeEvent)],
) {
    for batch in events.chunks(BATCH) {
        for (partition, event) in batch {
            std::hint::black_box(estimator.apply(event, *partition, state, 0));
        }
        std::hint::black_box(estimator.take_partials(0));
        state.take_dirty();
    }
}

fn bench(c: &mut Criterion) {
    let measured = period_events(HISTORY_PERIODS + 1);
    let mut group = c.benchmark_group("apply");
    group.throughput(Throughput::Elements(URLS));
    group.sample_size(10);
    for (name, model) in
        [("paper", Model::Paper), ("beta-binomial", Model::BetaBinomial), ("poisson", Model::Poisson)]
    {
        // Each iteration replays the same period onto a copy of the state as it was.
        group.bench_function(name, |b| {
            // Built here, so that a filter leaving the model out skips its history.
            let mut estimator =
                Estimator::new(Settings { model, group_by: GroupBy::Site, ..Settings::default() });
            let mut state = StateStore::default();
            for period in 1..=HISTORY_PERIODS {
                apply_all(&mut estimator, &mut state, &period_events(period));
            }
            b.iter_batched_ref(
                || {
                    // Restoring is the restore bench's cost, not an event's.
                    let mut fresh =
                        Estimator::new(Settings { model, group_by: GroupBy::Site, ..Settings::default() });
                    let mut copy = clone_store(&state);
                    for partition in 0..4 {
                        fresh.restored(partition, &mut copy);
                    }
                    fresh.take_partials(0);
                    (fresh, copy)
                },
                |(fresh, copy)| apply_all(fresh, copy, &measured),
                BatchSize::PerIteration,
            )
        });
    }
    group.bench_function("record_only", |b| {
        b.iter_batched_ref(
            StateStore::<PageHistory>::default,
            |state| {
                for (partition, event) in &measured {
                    let history = state.get_or_insert_with(*partition, &event.page.url, PageHistory::default);
                    history.record(
                        event.period,
                        Observation { downloaded: event.downloaded, changed: event.changed },
                    );
                }
                state.take_dirty();
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
