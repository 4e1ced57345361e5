//! Two scheduler instances on a 4-partition topic publish, together, exactly m picks per
//! period: each takes its partitions' share without talking to the other.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_e2e::{
    kafka_flags, metric, parse_args, produce, produce_at, unique_prefix, wait_for, Broker, RunningStage,
};
use recrawl_schemas::topics::{ANNOUNCEMENTS, ESTIMATES, FETCH, LINKS};
use recrawl_schemas::{url_key, DiscoveredLinks, PagePick, PageRef, PickReason};

const PARTITIONS: i32 = 4;
const URLS: usize = 80;
const M: usize = 8;
const PERIOD_MS: i64 = 2000;
const SENTINEL: &str = "http://sentinel.invalid/";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_publish_m_picks_per_period_together() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("scheduler"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");

    // Seed URLs on eight hosts: the frontier every pick comes from (no fetcher runs, so
    // each pick stays pending for two periods and the next periods take other URLs).
    let links = kafka.cluster.topics().name(LINKS.name);
    let estimates = kafka.cluster.topics().name(ESTIMATES.name);
    let announcements = kafka.cluster.topics().name(ANNOUNCEMENTS.name);
    for index in 0..URLS {
        let url = format!("http://h{}.example/{index}.html", index % 8);
        let seed = DiscoveredLinks {
            page: PageRef::new(&url, &format!("h{}.example", index % 8)),
            source: None,
            occurrences: 1,
            period: 0,
            depth: 0,
        };
        produce(&producer, &kafka.cluster.topics(), LINKS, &seed).await;
    }

    let epoch = unix_ms();
    let mut stage_flags = flags.clone();
    for (flag, value) in [
        ("--period-ms", PERIOD_MS.to_string()),
        ("--epoch-unix-ms", epoch.to_string()),
        ("--picks-per-period", M.to_string()),
    ] {
        stage_flags.extend([flag.to_owned(), value]);
    }
    let observer = Observer::new(&kafka.cluster, &[FETCH.name]).await.expect("observer");
    let stages: Vec<RunningStage> = (0..2)
        .map(|_| {
            let args = parse_args(&stage_flags);
            RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(args, ctx))
        })
        .collect();
    for stage in &stages {
        stage.ready().await;
    }
    wait_for("the partitions are not split two and two", || {
        // Two of the four partitions of each input topic: the log's count is their sum.
        stages.iter().all(|s| {
            [&estimates, &links, &announcements]
                .iter()
                .all(|t| s.ctx.metrics.assigned_partitions.with_label_values(&[t]).get() == 2)
        })
    })
    .await;
    // Lag is exported for exactly the partitions each instance owns now: a partition that
    // moved in the rebalance has left the old owner's series.
    wait_for("the lag series do not follow the assignment", || {
        let (first, second) = (lag_series(&stages[0]), lag_series(&stages[1]));
        let everything: BTreeSet<(String, i32)> = [&estimates, &links, &announcements]
            .iter()
            .flat_map(|topic| (0..PARTITIONS).map(|p| (topic.to_string(), p)))
            .collect();
        first.len() == 6
            && second.len() == 6
            && first.union(&second).cloned().collect::<BTreeSet<_>>() == everything
    })
    .await;
    // Each instance's state is per partition number over its inputs: it must own the
    // same partitions of each.
    for stage in &stages {
        let owned = lag_series(stage);
        let of = |topic: &String| -> BTreeSet<i32> {
            owned.iter().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect()
        };
        assert_eq!(of(&estimates), of(&links), "co-partitioned inputs on one instance: {owned:?}");
        assert_eq!(of(&estimates), of(&announcements), "co-partitioned inputs on one instance: {owned:?}");
    }
    let frontier = |s: &RunningStage| metric(s, "recrawl_scheduler_frontier_urls{stage=\"scheduler\"}");
    wait_for("the instances did not file every seed", || {
        stages.iter().filter_map(frontier).sum::<f64>() == URLS as f64
    })
    .await;
    // Periods that start after the split are picked by both instances with two
    // partitions each.
    let first = ((unix_ms() - epoch) / PERIOD_MS) as u64 + 1;
    let last = first + 3;
    let period_series = "recrawl_scheduler_last_period{stage=\"scheduler\"}";
    wait_for("the instances did not reach the last period", || {
        stages.iter().all(|s| metric(s, period_series).is_some_and(|p| p >= last as f64))
    })
    .await;
    let mut published = Vec::new();
    for stage in stages {
        published
            .push(metric(&stage, "recrawl_scheduler_picks_total{reason=\"discovery\",stage=\"scheduler\"}"));
        stage.stop().await.expect("stops cleanly");
    }

    // A sentinel behind everything on each partition: once all four are read, so is
    // every pick the instances produced.
    let sentinel = PagePick {
        url: SENTINEL.to_owned(),
        url_key: url_key(SENTINEL),
        host: "sentinel.invalid".to_owned(),
        group: String::new(),
        period: u64::MAX,
        reason: PickReason::Refresh,
        depth: 0,
        score: 0.0,
        etag: None,
        last_modified: None,
        deadline_ms: None,
    };
    for partition in 0..PARTITIONS {
        produce_at(&producer, &kafka.cluster.topics(), FETCH, Some(partition), &sentinel).await;
    }
    let mut per_period: BTreeMap<u64, Vec<PagePick>> = BTreeMap::new();
    let mut sentinels = 0;
    while sentinels < PARTITIONS {
        let observed = tokio::time::timeout(Duration::from_secs(60), observer.next())
            .await
            .expect("the sentinels arrive")
            .expect("observer");
        match observed {
            Observed::Pick(pick) if pick.url == SENTINEL => sentinels += 1,
            Observed::Pick(pick) => per_period.entry(pick.period).or_default().push(pick),
            other => panic!("unexpected {other:?}"),
        }
    }

    assert!(published.iter().all(|n| n.is_some_and(|n| n > 0.0)), "both instances picked: {published:?}");
    for period in first..=last {
        let picks = per_period.get(&period).map_or(&[][..], Vec::as_slice);
        assert_eq!(picks.len(), M, "period {period}: {picks:?}");
        let mut urls: Vec<&str> = picks.iter().map(|p| p.url.as_str()).collect();
        urls.sort_unstable();
        urls.dedup();
        assert_eq!(urls.len(), M, "period {period} picked a URL twice");
        assert!(picks.iter().all(|p| p.reason == PickReason::Discovery && p.depth == 0));
    }
    drop(broker);
}

/// The (topic, partition) of every `recrawl_consumer_lag_records` series `stage` exports.
fn lag_series(stage: &RunningStage) -> BTreeSet<(String, i32)> {
    stage
        .ctx
        .metrics
        .render()
        .lines()
        .filter_map(|line| line.strip_prefix("recrawl_consumer_lag_records{"))
        .filter_map(|line| line.split_once('}'))
        .filter_map(|(labels, _)| {
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
            };
            Some((label("topic")?.to_owned(), label("partition")?.parse().ok()?))
        })
        .collect()
}
