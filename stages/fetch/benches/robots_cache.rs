//! The robots.txt cache at its default capacity, full: inserting a new origin (which drops
//! the least recently used) and looking one up. Baseline in the same run: a HashMap insert
//! and remove of the same keys, the cost of hashing and storing an origin at all.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use recrawl_fetch::robots::{RobotsCache, RobotsLifetimes, RobotsRules};
use tokio::time::Instant;

const CAPACITY: usize = 100_000;

fn origins(count: usize, offset: usize) -> Vec<String> {
    (offset..offset + count).map(|i| format!("https://host-{i}.example.com:443")).collect()
}

fn bench(c: &mut Criterion) {
    let lifetimes = RobotsLifetimes { ttl: Duration::from_secs(86_400), error_ttl: Duration::from_secs(600) };
    let now = Instant::now();
    let full = || {
        let mut cache = RobotsCache::new(lifetimes, CAPACITY, usize::MAX);
        for origin in origins(CAPACITY, 0) {
            cache.insert(&origin, RobotsRules::AllowAll, false, now);
        }
        cache
    };
    let newcomers = origins(1_000, CAPACITY);
    let mut group = c.benchmark_group("robots_cache_100k_full");
    group.bench_function("insert_1000_new_origins", |b| {
        b.iter_batched_ref(
            full,
            |cache| {
                for origin in &newcomers {
                    black_box(cache.insert(origin, RobotsRules::AllowAll, false, now));
                }
            },
            BatchSize::LargeInput,
        )
    });
    let known = origins(1_000, CAPACITY / 2);
    group.bench_function("get_1000_cached_origins", |b| {
        b.iter_batched_ref(
            full,
            |cache| {
                for origin in &known {
                    black_box(cache.get(origin, now));
                }
            },
            BatchSize::LargeInput,
        )
    });
    let oldest = origins(1_000, 0);
    group.bench_function("baseline_hashmap_insert_remove_1000", |b| {
        b.iter_batched_ref(
            || origins(CAPACITY, 0).into_iter().map(|o| (o, now)).collect::<HashMap<String, Instant>>(),
            |map| {
                for (new, old) in newcomers.iter().zip(&oldest) {
                    map.remove(old);
                    black_box(map.insert(new.clone(), now));
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
