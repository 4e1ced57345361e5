//! Two scheduler instances on a 4-partition topic publish, together, exactly m picks per
//! period: each takes its partitions' share without talking to the other. A scheduler
//! judges what sitemaps claim against the estimates' comparisons, and takes a host's
//! claims once they proved true, publishing each host's standing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::message::Message as _;
use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_e2e::topics::{plain_json_records, read_topic};
use recrawl_e2e::{
    kafka_flags, metric, parse_args, produce, produce_at, unique_prefix, wait_for, Broker, RunningStage,
};
use recrawl_model::claims::{Claim, ClaimTrust, ClaimedChanges};
use recrawl_scheduler::book::SchedulerState;
use recrawl_schemas::envelope::schema_tag;
use recrawl_schemas::messages::samples::{page_announcement, page_estimate};
use recrawl_schemas::topics::{ANNOUNCEMENTS, ESTIMATES, FETCH, HOST_TRUST, LINKS};
use recrawl_schemas::{
    decode, url_key, DiscoveredLinks, FetchOutcome, HostTrust, PageAnnouncement, PageEstimate, PagePick,
    PageRef, PickReason, UtcTime,
};

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

/// Five pages of a host whose sitemap dates each change and five of one that gives the
/// time of the request, each downloaded twice with a sitemap read between: the first host
/// is trusted and its next claimed change marks a copy stale; the second is distrusted and
/// its claims are only judged. Through the broker, as the stage reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_sitemap_proves_true_has_its_claims_taken() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("claims"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 1).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let topics = kafka.cluster.topics();
    // Periods 1 to 500 are long past: nothing is held back as early. Claims and downloads
    // lie periods apart, well beyond the minute of clock skew a claim is allowed.
    let epoch = unix_ms() - 1000 * PERIOD_MS;
    let at = |periods: f64| epoch + (periods * PERIOD_MS as f64) as i64;
    let url = |host: &str, page: usize| format!("http://{host}.example/{page}.html");
    let estimate = |url: &str, period: u64, fetched_at_ms: i64, changed: Option<bool>| {
        let mut estimate: PageEstimate = page_estimate();
        estimate.page = PageRef::of_url(url).expect("url");
        estimate.group = estimate.page.host.clone();
        estimate.period = period;
        estimate.last_request.period = period;
        estimate.last_request.fetched_at_ms = fetched_at_ms;
        estimate.last_request.fetched_at = UtcTime::from_ms(fetched_at_ms);
        estimate.last_request.changed = changed;
        estimate
    };
    let claim = |url: &str, changed_ms: i64, fetched_at_ms: i64, period: u64| {
        let mut announcement: PageAnnouncement = page_announcement();
        announcement.page = PageRef::of_url(url).expect("url");
        announcement.source =
            PageRef::of_url(&format!("http://{}/sitemap.xml", announcement.page.host)).expect("url");
        announcement.period = period;
        announcement.fetched_at_ms = fetched_at_ms;
        announcement.fetched_at = UtcTime::from_ms(fetched_at_ms);
        announcement.claimed_modified_ms = Some(changed_ms);
        announcement.claimed_modified = Some(UtcTime::from_ms(changed_ms));
        announcement
    };

    let mut stage_flags = flags.clone();
    for (flag, value) in [("--period-ms", PERIOD_MS.to_string()), ("--epoch-unix-ms", epoch.to_string())] {
        stage_flags.extend([flag.to_owned(), value]);
    }
    let args = parse_args(&stage_flags);
    let stage = RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(args, ctx));
    stage.ready().await;
    let series = |name: &str, label: &str, value: &str| {
        metric(&stage, &format!("recrawl_{name}{{{label}=\"{value}\",stage=\"scheduler\"}}")).unwrap_or(0.0)
    };
    let hosts = ["truthful", "lying"];
    // Downloaded at 1.5 periods.
    for host in hosts {
        for page in 0..5 {
            produce(&producer, &topics, ESTIMATES, &estimate(&url(host, page), 1, at(1.5), None)).await;
        }
    }
    let tracked = || metric(&stage, "recrawl_scheduler_tracked_urls{stage=\"scheduler\"}");
    wait_for("the scheduler did not track the ten pages", || tracked() == Some(10.0)).await;
    // The sitemaps read at 200.5 periods: a change at 100, or "now".
    for page in 0..5 {
        produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("truthful", page), at(100.0), at(200.5), 200))
            .await;
        produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("lying", page), at(200.5), at(200.5), 200))
            .await;
    }
    wait_for("the ten claims were not judged", || {
        series("scheduler_claims_total", "result", "judged") == 10.0
    })
    .await;
    // Downloaded again at 300.5 periods: the truthful host's pages changed, the other's not.
    for (host, changed) in [("truthful", true), ("lying", false)] {
        for page in 0..5 {
            produce(
                &producer,
                &topics,
                ESTIMATES,
                &estimate(&url(host, page), 300, at(300.5), Some(changed)),
            )
            .await;
        }
    }
    wait_for("one host is not trusted and the other distrusted", || {
        series("scheduler_claim_hosts", "trust", "trusted") == 1.0
            && series("scheduler_claim_hosts", "trust", "distrusted") == 1.0
    })
    .await;
    // A change at 400 periods, read at 500.5: the truthful host's copy is stale; the other
    // host's claim of the same is judged and left.
    produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("truthful", 0), at(400.0), at(500.5), 500)).await;
    produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("lying", 0), at(500.5), at(500.5), 500)).await;
    wait_for("the trusted claim was not taken", || {
        series("scheduler_claims_total", "result", "stale") == 1.0
            && series("scheduler_claims_total", "result", "judged") == 11.0
    })
    .await;
    assert_eq!(series("scheduler_claims_total", "result", "current"), 0.0);
    // Analysts read each host's standing, as the instance holds it, on `host-trust`:
    // followed rather than read to its end, as tansu's high watermark can trail the
    // last record of a batch.
    let observer = Observer::new(&kafka.cluster, &[HOST_TRUST.name]).await.expect("observer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut latest = BTreeMap::new();
    let settled = |latest: &BTreeMap<String, HostTrust>| {
        let truthful = latest.get("truthful.example").is_some_and(|t: &HostTrust| {
            t.trust == ClaimTrust::Trusted && t.confirmed >= 5 && t.refuted == 0
        });
        let lying = latest
            .get("lying.example")
            .is_some_and(|t: &HostTrust| t.trust == ClaimTrust::Distrusted && t.refuted >= 5);
        truthful && lying
    };
    while !settled(&latest) {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| panic!("the hosts' standing was not published: {latest:?}"))
            .expect("observer");
        if let Observed::Trust(trust) = observed {
            latest.insert(trust.host.clone(), trust);
        }
    }
    let records = plain_json_records(&kafka, HOST_TRUST.name, &schema_tag::<HostTrust>());
    let keys: BTreeSet<&str> = records.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(keys, BTreeSet::from(["lying.example/0", "truthful.example/0"]));
    stage.stop().await.expect("stops cleanly");
    // The trusted host's page is scored by the rate its sitemap's two reads give (a change
    // at 100 read at 200.5, one at 400 read at 500.5: two changes, 201 periods quiet), not
    // by the estimates' 0.25, and the count is on its changelog record.
    let record = latest_state(&kafka, &url("truthful", 0)).expect("a changelog record");
    let claimed = record.claims.as_ref().map(|claims| claims.claimed);
    let expected = ClaimedChanges {
        changes: 2,
        quiet_s: (201 * PERIOD_MS / 1_000) as u32,
        latest: Claim { changed_ms: at(400.0), seen_ms: at(500.5) },
    };
    assert_eq!(claimed, Some(expected));
    let rate = f64::from(record.change_rate.expect("a rate"));
    let claimed_rate = expected.rate(PERIOD_MS as u64).expect("a claimed rate").rate;
    assert!(
        (rate / claimed_rate - 1.0).abs() < 0.01 && (rate - 0.25).abs() > 0.1,
        "{rate} against {claimed_rate}"
    );

    // Restarted, the scheduler restores the hosts' standing from its changelog and takes
    // the trusted host's next claim at once, the other's not.
    let args = parse_args(&stage_flags);
    let stage = RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(args, ctx));
    stage.ready().await;
    let series = |name: &str, label: &str, value: &str| {
        metric(&stage, &format!("recrawl_{name}{{{label}=\"{value}\",stage=\"scheduler\"}}")).unwrap_or(0.0)
    };
    wait_for("the restarted scheduler did not restore the hosts' standing", || {
        series("scheduler_claim_hosts", "trust", "trusted") == 1.0
            && series("scheduler_claim_hosts", "trust", "distrusted") == 1.0
    })
    .await;
    // It publishes the standing it restored, before any new judgement: each host's share.
    let republished = || metric(&stage, "recrawl_scheduler_host_trust_records_total{stage=\"scheduler\"}");
    wait_for("the restarted scheduler did not publish the hosts' standing", || {
        republished().is_some_and(|records| records >= 2.0)
    })
    .await;
    produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("truthful", 1), at(600.0), at(700.5), 700)).await;
    produce(&producer, &topics, ANNOUNCEMENTS, &claim(&url("lying", 1), at(700.5), at(700.5), 700)).await;
    wait_for("the restored trust was not used", || {
        series("scheduler_claims_total", "result", "stale") == 1.0
            && series("scheduler_claims_total", "result", "judged") == 1.0
    })
    .await;
    stage.stop().await.expect("stops cleanly");
    drop(broker);
}

/// A share of a host's claims gone with the host's last tracked URL (its address refused)
/// is published as none with the batch that dropped it, not at the next period's tick:
/// here an hour away, so only the batch can have sent it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_share_gone_with_its_last_url_is_published_with_its_batch() {
    const HOUR_MS: i64 = 3_600_000;
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("dropped"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 1).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let topics = kafka.cluster.topics();
    // Period 1,000 began a second ago: its tick comes at the start, the next in an hour.
    let epoch = unix_ms() - 1000 * HOUR_MS - 1000;
    let at = |periods: f64| epoch + (periods * HOUR_MS as f64) as i64;
    let url = |page: usize| format!("http://gone.example/{page}.html");
    let estimate = |page: usize, period: u64| {
        let mut estimate: PageEstimate = page_estimate();
        estimate.page = PageRef::of_url(&url(page)).expect("url");
        estimate.group = estimate.page.host.clone();
        estimate.period = period;
        estimate.last_request.period = period;
        estimate.last_request.fetched_at_ms = at(period as f64 + 0.5);
        estimate.last_request.fetched_at = UtcTime::from_ms(at(period as f64 + 0.5));
        estimate.last_request.changed = None;
        estimate
    };
    let mut stage_flags = flags.clone();
    for (flag, value) in [("--period-ms", HOUR_MS.to_string()), ("--epoch-unix-ms", epoch.to_string())] {
        stage_flags.extend([flag.to_owned(), value]);
    }
    let args = parse_args(&stage_flags);
    let stage = RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(args, ctx));
    stage.ready().await;
    let series =
        |name: &str| metric(&stage, &format!("recrawl_{name}{{stage=\"scheduler\"}}")).unwrap_or(0.0);
    for page in 0..2 {
        produce(&producer, &topics, ESTIMATES, &estimate(page, 1)).await;
    }
    wait_for("the scheduler did not track the two pages", || series("scheduler_tracked_urls") == 2.0).await;
    // The host's sitemap read at 200.5 periods, judged: the partition holds a share of it.
    for page in 0..2 {
        let mut announcement: PageAnnouncement = page_announcement();
        announcement.page = PageRef::of_url(&url(page)).expect("url");
        announcement.source = PageRef::of_url("http://gone.example/sitemap.xml").expect("url");
        announcement.period = 200;
        announcement.fetched_at_ms = at(200.5);
        announcement.fetched_at = UtcTime::from_ms(at(200.5));
        announcement.claimed_modified_ms = Some(at(100.0));
        announcement.claimed_modified = Some(UtcTime::from_ms(at(100.0)));
        produce(&producer, &topics, ANNOUNCEMENTS, &announcement).await;
    }
    let judged = || {
        metric(&stage, "recrawl_scheduler_claims_total{result=\"judged\",stage=\"scheduler\"}").unwrap_or(0.0)
    };
    wait_for("the two claims were not judged", || judged() == 2.0).await;
    // Both addresses refused: the URLs, and the host's share with the last, leave.
    let observer = Observer::new(&kafka.cluster, &[HOST_TRUST.name]).await.expect("observer");
    for page in 0..2 {
        let mut refused = estimate(page, 300);
        refused.last_request.downloaded = false;
        refused.last_request.outcome = FetchOutcome::BlockedAddress;
        produce(&producer, &topics, ESTIMATES, &refused).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let none = loop {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .expect("no record of the share gone within 60 s (the next tick is an hour away)")
            .expect("observer");
        if let Observed::Trust(trust) = observed {
            break trust;
        }
    };
    assert_eq!((none.host.as_str(), none.partition), ("gone.example", 0));
    assert_eq!([none.confirmed, none.agreed, none.refuted, none.silent], [0; 4], "{none:?}");
    assert_eq!(series("scheduler_tracked_urls"), 0.0);
    stage.stop().await.expect("stops cleanly");
}

/// The latest record of `url` on the scheduler's changelog.
fn latest_state(kafka: &KafkaArgs, url: &str) -> Option<SchedulerState> {
    let mut latest = None;
    read_topic(kafka, &kafka.cluster.topics().state("scheduler"), |message| {
        if message.key() == Some(url.as_bytes()) {
            latest = message.payload().map(|payload| decode::<SchedulerState>(payload).expect("decodes"));
        }
    });
    latest
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
