//! The robots.txt cache's budget counts at least what parsed rules hold, and not many
//! times more, as a counting allocator measures it, for files at the size limit of one
//! line shape each. Its own test binary: the allocator counts the whole process.

use std::alloc::System;

use recrawl_fetch::robots::{RobotsRules, MAX_ROBOTS_BYTES};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Lines from `line(n)` for n = 0, 1, … up to the size limit.
fn file_of(line: &dyn Fn(usize) -> String) -> Vec<u8> {
    let limit = usize::try_from(MAX_ROBOTS_BYTES).expect("the size limit fits in memory");
    let mut body = String::from("User-agent: *\n");
    for n in 0.. {
        let next = line(n);
        if body.len() + next.len() > limit {
            break;
        }
        body.push_str(&next);
    }
    body.into_bytes()
}

#[test]
fn the_budget_counts_what_parsed_rules_hold() {
    let shapes: [(&str, &dyn Fn(usize) -> String); 12] = [
        ("short allows", &|_| "Allow:*\n".into()),
        ("short disallows", &|_| "Disallow:/a\n".into()),
        ("short wildcards", &|_| "Disallow:*a*\n".into()),
        ("wildcards", &|n| format!("Disallow: /*x{n}*y\n")),
        ("wildcards of controls", &|n| format!("Disallow: /*\x01\x02\x03{n}*\n")),
        ("wildcards of spaces", &|n| format!("Disallow: /* a a a a{n}*\n")),
        ("wildcards past ASCII", &|n| format!("Disallow: /*éé{n}*\n")),
        ("long prefixes", &|n| format!("Disallow: /{}{n}\n", "a".repeat(2000))),
        ("end anchored", &|n| format!("Disallow: /a{n}*b$\n")),
        ("sitemaps", &|n| format!("Sitemap:{n}\n")),
        ("site-maps", &|n| format!("site-map: https://example.com/{n}.xml\n")),
        ("groups", &|n| format!("User-agent: *\nDisallow: /{n}\n")),
    ];
    for (shape, line) in shapes {
        let body = file_of(line);
        let region = Region::new(ALLOCATOR);
        let (rules, _) = RobotsRules::from_answer(200, &body, "recrawl");
        let change = region.change();
        // Growth by reallocation is counted in both, as bytes allocated or deallocated.
        let held = change.bytes_allocated.saturating_sub(change.bytes_deallocated);
        let counted = rules.bytes();
        eprintln!("{shape}: counted {counted}, held {held} ({:.2}×)", counted as f64 / held.max(1) as f64);
        assert!(counted >= held, "{shape}: counted {counted} < held {held}");
        assert!(counted <= 4 * held + (64 << 10), "{shape}: counted {counted}, over four times {held}");
        drop(rules);
    }
}
