//! Picking m = 1,000 of n = 1,000,000 scored URLs. Baseline in the same run: sorting all
//! n, which the spec rules out.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use recrawl_scheduler::policy::top_m;
use std::hint::black_box;

fn candidates(n: u32) -> Vec<(f64, u32)> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|key| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state % 10_000) as f64 / 7.0, key)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let all = candidates(1_000_000);
    let mut group = c.benchmark_group("pick_1000_of_1M");
    group.sample_size(20);
    group.bench_function("top_m", |b| {
        b.iter_batched(|| all.clone(), |mut v| top_m(black_box(&mut v), 1000), BatchSize::LargeInput)
    });
    group.bench_function("baseline_full_sort", |b| {
        b.iter_batched(
            || all.clone(),
            |mut v| {
                v.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                v.truncate(1000);
                v
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
