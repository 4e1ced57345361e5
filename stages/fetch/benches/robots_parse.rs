//! Parsing a robots.txt into the rules the crawler keeps (`RobotsRules::from_answer`), on
//! an ordinary file and on two hostile ones at the size limit. Baselines in the same run:
//! the ordinary file, and the parser on the `$` file without the stage's bound.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recrawl_fetch::robots::{whole_lines, RobotsRules, MAX_ROBOTS_BYTES};
use texting_robots::Robot;

const AGENT: &str = "recrawl";

/// Lines from `line(n)` for n = 0, 1, … up to the size limit, whole lines only.
fn file_of(head: &str, line: impl Fn(usize) -> String) -> Vec<u8> {
    let limit = usize::try_from(MAX_ROBOTS_BYTES).unwrap_or(usize::MAX);
    let mut body = head.to_owned();
    for n in 0.. {
        let next = line(n);
        if body.len() + next.len() > limit {
            break;
        }
        body.push_str(&next);
    }
    whole_lines(body.as_bytes()).to_vec()
}

/// A large site's file: groups for several agents, prefix rules, a few wildcards and `$`.
fn ordinary() -> Vec<u8> {
    let mut body = String::from("User-agent: Googlebot\nDisallow: /search\nAllow: /search/about\n\n");
    body.push_str("User-agent: *\nCrawl-delay: 1\n");
    for n in 0..150 {
        body.push_str(&format!(
            "Disallow: /section-{n}/private/\nAllow: /section-{n}/private/public-{n}.html\n"
        ));
    }
    body.push_str("Disallow: /*?sessionid=\nDisallow: /*.pdf$\nSitemap: https://example.com/sitemap.xml\n");
    body.into_bytes()
}

fn bench(c: &mut Criterion) {
    let ordinary = ordinary();
    let end_anchored = file_of("User-agent: *\n", |n| format!("Disallow: /a{n}*b$\n"));
    let wildcards = file_of("User-agent: *\n", |n| format!("Disallow: /*x{n}*y\n"));
    for (body, denied) in
        [(&ordinary, "/section-3/private/x"), (&end_anchored, "/a7zb"), (&wildcards, "/qx7zy")]
    {
        let (rules, _) = RobotsRules::from_answer(200, body, AGENT);
        assert!(
            !rules.allows(&format!("https://example.com{denied}")),
            "{denied}: the file's rules were lost"
        );
    }

    let mut group = c.benchmark_group("robots_parse");
    group.sample_size(10);
    for (name, body) in
        [("ordinary", &ordinary), ("end_anchored_500KiB", &end_anchored), ("wildcards_500KiB", &wildcards)]
    {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(name, |b| b.iter(|| RobotsRules::from_answer(200, black_box(body), AGENT)));
    }
    group.throughput(Throughput::Bytes(end_anchored.len() as u64));
    group.bench_function("baseline_unbounded_end_anchored_500KiB", |b| {
        b.iter(|| Robot::new(AGENT, black_box(&end_anchored)))
    });
    group.finish();

    // What a rule check costs against each file, for the longest URL a pick may hold.
    let long_url = format!("https://example.com/{}", "x".repeat(8000));
    let mut group = c.benchmark_group("robots_allows_8KiB_url");
    for (name, body) in
        [("ordinary", &ordinary), ("end_anchored_500KiB", &end_anchored), ("wildcards_500KiB", &wildcards)]
    {
        let (rules, _) = RobotsRules::from_answer(200, body, AGENT);
        group.bench_function(name, |b| b.iter(|| rules.allows(black_box(&long_url))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
