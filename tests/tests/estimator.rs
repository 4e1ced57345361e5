//! The estimator's shared distributions: two instances on a 4-partition topic predict
//! exactly what one instance predicts from the same change events, because each publishes
//! its partitions' shares of every group and reads everyone else's.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{kafka_flags, metric, parse_args, produce, unique_prefix, wait_for, Broker, RunningStage};
use recrawl_estimator::distribution::Partial;
use recrawl_schemas::topics::{ANNOUNCEMENTS, CHANGE_EVENTS, DISTRIBUTIONS, ESTIMATES, HOST_TRUST};
use recrawl_schemas::{
    AnnouncingDocument, ChangeEvent, ChangeRateSource, ClaimTrust, ForecastPrior, HostTrust,
    PageAnnouncement, PageEstimate, PageRef, RequestOutcome, UtcTime,
};

const URLS: u64 = 48;
const PERIODS: u64 = 8;
/// Sites: the instances group by site (`--group-by site`).
const GROUPS: [&str; 2] = ["popular.example", "random.example"];
const PARTITIONS: i32 = 4;

fn group_of(index: u64) -> &'static str {
    GROUPS[(index % 2) as usize]
}

/// URL `index`'s request in `period`: some URLs fail now and then, some change every
/// period, some every other period, the rest never.
fn event(index: u64, period: u64) -> ChangeEvent {
    let host = format!("h{}.{}", index % 6, group_of(index));
    let url = format!("http://{host}/{index}.html");
    let fails = |p: u64| index.is_multiple_of(7) && p.is_multiple_of(3);
    let downloaded = !fails(period);
    let changes = match index % 5 {
        0 => true,
        1 => period.is_multiple_of(2),
        _ => false,
    };
    let downloaded_before = (1..period).any(|p| !fails(p));
    let changed = (downloaded && downloaded_before).then_some(changes);
    let fetched_at_ms = 1_780_000_000_000 + (period * 3_600_000) as i64 + index as i64 * 1000;
    let outcome = RequestOutcome { period, downloaded, changed, fetched_at_ms };
    ChangeEvent {
        latency_ms: 10.0 + index as f64,
        size_bytes: if downloaded { 1000 + index } else { 0 },
        size_change_bytes: changed.map(|c| if c { 8 } else { 0 }),
        ..ChangeEvent::request(&url, &host, outcome)
    }
}

/// Runs `instances` estimators over periods 1..PERIODS and returns the estimates of the
/// last period by URL.
async fn final_estimates(instances: usize) -> BTreeMap<String, PageEstimate> {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix(&format!("estimator{instances}")));
    let mut stage_flags = flags.clone();
    stage_flags.extend([
        "--metrics-groups".to_owned(),
        GROUPS.join(","),
        "--group-by".to_owned(),
        "site".to_owned(),
    ]);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let topic = kafka.cluster.topics().name(CHANGE_EVENTS.name);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[ESTIMATES.name]).await.expect("observer");

    let stages: Vec<RunningStage> = (0..instances)
        .map(|_| {
            let args = parse_args(&stage_flags);
            RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(args, ctx))
        })
        .collect();
    for stage in &stages {
        stage.ready().await;
    }
    wait_for("the partitions are not all assigned", || {
        let owned = |s: &RunningStage| s.ctx.metrics.assigned_partitions.with_label_values(&[&topic]).get();
        stages.iter().map(owned).sum::<i64>() == i64::from(PARTITIONS) && stages.iter().all(|s| owned(s) > 0)
    })
    .await;

    for period in 1..PERIODS {
        for index in 0..URLS {
            let event = event(index, period);
            produce(&producer, &kafka.cluster.topics(), CHANGE_EVENTS, &event).await;
        }
    }
    // Every instance has read every partition's share of both groups, up to the last
    // period so far, before the last period's events arrive.
    let requests_per_group = (URLS / 2 * (PERIODS - 1)) as f64;
    for group in GROUPS {
        let series = format!("recrawl_estimator_group_requests{{group=\"{group}\",stage=\"estimator\"}}");
        wait_for(&format!("the instances never saw all of {group}"), || {
            stages.iter().all(|s| metric(s, &series) == Some(requests_per_group))
        })
        .await;
    }
    for index in 0..URLS {
        let event = event(index, PERIODS);
        produce(&producer, &kafka.cluster.topics(), CHANGE_EVENTS, &event).await;
    }

    let mut last = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while last.len() < URLS as usize {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| panic!("only {} final estimates", last.len()))
            .expect("observer");
        if let Observed::Estimate(estimate) = observed {
            if estimate.period == PERIODS {
                last.insert(estimate.page.url.clone(), estimate);
            }
        }
    }
    let mut held_keys = 0;
    for stage in stages {
        let held = stage.ctx.metrics.state_keys.get();
        assert!(held > 0, "every instance owns some URLs");
        held_keys += held;
        stage.stop().await.expect("stops cleanly");
    }

    // A new instance reads the published shares before it starts consuming, and
    // rebuilds the same totals from the restored state. It joins a group of its own:
    // in one run of eight, tansu did not assign a group's partitions within a minute to a
    // member joining just after all the others had left; that is the broker's affair.
    let mut restart_flags = stage_flags.clone();
    restart_flags.extend(["--group-id".to_owned(), format!("{}restarted", kafka.cluster.topic_prefix)]);
    let restarted =
        RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(parse_args(&restart_flags), ctx));
    restarted.ready().await;
    // Ready means restored: every key's latest changelog record, at least, was read.
    let restored = restarted.ctx.metrics.restored_records.get();
    assert!(restored >= held_keys as u64, "{restored} changelog records read for {held_keys} keys");
    assert_eq!(restarted.ctx.metrics.restore_started.get(), 0, "no restore left running");
    assert!(restarted.ctx.metrics.restore_seconds.get_sample_count() >= 1, "the restore was timed");
    let filed = metric(
        &restarted,
        "recrawl_estimator_distribution_records_total{result=\"kept\",stage=\"estimator\"}",
    );
    assert!(filed.is_some_and(|n| n > 0.0), "shares filed before consuming: {filed:?}");
    let requests_per_group = (URLS / 2 * PERIODS) as f64;
    for group in GROUPS {
        let series = format!("recrawl_estimator_group_requests{{group=\"{group}\",stage=\"estimator\"}}");
        wait_for(&format!("the restarted instance never totalled {group}"), || {
            metric(&restarted, &series) == Some(requests_per_group)
        })
        .await;
    }
    restarted.stop().await.expect("stops cleanly");
    drop(broker);
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_predict_what_one_predicts() {
    let one = final_estimates(1).await;
    let two = final_estimates(2).await;
    assert_eq!(one.len(), URLS as usize);
    // The group distribution was used, not the uniform fallback, and it was the whole
    // group's: each instance alone holds about half of it.
    let from_group = one.values().filter(|e| e.downloads.prior == ForecastPrior::Group).count();
    assert!(from_group > URLS as usize / 2, "{from_group} forecasts from the group distribution");
    for (url, estimate) in &one {
        assert_eq!(Some(estimate), two.get(url), "{url}");
    }
}

/// Distribution shares come from a topic: one of a partition the input topics lack is
/// refused (kept, it would count in its group for good), and past `--max-groups` shares
/// of groups the instance does not hold are refused, each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_of_a_partition_the_inputs_lack_or_past_the_group_cap_are_refused() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("shares"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let mut stage_flags = flags.clone();
    stage_flags.extend(["--max-groups".to_owned(), "2".to_owned()]);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let share =
        |group: &str, partition| Partial::default().to_message(group, partition, recrawl_common::unix_ms());
    // Already on the topic when the estimator starts: read while it catches up.
    produce(&producer, &kafka.cluster.topics(), DISTRIBUTIONS, &share("d.example", 2)).await;
    let stage = RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(parse_args(&stage_flags), ctx));
    stage.ready().await;
    for (group, partition) in [("a.example", 0), ("b.example", 1), ("c.example", 0)] {
        produce(&producer, &kafka.cluster.topics(), DISTRIBUTIONS, &share(group, partition)).await;
    }
    let count = |result: &str| {
        metric(
            &stage,
            &format!(
                "recrawl_estimator_distribution_records_total{{result=\"{result}\",stage=\"estimator\"}}"
            ),
        )
        .unwrap_or(0.0)
    };
    wait_for("the four shares filed or refused", || {
        ["kept", "stale", "invalid", "full"].iter().map(|result| count(result)).sum::<f64>() >= 4.0
    })
    .await;
    assert_eq!(
        [count("kept"), count("full"), count("invalid")],
        [2.0, 1.0, 1.0],
        "a and b kept, c past the cap, d (read at the start) of partition 2 of 2"
    );
    stage.stop().await.expect("stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_s_estimate_is_revised_when_its_host_comes_to_be_trusted() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("revised"));
    let kafka: KafkaArgs = parse_args(&flags);
    // One partition: the host's trust is kept per partition.
    broker.create_topics(&kafka, 1).await;
    let mut stage_flags = flags.clone();
    stage_flags.extend(["--period-ms".to_owned(), "3600000".to_owned()]);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[ESTIMATES.name]).await.expect("observer");
    let stage = RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(parse_args(&stage_flags), ctx));
    stage.ready().await;
    // Hourly periods. a/1 keeps a date two years old (proven, not confirmed on the URL);
    // a/2's second download is of a change its date puts half an hour before it, which
    // shows the host dates changes; a/3's request begins period 3, when that is settled.
    let request = |page: u64, period: u64, changed: Option<bool>, last_modified: Option<String>| {
        let fetched_at_ms = 1_780_000_000_000 + (period * 3_600_000) as i64;
        let outcome = RequestOutcome { period, downloaded: true, changed, fetched_at_ms };
        ChangeEvent {
            last_modified,
            ..ChangeEvent::request(&format!("http://a.example/{page}"), "a.example", outcome)
        }
    };
    let date = |period: u64, hours_before: f64| {
        let at = 1_780_000_000_000 + (period * 3_600_000) as i64 - (hours_before * 3_600_000.0) as i64;
        recrawl_common::format_http_date(at)
    };
    let events = [
        request(1, 1, None, date(1, 17_520.0)),
        request(2, 1, None, date(1, 100.0)),
        request(1, 2, Some(false), date(1, 17_520.0)),
        request(2, 2, Some(true), date(2, 0.5)),
        request(3, 3, None, None),
    ];
    for event in &events {
        produce(&producer, &kafka.cluster.topics(), CHANGE_EVENTS, event).await;
    }
    let mut of_a1 = Vec::new();
    let mut estimates = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while estimates < events.len() + 1 {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| panic!("{estimates} estimates, a/1's: {of_a1:?}"))
            .expect("observer");
        if let Observed::Estimate(estimate) = observed {
            estimates += 1;
            if estimate.page.url == "http://a.example/1" {
                of_a1.push((estimate.period, estimate.change_rate.expect("a rate")));
            }
        }
    }
    assert_eq!(of_a1.len(), 3, "a/1's two requests and the revision of the second: {of_a1:?}");
    let [(_, _), (period, before), (revised_period, after)] = of_a1[..] else { unreachable!() };
    assert_eq!((period, revised_period), (2, 2), "the revision is of the same request");
    assert!(after < 0.001 && after * 10.0 < before, "{after} against {before}");
    let revised = metric(&stage, "recrawl_estimator_revised_estimates_total{stage=\"estimator\"}");
    assert_eq!(revised, Some(1.0));
    stage.stop().await.expect("stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_host_s_sitemap_dates_rate_its_page() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("claims"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 1).await;
    let mut stage_flags = flags.clone();
    stage_flags.extend(["--period-ms".to_owned(), HOUR.to_string()]);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let topics = kafka.cluster.topics();
    let observer = Observer::new(&kafka.cluster, &[ESTIMATES.name]).await.expect("observer");
    let stage = RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(parse_args(&stage_flags), ctx));
    stage.ready().await;
    // Hourly periods from the estimator's default epoch, so that the sitemap's reads lie
    // within their periods.
    let epoch = recrawl_model::DEFAULT_EPOCH_UNIX_MS;
    let at = |period: u64| epoch + period as i64 * HOUR;
    let url = "http://truthful.example/a.html";
    let request = |period: u64, changed: Option<bool>| {
        let outcome =
            RequestOutcome { period, downloaded: true, changed, fetched_at_ms: at(period) + HOUR / 2 };
        ChangeEvent::request(url, "truthful.example", outcome)
    };
    let next_estimate = || async {
        loop {
            let observed = tokio::time::timeout(Duration::from_secs(60), observer.next())
                .await
                .expect("an estimate within 60 s")
                .expect("observer");
            if let Observed::Estimate(estimate) = observed {
                return estimate;
            }
        }
    };
    produce(&producer, &topics, CHANGE_EVENTS, &request(1, None)).await;
    assert_eq!(next_estimate().await.change_rate_source, ChangeRateSource::Prior);
    // The scheduler's judgement of the host, and its sitemap read twice an hour for ten
    // hours, each hour's change dated 10 minutes before the first read.
    let trust = HostTrust {
        host: "truthful.example".to_owned(),
        partition: 0,
        period: 2,
        confirmed: 5,
        agreed: 3,
        refuted: 0,
        silent: 0,
        trust: ClaimTrust::Trusted,
        published_at: UtcTime::from_ms(at(2)),
        published_at_ms: at(2),
    };
    produce(&producer, &topics, HOST_TRUST, &trust).await;
    for hour in 2..12u64 {
        for minutes in [10, 50] {
            let seen_ms = at(hour) + minutes * HOUR / 60;
            let announcement = PageAnnouncement {
                page: PageRef::of_url(url).expect("url"),
                source: PageRef::of_url("http://truthful.example/sitemap.xml").expect("url"),
                document: AnnouncingDocument::Sitemap,
                period: hour,
                fetched_at: UtcTime::from_ms(seen_ms),
                fetched_at_ms: seen_ms,
                claimed_modified: Some(UtcTime::from_ms(at(hour))),
                claimed_modified_ms: Some(at(hour)),
                change_frequency: None,
                priority: None,
                depth: 1,
            };
            produce(&producer, &topics, ANNOUNCEMENTS, &announcement).await;
        }
    }
    let count = |name: &str, result: &str| {
        metric(&stage, &format!("recrawl_estimator_{name}_total{{result=\"{result}\",stage=\"estimator\"}}"))
            .unwrap_or(0.0)
    };
    wait_for("the twenty reads counted and the host's share kept", || {
        count("announcements", "counted") >= 20.0 && count("host_trust_records", "kept") >= 1.0
    })
    .await;
    produce(&producer, &topics, CHANGE_EVENTS, &request(12, Some(true))).await;
    let estimate = next_estimate().await;
    assert_eq!((estimate.period, estimate.change_rate_source), (12, ChangeRateSource::Claims));
    // Ten changes over ten hours, 50 minutes of each known quiet: about one an hour, where
    // one comparison over eleven hours that found a change says far less.
    let rate = estimate.change_rate.expect("a rate");
    assert!((0.8..1.6).contains(&rate), "{rate} changes an hour");
    assert_eq!(count("announcements", "counted"), 20.0);
    stage.stop().await.expect("stops cleanly");
}

const HOUR: i64 = 3_600_000;
