//! One period's picks at scale: m = 100,000 of 10 million tracked URLs under `paper` and
//! `change-aware`, and m = 100,000 discoveries from a frontier of 10 million URLs by
//! in-degree. Baseline in the same run: scoring every URL and sorting them all, which
//! `docs/algorithms/staleness-schedule.md` §3 rules out. Memory per URL is printed while the books are built.
//!
//! `RECRAWL_BENCH_URLS` overrides the 10 million (e.g. for a quick run),
//! `RECRAWL_BENCH_PICKS` the 100,000 picks, and `RECRAWL_BENCH_FRONTIER=0` skips the
//! frontier (#51's 1 M picks of 100 M URLs: `RECRAWL_BENCH_URLS=100000000
//! RECRAWL_BENCH_PICKS=1000000 RECRAWL_BENCH_FRONTIER=0`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use recrawl_common::links::LinkRules;
use recrawl_model::claims::{Claim, Listing};
use recrawl_scheduler::book::{Book, BookSettings};
use recrawl_scheduler::hosts::Hosts;
use recrawl_scheduler::plan::{choose, PlanSettings};
use recrawl_scheduler::policy::{paper_score, staleness, Discovery, Policy};
use recrawl_schemas::{DiscoveredLinks, PageRef};

const HOSTS: usize = 20_000;
const CLOCK: u64 = 1_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn from_env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

fn urls() -> usize {
    from_env("RECRAWL_BENCH_URLS", 10_000_000)
}

/// m, the picks of a period.
fn picks() -> usize {
    from_env("RECRAWL_BENCH_PICKS", 100_000)
}

fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|pages| pages.parse::<usize>().ok()))
        .map_or(0, |pages| pages * 4096)
}

fn url(host: usize, page: usize) -> String {
    format!("http://host{host}.example/section/{page}.html")
}

fn report(what: &str, n: usize, book: &Book, resident_before: usize) {
    let resident = resident_bytes().saturating_sub(resident_before);
    let memory = book.memory();
    let per_url = |bytes: usize| bytes as f64 / n as f64;
    eprintln!(
        "{what}: {n} URLs, bytes per URL: page record {:.1}, URL text {:.1}, URL ends and authorities {:.1}, index {:.1}, \
         in-links {:.1}; resident {:.1}",
        per_url(memory.pages),
        per_url(memory.url_text),
        per_url(memory.url_slots),
        per_url(memory.index),
        per_url(memory.in_links),
        per_url(resident),
    );
}

fn tracked_book(n: usize) -> (Book, Hosts) {
    let before = resident_bytes();
    let (mut book, mut hosts, mut rng) = (Book::default(), Hosts::default(), Rng(0x9e37_79b9_7f4a_7c15));
    for i in 0..n {
        let url = url(i % HOSTS, i / HOSTS);
        // Heavy-tailed change rates: most pages rarely change, a few often.
        let rate = 0.001 / (rng.unit() + 1e-3);
        let slot = book
            .add_tracked(
                &mut hosts,
                &url,
                &format!("host{}.example", i % HOSTS),
                Some(rng.next() % CLOCK),
                (1000 + rng.next() % 100_000) as u32,
                1.0 - (-rate).exp(),
                0.5 + rng.unit() / 2.0,
                Some(rate),
            )
            .expect("fits");
        // Credible intervals from 1.2 to 100 times wide around the mean.
        let half_width = 1.1 + rng.unit() * 8.9;
        book.set_rate_interval(slot, rate / half_width, rate * half_width);
    }
    for stats in &mut hosts.stats {
        stats.ms_per_byte = 0.001 + rng.unit() * 0.01;
    }
    report("tracked", n, &book, before);
    (book, hosts)
}

fn frontier_book(n: usize) -> (Book, Hosts) {
    let before = resident_bytes();
    let (mut book, mut hosts, mut rng) = (Book::default(), Hosts::default(), Rng(0x2545_f491_4f6c_dd1d));
    let (rules, settings) = (LinkRules::default(), BookSettings::default());
    let mut links = 0;
    for i in 0..n {
        let target = url(i % HOSTS, i / HOSTS);
        // One to four distinct linking pages each (power-law-ish: 1 most often).
        let in_degree = 1 + (rng.next() % 16).trailing_zeros().min(3) as usize;
        for _ in 0..in_degree {
            let source = format!("http://src{}.example/{}.html", rng.next() % 1000, rng.next() % 1_000_000);
            let link = DiscoveredLinks {
                page: PageRef::new(&target, &format!("host{}.example", i % HOSTS)),
                source: Some(PageRef::of_url(&source).expect("a URL")),
                occurrences: 1,
                period: (i / 1000) as u64,
                depth: 1,
            };
            book.apply_link(&mut hosts, &link, &rules, u32::MAX, &settings).expect("fits");
            links += 1;
        }
    }
    report("frontier", n, &book, before);
    eprintln!("frontier: {:.2} in-links per URL", links as f64 / n as f64);
    (book, hosts)
}

fn bench(c: &mut Criterion) {
    let (n, picks) = (urls(), picks());
    let (mut book, mut hosts) = tracked_book(n);
    let caps = vec![u32::MAX; hosts.len()];
    let mut group = c.benchmark_group(format!("pick_{}k_of_{n}", picks / 1000));
    group.sample_size(10);
    for policy in [Policy::Paper, Policy::ChangeAware, Policy::Freshness, Policy::LambdaCrawl] {
        let settings =
            PlanSettings { policy, period_ms: 1000, discovery_share: 0.0, ..PlanSettings::default() };
        group.bench_function(policy.as_str(), |b| {
            b.iter(|| choose(&[&book], &hosts, black_box(CLOCK), 10.0, picks, &caps, &settings).len())
        });
    }
    group.bench_function("baseline_score_and_full_sort", |b| {
        b.iter(|| {
            let mut all: Vec<(f64, u32)> = book
                .pages()
                .iter()
                .enumerate()
                .map(|(slot, page)| {
                    let s = staleness(CLOCK, page.last_download(), 0);
                    let cost = page.size_bytes() * hosts.stats[page.host as usize].ms_per_byte / 1000.0;
                    (paper_score(10.0, s, cost), slot as u32)
                })
                .collect();
            all.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.truncate(picks);
            all.len()
        })
    });
    // A hundredth of the URLs claimed changed by hosts not yet judged: the plan first
    // passes over the pages for its claim tests.
    let book_settings = BookSettings::default();
    let at = |period: u64| {
        recrawl_model::period_start_ms(book_settings.epoch_unix_ms, book_settings.period_ms, period)
    };
    let claim = Claim { changed_ms: at(CLOCK + 10), seen_ms: at(CLOCK + 20) };
    for slot in (0..n as u32).step_by(100) {
        book.claim(&mut hosts, slot, claim, Listing::Every, &book_settings);
    }
    eprintln!("claim tests due: {}", book.claim_tests_due());
    let settings = PlanSettings {
        policy: Policy::Freshness,
        period_ms: 1000,
        discovery_share: 0.0,
        ..PlanSettings::default()
    };
    group.bench_function("freshness_with_claim_tests", |b| {
        b.iter(|| choose(&[&book], &hosts, black_box(CLOCK), 10.0, picks, &caps, &settings).len())
    });
    group.finish();
    drop(book);
    if from_env("RECRAWL_BENCH_FRONTIER", 1) == 0 {
        return;
    }

    let (frontier, hosts) = frontier_book(n);
    let caps = vec![u32::MAX; hosts.len()];
    let mut group = c.benchmark_group(format!("discover_{}k_of_{n}", picks / 1000));
    group.sample_size(10);
    let settings = PlanSettings {
        policy: Policy::Paper,
        discovery: Discovery::Ifs,
        discovery_share: 1.0,
        ..PlanSettings::default()
    };
    group.bench_function("ifs", |b| {
        b.iter(|| choose(&[&frontier], &hosts, black_box(CLOCK), 10.0, picks, &caps, &settings).len())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
