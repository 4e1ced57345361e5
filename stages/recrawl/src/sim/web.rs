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
        }
    }
}

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

/// One page: 24 bytes, so a million fit in memory beside the simulator's books.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Page {
    pub site: u32,
    /// λ: mean changes per period.
    pub change_rate: f32,
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
                Page {
                    site,
                    change_rate: change_rate as f32,
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
        ChangeState {
            rng: Pcg64::seed_from_u64(stream),
            site: page.site,
            bound: f64::from(page.change_rate) * (1.0 + DIURNAL_AMPLITUDE),
            t: 0.0,
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
        let rate = f64::from(self.pages[id as usize].change_rate);
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

/// A page's change process: a Poisson process whose intensity follows the site's day,
/// drawn by thinning (candidates at the peak rate, each kept with probability
/// weight(t) / peak weight). It owns its state, so a server can keep one per page.
#[derive(Debug, Clone)]
pub struct ChangeState {
    rng: Pcg64,
    site: u32,
    bound: f64,
    t: f64,
}

impl ChangeState {
    /// The next change time; `None` for a page that never changes.
    pub fn next_change(&mut self, web: &Web) -> Option<f64> {
        if self.bound <= 0.0 {
            return None;
        }
        let site = &web.sites[self.site as usize];
        loop {
            self.t += -(1.0 - self.rng.random::<f64>()).ln() / self.bound;
            let keep = web.diurnal_weight(site, self.t) / (1.0 + DIURNAL_AMPLITUDE);
            if self.rng.random::<f64>() < keep {
                return Some(self.t);
            }
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
