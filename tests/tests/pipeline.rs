//! The four stages against a broker and a loopback website, for several periods.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl::observe::{Observed, Observer};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_e2e::site::{DemoSite, SiteConfig, STATIC_PAGES_MODIFIED};
use recrawl_e2e::topics::plain_json_records;
use recrawl_e2e::{kafka_flags, metric, parse_args, unique_prefix, Broker, RunningStage};
use recrawl_schemas::envelope::schema_tag;
use recrawl_schemas::topics::{
    ANNOUNCEMENTS, CHANGE_EVENTS, DEAD_LETTER, DISTRIBUTIONS, ESTIMATES, FETCH, FETCH_RESULTS, LINKS,
};
use recrawl_schemas::{
    AnnouncingDocument, ChangeEvent, DiscoveredLinks, FetchOutcome, FetchResult, GroupDistribution,
    PageAnnouncement, PageEstimate, PagePick, PickReason,
};

const PERIOD_MS: u64 = 1000;

/// Everything seen on the topics, by kind.
#[derive(Debug, Default)]
struct Seen {
    picks: Vec<PagePick>,
    results: Vec<FetchResult>,
    changes: Vec<ChangeEvent>,
    estimates: Vec<PageEstimate>,
    links: Vec<recrawl_schemas::DiscoveredLinks>,
    announcements: Vec<PageAnnouncement>,
    dead_letters: Vec<(String, String)>,
    /// Messages on a pipeline topic that are not valid payloads (the injected garbage).
    undecodable: Vec<String>,
}

impl Seen {
    fn record(&mut self, observed: Observed) {
        match observed {
            Observed::Pick(p) => self.picks.push(p),
            Observed::Result(r) => self.results.push(r),
            Observed::Change(c) => self.changes.push(c),
            Observed::Estimate(e) => self.estimates.push(e),
            Observed::Link(l) => self.links.push(l),
            Observed::Announcement(a) => self.announcements.push(a),
            Observed::DeadLetter(letter) => self.dead_letters.push((letter.stage, letter.reason)),
            Observed::Undecodable { topic, .. } => self.undecodable.push(topic),
            other => panic!("unexpected message {other:?}"),
        }
    }

    fn picks_per_period(&self) -> BTreeMap<u64, usize> {
        let mut counts = BTreeMap::new();
        for pick in &self.picks {
            *counts.entry(pick.period).or_default() += 1;
        }
        counts
    }

    /// Every pick has been seen with its fetch result, change event and estimate (the
    /// topics are read independently, so each is checked).
    fn all_picks_processed(&self) -> bool {
        use std::collections::HashSet;
        let results: HashSet<(&str, u64)> = self.results.iter().map(|r| (r.url.as_str(), r.period)).collect();
        let changes: HashSet<(&str, u64)> =
            self.changes.iter().map(|c| (c.page.url.as_str(), c.period)).collect();
        let estimates: HashSet<(&str, u64)> =
            self.estimates.iter().map(|e| (e.page.url.as_str(), e.period)).collect();
        self.picks.iter().all(|p| {
            let key = (p.url.as_str(), p.period);
            results.contains(&key) && changes.contains(&key) && estimates.contains(&key)
        })
    }
}

async fn observe_until(observer: &Observer, seen: &mut Seen, what: &str, done: impl Fn(&Seen) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !done(seen) {
        match tokio::time::timeout_at(deadline, observer.next()).await {
            Ok(observed) => seen.record(observed.expect("observer")),
            Err(_) => panic!("timed out waiting for {what}; picks per period {:?}", seen.picks_per_period()),
        }
    }
}

/// Starts fetch, diff and estimator, waits until they are ready, then the scheduler
/// with period 0 starting shortly after.
/// Starts fetch, diff and estimator, then the scheduler with `policy_flags` besides the
/// period clock, m and the seeds.
async fn start_pipeline(
    flags: &[String],
    m: usize,
    seeds: &Path,
    policy_flags: &[&str],
) -> ([RunningStage; 3], RunningStage) {
    // The test site is on loopback, refused unless allowed; one host, so no delay; and
    // requests end within the tests' short drain timeout.
    let mut fetch_flags = flags.to_vec();
    fetch_flags.extend(
        ["--allow-address", "127.0.0.1", "--min-host-delay-ms", "0", "--request-timeout-ms", "2000"]
            .map(String::from),
    );
    // Its rates are per period, as the scheduler plans.
    let mut estimator_flags = flags.to_vec();
    estimator_flags.extend(["--period-ms".to_owned(), PERIOD_MS.to_string()]);
    let stages = [
        RunningStage::spawn("fetch", |ctx| recrawl_fetch::run(parse_args(&fetch_flags), ctx)),
        RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(flags), ctx)),
        RunningStage::spawn("estimator", |ctx| recrawl_estimator::run(parse_args(&estimator_flags), ctx)),
    ];
    for stage in &stages {
        stage.ready().await;
    }
    let epoch = unix_ms() + 1500;
    let mut scheduler_flags = flags.to_vec();
    for (flag, value) in [
        ("--period-ms", PERIOD_MS.to_string()),
        ("--epoch-unix-ms", epoch.to_string()),
        ("--picks-per-period", m.to_string()),
        ("--seeds", seeds.display().to_string()),
        // As fetch's: the host's picks follow its pace.
        ("--min-host-delay-ms", "0".to_owned()),
    ] {
        scheduler_flags.extend([flag.to_owned(), value]);
    }
    scheduler_flags.extend(policy_flags.iter().map(|flag| (*flag).to_owned()));
    let scheduler =
        RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(parse_args(&scheduler_flags), ctx));
    (stages, scheduler)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_stages_fetch_detect_changes_and_estimate() {
    let broker = Broker::start();
    let prefix = unique_prefix("pipeline");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 3).await;

    let change_every = vec![1, 2, 0, 3];
    let site = DemoSite::start(SiteConfig {
        pages: 4,
        change_every: change_every.clone(),
        failing_pages: 1,
        links_per_page: 2,
        listed_only: 0,
    })
    .await
    .expect("site");
    let urls = site.all_urls();
    // Every URL and the site's /sitemap.xml, which fetch announces for a site whose
    // robots.txt names no sitemap (this one's is a 404, and so is that).
    let m = urls.len() + 1;
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, urls.join("\n")).expect("seeds");

    // A malformed message ahead of the real traffic: it must be dead-lettered, not stop diff.
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let garbage_topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    producer
        .send(
            FutureRecord::to(&garbage_topic).key("http://bad.example/").payload("{not an envelope}"),
            Duration::from_secs(10),
        )
        .await
        .expect("garbage produced");

    // Round robin with m = every URL, and no wait for a pick's estimate: every URL is
    // fetched in every period, failing ones too, so each change shows in the next period.
    let every_url_every_period = ["--policy", "uniform", "--pending-periods", "0"];
    let (stages, scheduler) = start_pipeline(&flags, m, &seeds, &every_url_every_period).await;

    let observer = Observer::new(
        &kafka.cluster,
        &[FETCH.name, FETCH_RESULTS.name, CHANGE_EVENTS.name, ESTIMATES.name, DEAD_LETTER],
    )
    .await
    .expect("observer");
    let mut seen = Seen::default();
    observe_until(&observer, &mut seen, "five periods picked in full", |s| {
        s.picks_per_period().values().filter(|&&n| n == m).count() >= 5
    })
    .await;
    scheduler.stop().await.expect("scheduler stops cleanly");
    observe_until(&observer, &mut seen, "every pick processed", Seen::all_picks_processed).await;
    let estimates_resting_on = |source: &str| {
        let series =
            format!("recrawl_estimator_rate_sources_total{{source=\"{source}\",stage=\"estimator\"}}");
        let estimator = stages.iter().find(|stage| stage.name == "estimator").expect("an estimator");
        metric(estimator, &series).unwrap_or_else(|| panic!("no series {series}"))
    };
    let (on_dates, on_comparisons) = (estimates_resting_on("dates"), estimates_resting_on("comparisons"));
    for stage in stages {
        let name = stage.name;
        stage.stop().await.unwrap_or_else(|e| panic!("{name} did not stop cleanly: {e}"));
    }
    // Reading the topics to the end after the stop: nothing more may have been produced
    // than what the assertions below account for.

    // The scheduler never picked more than m per period.
    let per_period = seen.picks_per_period();
    assert!(per_period.values().all(|&n| n <= m), "picks per period {per_period:?} exceed m = {m}");

    // Every pick was fetched once, and every fetch produced one change event.
    let key = |url: &str, period: u64| (url.to_owned(), period);
    let mut results: HashMap<(String, u64), usize> = HashMap::new();
    for r in &seen.results {
        *results.entry(key(&r.url, r.period)).or_default() += 1;
    }
    let mut changes: HashMap<(String, u64), &ChangeEvent> = HashMap::new();
    for c in &seen.changes {
        assert!(
            changes.insert(key(&c.page.url, c.period), c).is_none(),
            "two change events for {} in {}",
            c.page.url,
            c.period
        );
    }
    for pick in &seen.picks {
        assert_eq!(
            results.get(&key(&pick.url, pick.period)),
            Some(&1),
            "pick {} in {} fetched once",
            pick.url,
            pick.period
        );
        assert!(
            changes.contains_key(&key(&pick.url, pick.period)),
            "pick {} in {} has no change event",
            pick.url,
            pick.period
        );
    }
    assert_eq!(seen.changes.len(), seen.picks.len(), "a change event without a pick");

    // The site's own log says which version each request got; every change made on the
    // site shows up as `changed` on the next download, which is the next period's
    // (every URL is picked in every full period).
    let served = site.served();
    let (mut detected, mut detected_next_period) = (0, 0);
    for (index, every) in change_every.iter().enumerate() {
        let url = format!("{}/page/{index}.html", site.base_url());
        let versions: Vec<u32> =
            served.iter().filter(|s| url.ends_with(&s.path)).map(|s| s.version).collect();
        let mut events: Vec<&ChangeEvent> = seen.changes.iter().filter(|c| c.page.url == url).collect();
        events.sort_by_key(|c| c.period);
        assert_eq!(versions.len(), events.len(), "{url}: requests served vs change events");
        assert!(events.iter().all(|e| e.downloaded), "{url}: every request downloads");
        assert_eq!(events[0].changed, None, "{url}: the first download compares with nothing");
        for i in 1..events.len() {
            let site_changed = versions[i] != versions[i - 1];
            assert_eq!(events[i].changed, Some(site_changed), "{url} period {}", events[i].period);
            if site_changed {
                detected += 1;
                // Unless the scheduler's tick missed the next period altogether (a
                // stalled machine), the next download was in it: every period picks
                // every URL.
                let next_period = events[i - 1].period + 1;
                if per_period.contains_key(&next_period) {
                    assert_eq!(events[i].period, next_period, "{url}: change detected a period late");
                    detected_next_period += 1;
                }
            }
        }
        if *every == 0 {
            assert!(events.iter().all(|e| e.changed != Some(true)), "{url} never changes");
        }
    }
    assert!(detected >= 5, "only {detected} changes detected: the test did not exercise detection");
    assert!(detected_next_period >= 3, "only {detected_next_period} changes checked for their period");

    // The estimator's DR for the always-failing page is 0; for the home page 1.
    let latest = |url: &str| {
        seen.estimates
            .iter()
            .filter(|e| e.page.url == url)
            .max_by_key(|e| e.period)
            .unwrap_or_else(|| panic!("no estimate for {url}"))
    };
    let broken = latest(&format!("{}/broken/0.html", site.base_url()));
    assert!(broken.requests >= 5, "{broken:?}");
    assert_eq!((broken.successes, broken.download_rate), (0, Some(0.0)));
    assert_eq!(broken.modification_rate, None);
    let home = latest(&site.home_url());
    assert_eq!(home.download_rate, Some(1.0));
    assert_eq!(home.modification_rate, Some(0.0));
    // Page 2 never changes and its Last-Modified is years old, kept by every download. No
    // page of the site dates a change, so the date could be one that never moves: no
    // estimate's rate rests on it (believed, it would claim years of quiet). The rate's
    // value cannot show this: the prior of a partition whose URLs never change is as low.
    let dated = latest(&format!("{}/page/2.html", site.base_url()));
    assert_eq!(dated.last_request.last_modified.as_deref(), Some(STATIC_PAGES_MODIFIED));
    assert_eq!(on_dates, 0.0, "estimates resting on dates");
    assert!(on_comparisons >= 4.0, "{on_comparisons} estimates resting on comparisons");

    // The malformed message went to the dead-letter topic with its reason.
    assert_eq!(seen.undecodable, vec![garbage_topic.clone()]);
    assert_eq!(seen.dead_letters.len(), 1, "{:?}", seen.dead_letters);
    let (stage, reason) = &seen.dead_letters[0];
    assert_eq!(stage, "diff");
    assert!(reason.contains("\"schema\" field"), "{reason}");

    // What analysts read is plain JSON, as any tool parses it: the raw value of every
    // record on the public topics is one object naming its schema, with matching headers.
    for (topic, schema) in [
        (CHANGE_EVENTS.name, schema_tag::<ChangeEvent>()),
        (ESTIMATES.name, schema_tag::<PageEstimate>()),
        (LINKS.name, schema_tag::<DiscoveredLinks>()),
        (DISTRIBUTIONS.name, schema_tag::<GroupDistribution>()),
    ] {
        let records = plain_json_records(&kafka, topic, &schema).len();
        assert!(records > 0, "no records on {topic}");
    }
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_follows_links_and_never_exceeds_m() {
    let broker = Broker::start();
    let prefix = unique_prefix("discovery");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let site = DemoSite::start(SiteConfig {
        pages: 12,
        change_every: vec![2],
        failing_pages: 0,
        links_per_page: 3,
        listed_only: 0,
    })
    .await
    .expect("site");
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, format!("# the home page only\n{}\n", site.home_url())).expect("seeds");
    let m = 3;

    let (stages, scheduler) = start_pipeline(&flags, m, &seeds, &[]).await;
    let observer =
        Observer::new(&kafka.cluster, &[FETCH.name, LINKS.name, ESTIMATES.name]).await.expect("observer");
    let mut seen = Seen::default();
    observe_until(&observer, &mut seen, "six periods of picks", |s| s.picks_per_period().len() >= 6).await;
    scheduler.stop().await.expect("scheduler stops cleanly");
    for stage in stages {
        stage.stop().await.expect("stage stops cleanly");
    }

    let per_period = seen.picks_per_period();
    assert!(per_period.values().all(|&n| n <= m), "{per_period:?}");
    assert!(per_period.values().filter(|&&n| n == m).count() >= 3, "the budget was used: {per_period:?}");
    let home = site.home_url();
    assert!(
        seen.links.iter().any(|l| l.source.as_ref().is_some_and(|source| source.url == home)),
        "links extracted from home"
    );
    let discovered: Vec<&PagePick> =
        seen.picks.iter().filter(|p| p.reason == PickReason::Discovery && p.url != home).collect();
    assert!(!discovered.is_empty(), "pages found only through links were picked: {:?}", seen.picks);
    assert!(discovered.iter().all(|p| p.url.starts_with(&site.base_url())));
    drop(broker);
}

/// #50's target: a page that only a sitemap names (robots.txt names the sitemap) is
/// fetched within two periods of the sitemap's first download, and the announcements are
/// plain JSON that the published schema accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_only_a_sitemap_names_is_fetched_within_two_periods_of_the_sitemap() {
    let broker = Broker::start();
    let prefix = unique_prefix("sitemap");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    // Two pages only the sitemap names, among eight linked ones: at 10 picks a period the
    // discovery share (20 %) is 2, so both fit in the period after the sitemap's, ranked
    // ahead of the linked pages still in the frontier.
    let listed = 2;
    let site = DemoSite::start(SiteConfig {
        pages: 8,
        change_every: vec![0],
        failing_pages: 0,
        links_per_page: 2,
        listed_only: listed,
    })
    .await
    .expect("site");
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, format!("{}\n", site.home_url())).expect("seeds");

    let (stages, scheduler) = start_pipeline(&flags, 10, &seeds, &[]).await;
    let observer = Observer::new(&kafka.cluster, &[FETCH.name, FETCH_RESULTS.name, ANNOUNCEMENTS.name])
        .await
        .expect("observer");
    let mut seen = Seen::default();
    let base = site.base_url();
    let listed_urls: Vec<String> = (0..listed).map(|k| format!("{base}/listed/{k}.html")).collect();
    let sitemap = format!("{base}{}", recrawl_e2e::site::SITEMAP_PATH);
    let downloaded = |seen: &Seen, url: &str| {
        seen.results
            .iter()
            .filter(|r| r.url == url && r.outcome == FetchOutcome::Downloaded)
            .map(|r| r.period)
            .min()
    };
    observe_until(&observer, &mut seen, "every listed page downloaded", |seen| {
        listed_urls.iter().all(|url| downloaded(seen, url).is_some())
    })
    .await;
    // The sitemap is then read by its own rule (its host's claims not yet judged: every
    // 4 periods), not as a page: with 10 picks a period for a dozen URLs, its page model
    // would have it picked nearly every period.
    let sitemap_picks = |seen: &Seen| -> Vec<u64> {
        let mut periods: Vec<u64> =
            seen.picks.iter().filter(|p| p.url == sitemap).map(|p| p.period).collect();
        periods.sort_unstable();
        periods
    };
    observe_until(&observer, &mut seen, "the sitemap picked again", |seen| sitemap_picks(seen).len() >= 2)
        .await;
    let series = "recrawl_scheduler_document_reads_total{by=\"rule\",stage=\"scheduler\"}";
    let by_rule = metric(&scheduler, series).unwrap_or(0.0);
    scheduler.stop().await.expect("scheduler stops cleanly");
    let picks = sitemap_picks(&seen);
    assert!(picks[1] >= picks[0] + 4, "the sitemap picked in periods {picks:?}");
    assert!(by_rule >= 1.0, "{by_rule} reads of the sitemap by its rule");
    for stage in stages {
        stage.stop().await.expect("stage stops cleanly");
    }

    let sitemap_period = downloaded(&seen, &sitemap).expect("the sitemap was downloaded");
    for url in &listed_urls {
        let period = downloaded(&seen, url).expect("listed page downloaded");
        assert!(
            period <= sitemap_period + 2,
            "{url} downloaded in period {period}, the sitemap in {sitemap_period}"
        );
    }
    let named_by = |document: AnnouncingDocument| {
        seen.announcements.iter().filter(move |a| a.document == document).map(|a| a.page.url.as_str())
    };
    assert!(named_by(AnnouncingDocument::RobotsTxt).any(|url| url == sitemap), "{:?}", seen.announcements);
    let mut from_sitemap: Vec<&str> = named_by(AnnouncingDocument::Sitemap).collect();
    from_sitemap.sort_unstable();
    from_sitemap.dedup();
    assert_eq!(from_sitemap, listed_urls.iter().map(String::as_str).collect::<Vec<_>>());
    let claimed = seen.announcements.iter().filter(|a| a.document == AnnouncingDocument::Sitemap);
    assert!(claimed.clone().all(|a| a.claimed_modified_ms.is_some() && a.change_frequency.is_some()));
    // No page links to the listed ones: they were found through the sitemap alone.
    let served = site.served();
    assert!(served.iter().any(|s| s.path == "/robots.txt" && s.status == 200));
    let records = plain_json_records(&kafka, ANNOUNCEMENTS.name, &schema_tag::<PageAnnouncement>()).len();
    assert!(records > listed, "{records} announcements read back: the sitemap and the pages it names");
    drop(broker);
}
