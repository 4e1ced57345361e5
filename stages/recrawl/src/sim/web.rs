//! The simulated web's model: sites and pages drawn from a seed, each page with a hidden
//! change process, a download behaviour, a size and out-links. Pure and deterministic:
//! the same parameters give the same web, whether the HTTP server (`simweb`), the policy
//! simulator or the paper experiments ask.
//!
//! Time is measured in periods (period p covers [p, p + 1)); `period_minutes` says how
//! much wall time a period stands for, which places it in a day for the time-of-day
//! effects.
//!
//! Grounding: download behaviour follows the estimator paper's Table 1 (popular and
//! random groups); change rates are log-normal (most pages rarely change, a few many
//! times a period); each site's changes concentrate around a peak hour of the day or of
//! the night, as the refresh-groups paper observed; sizes are log-normal over 2²…2¹³
//! words; out-degrees are Pareto and targets popularity-ranked, so in-degrees follow a
//! power law; each host's response time rises around its busy hour (the scheduler
//! paper's g_i(t)).

use std::f64::consts::TAU;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use recrawl_model::prediction::{CoarseShares, PAPER_POPULAR, PAPER_RANDOM};
use serde::Serialize;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::text::{Charset, Language};

/// The few parameters a web is generated from.
#[derive(Debug, Clone, PartialEq)]
pub struct WebParams {
    pub seed: u64,
    pub sites: u32,
    pub pages_per_site: u32,
    /// Wall minutes one period stands for (places periods in the day).
    pub period_minutes: f64,
    /// Share of sites whose pages are in Korean.
    pub korean_share: f64,
    /// Median of the log-normal change rate, changes per period.
    pub median_change_rate: f64,
    /// σ of the change rate's logarithm: the heavier the tail, the larger.
    pub change_rate_sigma: f64,
    /// Share of sites whose `Last-Modified` is the time of the page's latest change.
    pub truthful_dates_share: f64,
    /// Share of sites whose `Last-Modified` is the time of the response.
    pub response_dates_share: f64,
    /// Share of sites whose `Last-Modified` never moves: the date the page was made,
    /// whatever changed since, as a date taken from a template or a file the page is
    /// built from. The rest of the sites send none.
    pub stuck_dates_share: f64,
    /// How the pages change ([`WorldKind`]).
    pub world: WorldKind,
    /// Whether requests fail as the estimator paper's Table 1 says (some pages never
    /// download, some now and then); without, every request downloads.
    pub failures: bool,
    /// Periods the web is meant to be crawled for: where in a run a drifting page's rate
    /// jumps.
    pub run_periods: f64,
    /// Share of the sites with a sitemap (named in robots.txt) listing their public pages,
    /// each `<lastmod>` as the site's `Last-Modified` dates the page.
    pub sitemap_share: f64,
    /// Share of a sitemap site's pages that no page links to: only its sitemap names them.
    pub sitemap_only_share: f64,
    /// Share of the sites with an RSS feed (`/feed.xml`, named in each page's head) of
    /// their [`FEED_ITEMS`] latest changed pages, each dated as the site's `Last-Modified`
    /// dates the page.
    pub feed_share: f64,
}

/// Items a simulated site's feed lists: its latest changed pages, newest first.
pub const FEED_ITEMS: usize = 20;

/// The pages a feed lists, given each page of the site with its latest change (in
/// periods; `None`: none yet): the [`FEED_ITEMS`] changed latest, newest first.
pub fn feed_items(latest_changes: impl IntoIterator<Item = (u32, Option<f64>)>) -> Vec<(u32, f64)> {
    let mut changed: Vec<(u32, f64)> =
        latest_changes.into_iter().filter_map(|(page, latest)| Some((page, latest?))).collect();
    changed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    changed.truncate(FEED_ITEMS);
    changed
}

impl Default for WebParams {
    fn default() -> Self {
        Self {
            seed: 1,
            sites: 100,
            pages_per_site: 100,
            period_minutes: 60.0,
            korean_share: 0.3,
            median_change_rate: 0.03,
            change_rate_sigma: 2.0,
            truthful_dates_share: 0.4,
            response_dates_share: 0.2,
            stuck_dates_share: 0.0,
            world: WorldKind::Web,
            failures: true,
            run_periods: 100.0,
            sitemap_share: 0.0,
            sitemap_only_share: 0.0,
            feed_share: 0.0,
        }
    }
}

/// How a generated web's pages change. `Web` is recrawl's own simulated web; the others
/// are a family of webs whose pages follow processes the estimator was not built around,
/// each kind reported by studies of real pages (`docs/algorithms/worlds.md` has their
/// parameters). In every kind a fifth of the pages never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorldKind {
    /// Poisson changes at log-normal rates, each site's intensity following its day.
    Web,
    /// A change every k periods at a fixed phase, a little jitter, now and then one missed.
    Periodic,
    /// On and off spells: bursts of changes, then long quiet.
    Bursty,
    /// Poisson at log-normal rates that jump ten-fold, up or down, once mid-run.
    Drifting,
    /// Poisson at Pareto-distributed rates: many slow pages and a long tail of fast ones.
    HeavyTailed,
    /// Every kind above, page by page.
    Mixed,
}

impl WorldKind {
    /// Every kind, in the order a table lists them.
    pub const ALL: [WorldKind; 6] = [
        WorldKind::Web,
        WorldKind::Periodic,
        WorldKind::Bursty,
        WorldKind::Drifting,
        WorldKind::HeavyTailed,
        WorldKind::Mixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Web => "web",
            Self::Periodic => "periodic",
            Self::Bursty => "bursty",
            Self::Drifting => "drifting",
            Self::HeavyTailed => "heavy-tailed",
            Self::Mixed => "mixed",
        }
    }

    /// Whether its requests fail as Table 1 says unless told otherwise: the family's
    /// other webs download every request, so that what a policy gains or loses there is
    /// learning the changes alone.
    pub fn fails_by_default(self) -> bool {
        self == Self::Web
    }
}

/// How one page changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Process {
    /// Poisson at the page's rate, its intensity following the site's day.
    Diurnal,
    /// Poisson at the page's rate at every hour.
    Poisson,
    /// A change every `interval` periods from `phase`, each moved by up to `jitter`
    /// periods either way and missed with chance `skip`.
    Periodic { interval: f32, phase: f32, jitter: f32, skip: f32 },
    /// Spells on and off of exponential lengths with means `on` and `off` periods:
    /// Poisson changes at `on_rate` in the on spells, none in the off ones.
    Bursty { on_rate: f32, on: f32, off: f32 },
    /// Poisson at `before` changes per period until `at`, at `after` from then on.
    Drifting { before: f32, after: f32, at: f32 },
}

/// Share of pages that never change, in every world.
const STATIC_SHARE: f64 = 0.2;
/// A uniform draw in [low, high) on the log scale.
fn log_uniform(rng: &mut Pcg64, low: f64, high: f64) -> f64 {
    (low.ln() + (high / low).ln() * rng.random::<f64>()).exp()
}

/// The change process of a page of the family's webs other than `Web`, and its mean rate
/// over the run; `None` for one that never changes. Drawn from its own stream, after the
/// page's other features, so those stay as the `Web` world draws them.
fn family_process(params: &WebParams, kind: WorldKind, id: u64) -> Option<(Process, f64)> {
    let mut rng = Pcg64::seed_from_u64(params.seed ^ 0xF4A1_11E5 ^ id.wrapping_mul(0xA24B_AED4_963E_E407));
    if rng.random::<f64>() < STATIC_SHARE {
        return None;
    }
    let kind = match kind {
        WorldKind::Mixed => match rng.random::<f64>() {
            // Shares among the pages that change.
            x if x < 0.25 => WorldKind::Periodic,
            x if x < 0.4 => WorldKind::Web,
            x if x < 0.6 => WorldKind::HeavyTailed,
            x if x < 0.8 => WorldKind::Bursty,
            _ => WorldKind::Drifting,
        },
        kind => kind,
    };
    let log_normal = |rng: &mut Pcg64| {
        (params.median_change_rate.ln() + params.change_rate_sigma * normal(rng)).exp().min(MAX_CHANGE_RATE)
    };
    Some(match kind {
        // `Mixed` was resolved to a kind above.
        WorldKind::Web | WorldKind::Mixed => (Process::Diurnal, log_normal(&mut rng)),
        WorldKind::Periodic => {
            let interval = log_uniform(&mut rng, 2.0, 60.0);
            let phase = interval * rng.random::<f64>();
            let jitter = 0.1 * interval * rng.random::<f64>();
            let skip = 0.1 * rng.random::<f64>();
            let process = Process::Periodic {
                interval: interval as f32,
                phase: phase as f32,
                jitter: jitter as f32,
                skip: skip as f32,
            };
            (process, (1.0 - skip) / interval)
        }
        WorldKind::Bursty => {
            let on = log_uniform(&mut rng, 2.0, 12.0);
            let off = on * log_uniform(&mut rng, 3.0, 20.0);
            let on_rate = log_uniform(&mut rng, 1.0, 8.0) / on;
            (
                Process::Bursty { on_rate: on_rate as f32, on: on as f32, off: off as f32 },
                on_rate * on / (on + off),
            )
        }
        WorldKind::Drifting => {
            let before = log_normal(&mut rng);
            let after =
                if rng.random::<f64>() < 0.5 { before * 10.0 } else { before / 10.0 }.min(MAX_CHANGE_RATE);
            let run = params.run_periods.max(1.0);
            let at = run * (0.25 + 0.5 * rng.random::<f64>());
            let mean = (before * at + after * (run - at)) / run;
            (Process::Drifting { before: before as f32, after: after as f32, at: at as f32 }, mean)
        }
        WorldKind::HeavyTailed => {
            // Pareto of shape 1 from 0.004: median 0.008, one in a hundred past 0.4.
            let rate = (PARETO_LEAST_RATE / (1.0 - rng.random::<f64>())).min(MAX_CHANGE_RATE);
            (Process::Poisson, rate)
        }
    })
}

/// The least rate of the heavy-tailed world's Pareto rates, changes per period.
const PARETO_LEAST_RATE: f64 = 0.004;

/// The estimator paper's two site groups (Table 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteGroup {
    Popular,
    Random,
}

impl SiteGroup {
    pub fn name(self) -> &'static str {
        match self {
            Self::Popular => "popular",
            Self::Random => "random",
        }
    }
}

/// How a request that does not download fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    NotFound,
    ServerError,
    /// The server holds the request past any reasonable timeout.
    Timeout,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub group: SiteGroup,
    pub language: Language,
    pub charset: Charset,
    /// Hour of the day (0–24) around which the site's pages change.
    pub change_peak_hour: f64,
    /// Hour of the day at which the host answers slowest.
    pub busy_hour: f64,
    /// Response time at the quietest hour, ms.
    pub base_response_ms: f64,
    /// robots.txt Crawl-delay, ms (0: none).
    pub crawl_delay_ms: u32,
    pub dates: ServerDates,
}

/// What a site's server sends as `Last-Modified`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerDates {
    /// The time of the page's latest change.
    Truthful,
    /// The time of the response, as servers of generated pages do.
    ResponseTime,
    /// The date the page was made, whatever changed since.
    Stuck,
    /// No header.
    Absent,
}

/// Which sites have a sitemap, which of their pages only it names, and which have a
/// feed: drawn from the web's seed, apart from the web's own draws.
#[derive(Debug, Clone, Copy)]
pub struct Sitemaps {
    /// Share of the sites with a sitemap.
    pub share: f64,
    /// Share of a sitemap site's pages that no page links to.
    pub only_share: f64,
    /// Share of the sites with a feed.
    pub feed_share: f64,
    pub seed: u64,
}

impl Sitemaps {
    fn draw(&self, what: u64, id: u32) -> f64 {
        Pcg64::seed_from_u64(self.seed ^ what ^ u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .random::<f64>()
    }

    pub fn has_sitemap(&self, site: u32) -> bool {
        self.draw(0x517E_3A95, site) < self.share
    }

    pub fn has_feed(&self, site: u32) -> bool {
        self.draw(0xFEED_0F17, site) < self.feed_share
    }

    /// Whether no page links to `page` of `site`.
    pub fn only_in_sitemap(&self, site: u32, page: u32) -> bool {
        self.has_sitemap(site) && self.draw(0x0011_1A7E, page) < self.only_share
    }
}

/// One page: 40 bytes, so a million fit in memory beside the simulator's books.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Page {
    pub site: u32,
    /// λ: mean changes per period (over the run, for a page whose rate moves).
    pub change_rate: f32,
    pub process: Process,
    /// Chance that a request downloads; 0 for pages that never do, 1 for most.
    pub download_probability: f32,
    pub failure: Failure,
    pub words: u16,
    pub out_links: u16,
    /// Disallowed by the site's robots.txt (served under `/private/`).
    pub private: bool,
    /// Linked to through a redirect (`/r/…` → the page).
    pub redirected: bool,
}

/// Amplitude of the time-of-day concentration: a site's change intensity is
/// 1 + A·cos(2π(h − peak)/24), mean 1 over a day, A = 0.8 (peak 9× the trough).
const DIURNAL_AMPLITUDE: f64 = 0.8;
/// The busy hour makes a host up to this much slower.
const BUSY_SLOWDOWN: f64 = 0.6;
/// Share of a page's links that stay on its site.
const SAME_SITE_LINKS: f64 = 0.8;
const MAX_CHANGE_RATE: f64 = 50.0;
const MAX_OUT_LINKS: f64 = 200.0;

/// The generated web.
#[derive(Debug, Clone)]
pub struct Web {
    params: WebParams,
    sites: Vec<Site>,
    pages: Vec<Page>,
    /// Popularity rank → page: an affine permutation of the page ids.
    rank_multiplier: u64,
    rank_offset: u64,
}

/// A uniform draw in [0, 1) from a hash of `item` in `stream`: the same every time asked.
fn unit_draw(stream: u64, item: u64) -> f64 {
    (xxh3_64_with_seed(&item.to_le_bytes(), stream) >> 11) as f64 / (1u64 << 53) as f64
}

/// A draw from a standard normal (Box–Muller).
fn normal(rng: &mut Pcg64) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (TAU * v).cos()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Web {
    pub fn generate(params: WebParams) -> Self {
        let mut rng = Pcg64::seed_from_u64(params.seed);
        let sites: Vec<Site> = (0..params.sites)
            .map(|site| {
                let group = if rng.random::<f64>() < 0.5 { SiteGroup::Popular } else { SiteGroup::Random };
                let korean = rng.random::<f64>() < params.korean_share;
                let language = if korean { Language::Korean } else { Language::English };
                // Korean sites of the papers' era often served EUC-KR.
                let charset =
                    if korean && rng.random::<f64>() < 0.5 { Charset::EucKr } else { Charset::Utf8 };
                // Most sites change by day (peak 10–16 h), a third by night (22–4 h).
                let change_peak_hour = if rng.random::<f64>() < 0.66 {
                    10.0 + 6.0 * rng.random::<f64>()
                } else {
                    (22.0 + 6.0 * rng.random::<f64>()) % 24.0
                };
                let busy_hour = (12.0 + 8.0 * normal(&mut rng)).rem_euclid(24.0);
                let base_response_ms = (80f64.ln() + 0.6 * normal(&mut rng)).exp();
                let crawl_delay_ms = if rng.random::<f64>() < 0.2 { 250 } else { 0 };
                // Drawn apart from the generator, so webs of earlier versions stay as they were.
                let dates = match unit_draw(params.seed ^ 0xDA7E5, u64::from(site)) {
                    x if x < params.truthful_dates_share => ServerDates::Truthful,
                    x if x < params.truthful_dates_share + params.response_dates_share => {
                        ServerDates::ResponseTime
                    }
                    x if x < params.truthful_dates_share
                        + params.response_dates_share
                        + params.stuck_dates_share =>
                    {
                        ServerDates::Stuck
                    }
                    _ => ServerDates::Absent,
                };
                Site {
                    group,
                    language,
                    charset,
                    change_peak_hour,
                    busy_hour,
                    base_response_ms,
                    crawl_delay_ms,
                    dates,
                }
            })
            .collect();
        let total = u64::from(params.sites) * u64::from(params.pages_per_site);
        let pages = (0..total)
            .map(|id| {
                let site = (id / u64::from(params.pages_per_site.max(1))) as u32;
                let mut rng = Pcg64::seed_from_u64(params.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let shares = match sites[site as usize].group {
                    SiteGroup::Popular => &PAPER_POPULAR,
                    SiteGroup::Random => &PAPER_RANDOM,
                };
                let download_probability = draw_rate(shares, &mut rng) as f32;
                let failure = match rng.random::<f64>() {
                    x if x < 0.5 => Failure::NotFound,
                    x if x < 0.8 => Failure::ServerError,
                    _ => Failure::Timeout,
                };
                let rate =
                    (params.median_change_rate.ln() + params.change_rate_sigma * normal(&mut rng)).exp();
                // A fifth of pages never change at all (archives, static pages).
                let change_rate = if rng.random::<f64>() < 0.2 { 0.0 } else { rate.min(MAX_CHANGE_RATE) };
                let words = (256f64.ln() + 1.2 * normal(&mut rng)).exp().clamp(4.0, 8192.0);
                // Pareto out-degree, shape 1.5, at least 2: mean about 6, a few hubs.
                let out_links = (2.0 / (1.0 - rng.random::<f64>()).powf(1.0 / 1.5)).min(MAX_OUT_LINKS);
                let (process, change_rate) = match params.world {
                    WorldKind::Web => (Process::Diurnal, change_rate),
                    kind => family_process(&params, kind, id).unwrap_or((Process::Poisson, 0.0)),
                };
                let download_probability = if params.failures { download_probability } else { 1.0 };
                Page {
                    site,
                    change_rate: change_rate as f32,
                    process,
                    download_probability,
                    failure,
                    words: words as u16,
                    out_links: out_links as u16,
                    private: rng.random::<f64>() < 0.02,
                    redirected: rng.random::<f64>() < 0.05,
                }
            })
            .collect();
        let mut rank_multiplier = 0x5851_F42D_4C95_7F2D % total.max(1);
        while total > 1 && gcd(rank_multiplier, total) != 1 {
            rank_multiplier += 1;
        }
        let rank_offset = params.seed % total.max(1);
        Self { params, sites, pages, rank_multiplier: rank_multiplier.max(1), rank_offset }
    }

    pub fn params(&self) -> &WebParams {
        &self.params
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub fn pages(&self) -> &[Page] {
        &self.pages
    }

    pub fn page(&self, id: u32) -> &Page {
        &self.pages[id as usize]
    }

    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    pub fn site_of(&self, id: u32) -> &Site {
        &self.sites[self.pages[id as usize].site as usize]
    }

    /// Hour of the day (0–24) at time `t`, period 0 starting at midnight.
    pub fn hour_at(&self, t: f64) -> f64 {
        (t * self.params.period_minutes / 60.0).rem_euclid(24.0)
    }

    /// The site's change intensity at `t` relative to its daily mean.
    pub fn diurnal_weight(&self, site: &Site, t: f64) -> f64 {
        1.0 + DIURNAL_AMPLITUDE * (TAU * (self.hour_at(t) - site.change_peak_hour) / 24.0).cos()
    }

    /// The page's change process from time 0, owned: advance it with
    /// [`ChangeState::next_change`].
    pub fn change_state(&self, id: u32) -> ChangeState {
        let page = &self.pages[id as usize];
        let stream = self.params.seed.rotate_left(17) ^ u64::from(id).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut rng = Pcg64::seed_from_u64(stream);
        let spell = match page.process {
            // Starts in a spell drawn from the process's long-run shares; spells are
            // memoryless, so what is left of it is as long as a whole one.
            Process::Bursty { on, off, .. } => {
                let (on, off) = (f64::from(on), f64::from(off));
                let is_on = rng.random::<f64>() < on / (on + off);
                Spell { on: is_on, until: exponential(&mut rng, if is_on { on } else { off }) }
            }
            _ => Spell { on: false, until: 0.0 },
        };
        ChangeState {
            rng,
            site: page.site,
            process: page.process,
            rate: f64::from(page.change_rate),
            t: 0.0,
            cycle: 0,
            spell,
        }
    }

    /// The page's change times from `from` on, in order, without end. The process always
    /// starts at 0, so a page's changes do not depend on where a reader starts.
    pub fn changes(&self, id: u32, from: f64) -> impl Iterator<Item = f64> + '_ {
        let mut state = self.change_state(id);
        std::iter::from_fn(move || state.next_change(self)).skip_while(move |&t| t < from)
    }

    /// Whether a request for the page made in `period` downloads (the same answer for
    /// every request of that period).
    pub fn downloads(&self, id: u32, period: u64) -> bool {
        let p = self.pages[id as usize].download_probability;
        p >= 1.0 || unit_draw(self.params.seed ^ u64::from(id) << 20, period) < f64::from(p)
    }

    /// The page's latest change before time 0: its process run back from 0 (an
    /// exponential wait at its mean rate), but not before the page was made, up to a year
    /// before; a page that never changes has been as it is since then.
    pub fn changed_before_start(&self, id: u32) -> f64 {
        let made = self.made(id);
        let page = &self.pages[id as usize];
        let rate = match page.process {
            // The cycle before the first: the page keeps its period before the run too.
            Process::Periodic { interval, phase, .. } if page.change_rate > 0.0 => {
                return (f64::from(phase) - f64::from(interval)).max(made);
            }
            Process::Drifting { before, .. } => f64::from(before),
            _ => f64::from(page.change_rate),
        };
        if rate > 0.0 {
            ((-unit_draw(Self::age_stream(&self.params, id), 1)).ln_1p() / rate).max(made)
        } else {
            made
        }
    }

    /// When the page was made: up to a year before time 0.
    pub fn made(&self, id: u32) -> f64 {
        let year = 365.0 * 24.0 * 60.0 / self.params.period_minutes;
        -year * unit_draw(Self::age_stream(&self.params, id), 0)
    }

    fn age_stream(params: &WebParams, id: u32) -> u64 {
        params.seed ^ 0xB1127 ^ u64::from(id) << 24
    }

    /// Which sites have a sitemap, which pages only it names, and which have a feed.
    pub fn sitemaps(&self) -> Sitemaps {
        Sitemaps {
            share: self.params.sitemap_share,
            only_share: self.params.sitemap_only_share,
            feed_share: self.params.feed_share,
            seed: self.params.seed,
        }
    }

    /// The `Last-Modified` the page's server sends at `at` (a time in periods; `None`: no
    /// header), given the page's latest change since time 0, if any.
    pub fn last_modified(&self, id: u32, latest_change: Option<f64>, at: f64) -> Option<f64> {
        match self.site_of(id).dates {
            ServerDates::Truthful => Some(latest_change.unwrap_or_else(|| self.changed_before_start(id))),
            ServerDates::ResponseTime => Some(at),
            ServerDates::Stuck => Some(self.made(id)),
            ServerDates::Absent => None,
        }
    }

    /// g_i(t): the host's response time at `t`, ms, for a body of `bytes`.
    pub fn response_ms(&self, site: &Site, t: f64, bytes: u64) -> f64 {
        let busy = (TAU * (self.hour_at(t) - site.busy_hour) / 24.0).cos().max(0.0);
        // About 2 MB/s of transfer on top of the time to first byte.
        site.base_response_ms * (1.0 + BUSY_SLOWDOWN * busy) + bytes as f64 / 2_000.0
    }

    /// The page's out-links, deterministic: most to pages of its own site, the rest
    /// across the web, both by popularity rank with P(rank r) ∝ 1/r.
    pub fn links(&self, id: u32) -> Vec<u32> {
        let page = &self.pages[id as usize];
        let per_site = u64::from(self.params.pages_per_site.max(1));
        let total = self.pages.len() as u64;
        let mut rng = Pcg64::seed_from_u64(self.params.seed.rotate_left(41) ^ u64::from(id));
        let ranked = |rng: &mut Pcg64, n: u64| {
            ((n as f64).powf(rng.random::<f64>()) as u64).saturating_sub(1).min(n - 1)
        };
        let mut links: Vec<u32> = (0..page.out_links)
            .map(|_| {
                if rng.random::<f64>() < SAME_SITE_LINKS {
                    let rank = ranked(&mut rng, per_site);
                    (u64::from(page.site) * per_site + (rank * 7 + u64::from(page.site)) % per_site) as u32
                } else {
                    let rank = ranked(&mut rng, total);
                    ((rank * self.rank_multiplier + self.rank_offset) % total) as u32
                }
            })
            .filter(|&target| target != id)
            .collect();
        links.sort_unstable();
        links.dedup();
        links
    }

    /// Bytes of the page's body, about 6 per word.
    pub fn bytes(&self, id: u32) -> u64 {
        u64::from(self.pages[id as usize].words) * 6 + 300
    }
}

/// A page's change process as it runs, owned, so a server can keep one per page. A
/// diurnal page's changes are drawn by thinning (candidates at the peak rate, each kept
/// with probability weight(t) / peak weight).
#[derive(Debug, Clone)]
pub struct ChangeState {
    rng: Pcg64,
    site: u32,
    process: Process,
    /// The page's mean rate (a Poisson or diurnal page's rate).
    rate: f64,
    t: f64,
    /// A periodic page's next cycle.
    cycle: u64,
    /// A bursty page's spell.
    spell: Spell,
}

#[derive(Debug, Clone, Copy)]
struct Spell {
    on: bool,
    until: f64,
}

/// An exponential wait of mean `mean` (infinite for a mean of 0 or less).
fn exponential(rng: &mut Pcg64, mean: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() * mean
}

impl ChangeState {
    /// The next change time; `None` for a page that never changes.
    pub fn next_change(&mut self, web: &Web) -> Option<f64> {
        if self.rate <= 0.0 {
            return None;
        }
        match self.process {
            Process::Diurnal => {
                let site = &web.sites[self.site as usize];
                let bound = self.rate * (1.0 + DIURNAL_AMPLITUDE);
                loop {
                    self.t += -(1.0 - self.rng.random::<f64>()).ln() / bound;
                    let keep = web.diurnal_weight(site, self.t) / (1.0 + DIURNAL_AMPLITUDE);
                    if self.rng.random::<f64>() < keep {
                        return Some(self.t);
                    }
                }
            }
            Process::Poisson => {
                self.t += exponential(&mut self.rng, 1.0 / self.rate);
                Some(self.t)
            }
            Process::Periodic { interval, phase, jitter, skip } => loop {
                let cycle = self.cycle;
                self.cycle += 1;
                let (missed, shift) = (self.rng.random::<f64>() < f64::from(skip), self.rng.random::<f64>());
                let at = f64::from(phase)
                    + cycle as f64 * f64::from(interval)
                    + f64::from(jitter) * (2.0 * shift - 1.0);
                // A jitter before 0 or before the previous change is taken as at it.
                if !missed && at >= 0.0 {
                    self.t = at.max(self.t);
                    return Some(self.t);
                }
            },
            Process::Bursty { on_rate, on, off } => loop {
                if self.spell.on {
                    let next = self.t + exponential(&mut self.rng, 1.0 / f64::from(on_rate));
                    if next < self.spell.until {
                        self.t = next;
                        return Some(next);
                    }
                    self.t = self.spell.until;
                    self.spell =
                        Spell { on: false, until: self.t + exponential(&mut self.rng, f64::from(off)) };
                } else {
                    self.t = self.spell.until;
                    self.spell =
                        Spell { on: true, until: self.t + exponential(&mut self.rng, f64::from(on)) };
                }
            },
            Process::Drifting { before, after, at } => loop {
                let (rate, at) = (if self.t < f64::from(at) { before } else { after }, f64::from(at));
                if rate <= 0.0 {
                    if self.t >= at {
                        return None;
                    }
                    self.t = at;
                    continue;
                }
                let next = self.t + exponential(&mut self.rng, 1.0 / f64::from(rate));
                // Memoryless: a wait that crosses the jump is drawn again from it.
                if self.t < at && next >= at {
                    self.t = at;
                } else {
                    self.t = next;
                    return Some(next);
                }
            },
        }
    }
}

/// Every page's change times over [0, horizon), in one flat array.
#[derive(Debug, Clone)]
pub struct Truth {
    horizon: f64,
    offsets: Vec<u64>,
    times: Vec<f64>,
    rates: Vec<f64>,
}

impl Truth {
    pub fn of_web(web: &Web, horizon: f64) -> Self {
        let mut offsets = Vec::with_capacity(web.len() + 1);
        let mut times = Vec::new();
        offsets.push(0);
        for id in 0..web.len() as u32 {
            times.extend(web.changes(id, 0.0).take_while(|&t| t < horizon));
            offsets.push(times.len() as u64);
        }
        // The rate of each page's process (its mean over the run where it moves), as the
        // known-rate optimum is told; a replay's can only be the changes it made.
        let rates = web.pages().iter().map(|p| f64::from(p.change_rate)).collect();
        Self { horizon, offsets, times, rates }
    }

    /// From explicit change times per page and the rates a known-rate policy may use.
    pub fn from_changes(horizon: f64, changes: Vec<Vec<f64>>, rates: Vec<f64>) -> Self {
        let mut offsets = vec![0u64];
        let mut times = Vec::new();
        for mut page in changes {
            page.sort_by(f64::total_cmp);
            times.extend(page.into_iter().filter(|&t| t < horizon));
            offsets.push(times.len() as u64);
        }
        Self { horizon, offsets, times, rates }
    }

    pub fn horizon(&self) -> f64 {
        self.horizon
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn changes(&self, page: u32) -> &[f64] {
        let page = page as usize;
        &self.times[self.offsets[page] as usize..self.offsets[page + 1] as usize]
    }

    pub fn total_changes(&self) -> usize {
        self.times.len()
    }

    /// The true mean change rates per period (what only the reference policies see).
    pub fn rates(&self) -> &[f64] {
        &self.rates
    }
}

/// A rate drawn from coarse shares (which must have some weight).
pub fn draw_rate(shares: &CoarseShares, rng: &mut Pcg64) -> f64 {
    let bin_quantile = rng.random::<f64>();
    shares.rate_at(bin_quantile, rng.random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> Web {
        Web::generate(WebParams { seed, sites: 20, pages_per_site: 50, ..WebParams::default() })
    }

    #[test]
    fn the_same_seed_gives_the_same_web_and_another_seed_another() {
        let (a, b, c) = (small(7), small(7), small(8));
        assert_eq!(a.pages(), b.pages());
        assert_eq!(a.sites(), b.sites());
        assert_ne!(a.pages(), c.pages());
        for id in [0, 17, 999] {
            assert_eq!(a.links(id), b.links(id));
            let first: Vec<f64> = a.changes(id, 0.0).take(20).collect();
            assert_eq!(first, b.changes(id, 0.0).take(20).collect::<Vec<_>>());
            assert_eq!(a.downloads(id, 3), b.downloads(id, 3));
        }
    }

    #[test]
    fn changes_from_a_time_are_the_tail_of_the_changes_from_zero() {
        let web = small(3);
        let id = (0..web.len() as u32).find(|&id| web.page(id).change_rate > 0.5).expect("a fast page");
        let all: Vec<f64> = web.changes(id, 0.0).take_while(|&t| t < 50.0).collect();
        let tail: Vec<f64> = web.changes(id, 20.0).take_while(|&t| t < 50.0).collect();
        assert!(!tail.is_empty() && tail.len() < all.len());
        assert_eq!(&all[all.len() - tail.len()..], &tail[..]);
        assert!(tail[0] >= 20.0);
    }

    #[test]
    fn sites_date_their_pages_in_the_shares_asked_and_pages_were_made_within_a_year() {
        let params = WebParams { stuck_dates_share: 0.1, ..WebParams::default() };
        let web = Web::generate(WebParams { sites: 2000, pages_per_site: 5, ..params });
        let share = |dates: ServerDates| {
            web.sites().iter().filter(|site| site.dates == dates).count() as f64 / 2000.0
        };
        assert!((share(ServerDates::Truthful) - params.truthful_dates_share).abs() < 0.04);
        assert!((share(ServerDates::ResponseTime) - params.response_dates_share).abs() < 0.04);
        assert!((share(ServerDates::Stuck) - params.stuck_dates_share).abs() < 0.03);
        // The draws leave the rest of the web as it was generated before sites dated pages.
        let undated = Web::generate(WebParams {
            truthful_dates_share: 0.0,
            response_dates_share: 0.0,
            stuck_dates_share: 0.0,
            ..WebParams { sites: 2000, pages_per_site: 5, ..WebParams::default() }
        });
        assert_eq!(web.pages(), undated.pages());
        assert!(undated.sites().iter().all(|site| site.dates == ServerDates::Absent));
        let year = 365.0 * 24.0;
        let id_of = |dates: ServerDates, moving: bool| {
            (0..web.len() as u32)
                .find(|&id| web.site_of(id).dates == dates && (web.page(id).change_rate > 0.0) == moving)
                .expect("such a page")
        };
        for id in 0..web.len() as u32 {
            let (made, before) = (web.made(id), web.changed_before_start(id));
            assert!((-year..=0.0).contains(&made) && (made..=0.0).contains(&before), "{id}: {made} {before}");
        }
        // A truthful server dates the latest change, or before any the one before time 0;
        // the response time's server the response; a stuck one the page's making; the
        // rest send nothing.
        let truthful = id_of(ServerDates::Truthful, true);
        assert_eq!(web.last_modified(truthful, Some(3.5), 7.0), Some(3.5));
        assert_eq!(web.last_modified(truthful, None, 7.0), Some(web.changed_before_start(truthful)));
        assert_eq!(web.last_modified(id_of(ServerDates::ResponseTime, true), Some(3.5), 7.0), Some(7.0));
        assert_eq!(web.last_modified(id_of(ServerDates::Absent, true), Some(3.5), 7.0), None);
        let stuck = id_of(ServerDates::Stuck, true);
        assert_eq!(web.last_modified(stuck, Some(3.5), 7.0), Some(web.made(stuck)));
        // Pages that change last changed, before time 0, about 1 / λ earlier.
        let ages: Vec<f64> = (0..web.len() as u32)
            .filter(|&id| web.page(id).change_rate > 0.05)
            .map(|id| -web.changed_before_start(id) * f64::from(web.page(id).change_rate))
            .collect();
        let mean = ages.iter().sum::<f64>() / ages.len() as f64;
        assert!((0.8..1.2).contains(&mean), "{mean}");
    }

    #[test]
    fn download_behaviour_follows_table_1() {
        let web = Web::generate(WebParams { sites: 40, pages_per_site: 500, ..WebParams::default() });
        let share = |pred: &dyn Fn(&Page) -> bool| {
            web.pages().iter().filter(|p| pred(p)).count() as f64 / web.len() as f64
        };
        // Table 1: 22.01 % (popular) and 15.92 % (random) never download, 67.66 % and
        // 75.65 % always do; the sites split about evenly.
        let never = share(&|p| p.download_probability == 0.0);
        let always = share(&|p| p.download_probability >= 1.0);
        assert!((0.14..0.24).contains(&never), "{never}");
        assert!((0.65..0.78).contains(&always), "{always}");
    }

    #[test]
    fn change_rates_are_heavy_tailed_and_follow_the_sites_day() {
        let web = Web::generate(WebParams { sites: 50, pages_per_site: 400, ..WebParams::default() });
        let mut rates: Vec<f64> = web.pages().iter().map(|p| f64::from(p.change_rate)).collect();
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let top = rates[rates.len() * 99 / 100];
        assert!(median < 0.1 && top > 1.0, "median {median}, 99th percentile {top}");
        // Changes near the peak hour outnumber those twelve hours away.
        let (mut near, mut far) = (0, 0);
        let truth = Truth::of_web(&web, 48.0);
        for id in 0..web.len() as u32 {
            let peak = web.site_of(id).change_peak_hour;
            for &t in truth.changes(id) {
                let distance = (web.hour_at(t) - peak).rem_euclid(24.0);
                let distance = distance.min(24.0 - distance);
                if distance < 3.0 {
                    near += 1;
                } else if distance > 9.0 {
                    far += 1;
                }
            }
        }
        assert!(near > 3 * far, "near {near}, far {far}");
    }

    #[test]
    fn sizes_stay_within_the_range_and_in_degrees_have_hubs() {
        let web = Web::generate(WebParams { sites: 20, pages_per_site: 500, ..WebParams::default() });
        assert!(web.pages().iter().all(|p| (4..=8192).contains(&p.words)));
        let mut in_degree = vec![0u32; web.len()];
        for id in 0..web.len() as u32 {
            for target in web.links(id) {
                in_degree[target as usize] += 1;
            }
        }
        let mean = in_degree.iter().map(|&d| f64::from(d)).sum::<f64>() / web.len() as f64;
        let max = in_degree.iter().copied().max().unwrap_or(0);
        assert!(f64::from(max) > 20.0 * mean, "max {max}, mean {mean}");
    }

    fn world(kind: WorldKind, seed: u64) -> Web {
        Web::generate(WebParams {
            seed,
            sites: 40,
            pages_per_site: 100,
            world: kind,
            failures: kind.fails_by_default(),
            ..WebParams::default()
        })
    }

    #[test]
    fn the_family_s_worlds_change_as_their_kinds_say_and_keep_the_web_s_other_features() {
        let web = world(WorldKind::Web, 9);
        for kind in WorldKind::ALL {
            let other = world(kind, 9);
            // Sites, sizes and links are the web's; only the changes (and failures) differ.
            assert_eq!(other.sites(), web.sites(), "{kind:?}");
            assert!(other
                .pages()
                .iter()
                .zip(web.pages())
                .all(|(a, b)| (a.words, a.out_links) == (b.words, b.out_links)));
            assert_eq!(other.links(17), web.links(17));
            let static_share =
                other.pages().iter().filter(|p| p.change_rate == 0.0).count() as f64 / other.len() as f64;
            assert!((0.17..0.23).contains(&static_share), "{kind:?}: {static_share}");
            let always = other.pages().iter().all(|p| p.download_probability >= 1.0);
            assert_eq!(always, !kind.fails_by_default(), "{kind:?}");
        }
        let kinds = |web: &Web| {
            let mut seen: Vec<&'static str> = web
                .pages()
                .iter()
                .filter(|p| p.change_rate > 0.0)
                .map(|p| match p.process {
                    Process::Diurnal => "diurnal",
                    Process::Poisson => "poisson",
                    Process::Periodic { .. } => "periodic",
                    Process::Bursty { .. } => "bursty",
                    Process::Drifting { .. } => "drifting",
                })
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen
        };
        assert_eq!(
            kinds(&world(WorldKind::Mixed, 9)),
            ["bursty", "diurnal", "drifting", "periodic", "poisson"]
        );
        assert_eq!(kinds(&world(WorldKind::Periodic, 9)), ["periodic"]);
    }

    #[test]
    fn periodic_pages_change_near_their_phase_every_interval() {
        let web = world(WorldKind::Periodic, 4);
        let horizon = 400.0;
        let truth = Truth::of_web(&web, horizon);
        for id in (0..web.len() as u32).filter(|&id| web.page(id).change_rate > 0.0).take(200) {
            let Process::Periodic { interval, phase, jitter, skip } = web.page(id).process else {
                panic!("{id} is not periodic")
            };
            let (interval, phase, jitter) = (f64::from(interval), f64::from(phase), f64::from(jitter));
            let changes = truth.changes(id);
            for &t in changes {
                let cycle = ((t - phase) / interval).round();
                assert!((t - phase - cycle * interval).abs() <= jitter + 1e-6, "{id}: {t}");
            }
            let cycles = (horizon - phase) / interval;
            let expected = cycles * (1.0 - f64::from(skip));
            assert!((changes.len() as f64) <= cycles.ceil() + 1.0, "{id}");
            assert!(
                changes.len() as f64 >= expected - 3.0 * expected.sqrt() - 2.0,
                "{id}: {}",
                changes.len()
            );
        }
    }

    #[test]
    fn bursty_pages_change_in_spells_and_drifting_ones_jump_ten_fold() {
        let horizon = 2000.0;
        // Bursty: counts per window vary far more than a Poisson process's (whose variance
        // equals its mean).
        let bursty = world(WorldKind::Bursty, 2);
        let truth = Truth::of_web(&bursty, horizon);
        let (mut over_dispersed, mut checked) = (0, 0);
        for id in (0..bursty.len() as u32).filter(|&id| truth.changes(id).len() > 40).take(100) {
            let mut counts = [0f64; 40];
            truth.changes(id).iter().for_each(|&t| counts[(t / horizon * 40.0) as usize] += 1.0);
            let mean = counts.iter().sum::<f64>() / 40.0;
            let variance = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / 39.0;
            checked += 1;
            over_dispersed += usize::from(variance > 2.0 * mean);
        }
        assert!(checked > 50 && over_dispersed * 10 >= checked * 9, "{over_dispersed} of {checked}");
        // Drifting: the rate after the jump is ten times, or a tenth of, the rate before.
        let params = WebParams { run_periods: horizon, ..WebParams::default() };
        let drifting = Web::generate(WebParams { world: WorldKind::Drifting, sites: 40, ..params });
        let truth = Truth::of_web(&drifting, horizon);
        let (mut before, mut after) = (0.0, 0.0);
        let (mut rising_before, mut rising_after) = (0.0, 0.0);
        for id in 0..drifting.len() as u32 {
            let Process::Drifting { before: rate_before, after: rate_after, at } = drifting.page(id).process
            else {
                continue;
            };
            assert!((0.25 * horizon..=0.75 * horizon).contains(&f64::from(at)));
            let at = f64::from(at);
            let changes = truth.changes(id);
            let early = changes.iter().filter(|&&t| t < at).count() as f64 / at;
            let late = changes.iter().filter(|&&t| t >= at).count() as f64 / (horizon - at);
            if rate_after > rate_before {
                (rising_before, rising_after) = (rising_before + early, rising_after + late);
            } else {
                (before, after) = (before + early, after + late);
            }
        }
        assert!((7.0..14.0).contains(&(rising_after / rising_before)), "{rising_before} → {rising_after}");
        assert!((7.0..14.0).contains(&(before / after)), "{before} → {after}");
    }

    #[test]
    fn heavy_tailed_rates_follow_a_pareto_law_and_the_optimum_is_told_them() {
        let web = world(WorldKind::HeavyTailed, 3);
        let rates: Vec<f64> =
            web.pages().iter().map(|p| f64::from(p.change_rate)).filter(|&rate| rate > 0.0).collect();
        // P(λ > x) = 0.004 / x: a tenth above 0.04, a hundredth above 0.4.
        let above = |x: f64| rates.iter().filter(|&&rate| rate > x).count() as f64 / rates.len() as f64;
        assert!((above(0.04) - 0.1).abs() < 0.02 && (above(0.4) - 0.01).abs() < 0.006, "{}", above(0.4));
        assert!(rates.iter().all(|&rate| rate >= PARETO_LEAST_RATE));
        // The reference policies are told each page's rate.
        let truth = Truth::of_web(&web, 50.0);
        assert!((0..web.len()).all(|id| truth.rates()[id] == f64::from(web.pages()[id].change_rate)));
    }

    #[test]
    fn response_time_peaks_at_the_busy_hour() {
        let web = small(5);
        let site = &web.sites()[0];
        let at_hour = |h: f64| h / web.params().period_minutes * 60.0;
        let busy = web.response_ms(site, at_hour(site.busy_hour), 0);
        let quiet = web.response_ms(site, at_hour((site.busy_hour + 12.0) % 24.0), 0);
        assert!((busy / quiet - 1.0 - BUSY_SLOWDOWN).abs() < 1e-9);
    }
}
