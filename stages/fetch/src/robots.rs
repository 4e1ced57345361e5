//! robots.txt: what an answer for `/robots.txt` means (RFC 9309 and the common
//! convention), and a per-origin cache with a lifetime, so a host's rules cost one request
//! per `--robots-ttl-ms` rather than one per page.

use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use lru::LruCache;
use texting_robots::Robot;
use tokio::time::Instant;

use crate::clock::later;

/// Largest robots.txt read; RFC 9309 asks crawlers to parse at least 500 KiB and allows
/// ignoring the rest.
pub const MAX_ROBOTS_BYTES: u64 = 500 * 1024;

/// Longest Crawl-delay honoured: a longer one would park the host for good, and one
/// near `u64::MAX` seconds cannot even be added to a clock reading.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(86_400);

/// The rules of one origin.
#[derive(Debug)]
pub enum RobotsRules {
    /// No robots.txt (a 4xx answer other than 429), or one without rules for us.
    AllowAll,
    /// robots.txt could not be read because the server failed (5xx or 429): the site
    /// is treated as disallowed until the entry expires.
    DisallowAll { reason: String },
    /// Parsed rules for our user-agent token, and about the memory they take.
    Parsed { robot: Box<Robot>, bytes: usize },
}

/// Rules ending in `$` compiled per robots.txt: the parser compiles each into a regex
/// (13 to 30 KB each, measured), where other rules are prefix and substring checks, so a
/// 500 KiB file of them held 260 MB and took 0.8 s to parse. Past these, rules are made
/// `stricter`: never more than the file says.
pub const MAX_END_ANCHORED_RULES: usize = 200;

/// Rules taking more than this are checked off the async threads; an ordinary file takes
/// a few KiB (the thread handoff costs more than checking it).
const RULES_CHECKED_OFF_THREAD_BYTES: usize = 64 << 10;

/// What one compiled `$` rule is counted as in the cache's budget.
const END_ANCHORED_RULE_BYTES: usize = 32 << 10;

/// What the parser holds per rule and per sitemap line besides their text, counted in the
/// cache's budget: a rule's entry takes 80 bytes, a sitemap's 24, in vectors up to twice
/// as long as they are full (tests/robots_memory.rs measures them).
const RULE_BYTES: usize = 192;
const SITEMAP_BYTES: usize = 64;

/// What the cache counts for an entry besides its rules: the origin, the entry, the `Arc`.
const ENTRY_BYTES: usize = 256;

impl RobotsRules {
    /// The rules an answer for `/robots.txt` stands for, and whether it was a server
    /// failure (cached for the shorter error lifetime). `status` is the final one after
    /// redirects.
    pub fn from_answer(status: u16, body: &[u8], agent: &str) -> (Self, bool) {
        match status {
            200..=299 => (Self::parsed(agent, body), false),
            429 | 500..=599 => (Self::DisallowAll { reason: format!("robots.txt answered {status}") }, true),
            // 4xx: the site has no robots.txt. Anything else that gets here (a redirect
            // chain past the limit, 1xx) leaves no rules to follow either.
            _ => (Self::AllowAll, false),
        }
    }

    /// The rules of a robots.txt for `agent`. The parser refuses a whole file for one rule
    /// it cannot compile (a pattern past its regex engine's size limit, always one ending
    /// in `$`): such rules are made [`stricter`] and the file parsed again. A file it
    /// still refuses has no rules that could apply, as an empty one.
    fn parsed(agent: &str, body: &[u8]) -> Self {
        let (body, anchored) = bound_end_anchored(body);
        let robot =
            Robot::new(agent, &body).or_else(|_| Robot::new(agent, &with_stricter(&body, is_refused_rule)));
        robot.map_or(Self::AllowAll, |robot| Self::Parsed {
            robot: Box::new(robot),
            bytes: held_bytes(&body, anchored),
        })
    }

    /// About the memory these rules take, for the cache's budget.
    pub fn bytes(&self) -> usize {
        match self {
            Self::AllowAll => 0,
            Self::DisallowAll { reason } => reason.len(),
            Self::Parsed { bytes, .. } => *bytes,
        }
    }

    /// Whether `url` (of this origin) may be fetched.
    pub fn allows(&self, url: &str) -> bool {
        match self {
            Self::AllowAll => true,
            Self::DisallowAll { .. } => false,
            Self::Parsed { robot, .. } => robot.allowed(url),
        }
    }

    /// [`Self::allows`], off the async threads when the rules are large: a check costs
    /// about the URL's length per rule (7 ms for an 8 KiB URL against a 500 KiB file of
    /// wildcard rules), and a host's denied picks are checked back to back, which would
    /// hold a worker thread other hosts' requests wait on. A check that panics denies.
    pub async fn allows_without_blocking(self: &Arc<Self>, url: &str) -> bool {
        if self.bytes() < RULES_CHECKED_OFF_THREAD_BYTES {
            return self.allows(url);
        }
        let (rules, url) = (Arc::clone(self), url.to_owned());
        tokio::task::spawn_blocking(move || rules.allows(&url)).await.unwrap_or(false)
    }

    /// The Crawl-delay for our user-agent, at most [`MAX_CRAWL_DELAY`], which is also what
    /// an infinite one asks for (a value past f32's range reads as one); a negative or NaN
    /// one is no delay at all.
    pub fn crawl_delay(&self) -> Option<Duration> {
        let Self::Parsed { robot, .. } = self else { return None };
        let seconds = robot.delay.filter(|seconds| *seconds >= 0.0)?;
        Duration::try_from_secs_f32(seconds.min(MAX_CRAWL_DELAY.as_secs_f32())).ok()
    }

    /// The sitemap URLs the file names, as written.
    pub fn sitemaps(&self) -> &[String] {
        match self {
            Self::Parsed { robot, .. } => &robot.sitemaps,
            _ => &[],
        }
    }

    /// Why `url` is denied, for the result's `error`.
    pub fn denial(&self) -> String {
        match self {
            Self::DisallowAll { reason } => format!("{reason}; the site is treated as disallowed for now"),
            _ => "disallowed by robots.txt".to_owned(),
        }
    }
}

/// The lines of a robots.txt, each with the end that follows it: as the parser reads
/// them, a line ends at `\n`, `\r` or NUL.
fn lines(body: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    body.split_inclusive(|&byte| matches!(byte, b'\n' | b'\r' | 0)).map(|segment| {
        match segment.split_last() {
            Some((b'\n' | b'\r' | 0, line)) => (line, &segment[line.len()..]),
            _ => (segment, &segment[segment.len()..]),
        }
    })
}

/// About the memory the parser's rules for `body` hold, `anchored` of them compiled: each
/// rule's pattern percent-encoded as the parser does (a control, space, `"<>` or backtick,
/// or a byte past ASCII, takes three), twice for a wildcard rule (kept as written and as
/// matched), and sitemap URLs as they are; [`RULE_BYTES`] or [`SITEMAP_BYTES`] besides.
fn held_bytes(body: &[u8], anchored: usize) -> usize {
    let encoded = |value: &[u8]| {
        value
            .iter()
            .map(|&byte| if !(0x21..0x7f).contains(&byte) || b"\"<>`".contains(&byte) { 3 } else { 1 })
            .fold(0usize, usize::saturating_add)
    };
    let per_line = |line: &[u8]| match field_of(line) {
        Some((Field::Allow | Field::Disallow, pattern)) => {
            let copies = if pattern.contains(&b'*') { 2 } else { 1 };
            encoded(pattern).saturating_mul(copies).saturating_add(RULE_BYTES)
        }
        Some((Field::Sitemap, url)) => url.len().saturating_add(SITEMAP_BYTES),
        None => 0,
    };
    lines(body)
        .map(|(line, _)| per_line(line))
        .fold(anchored.saturating_mul(END_ANCHORED_RULE_BYTES), usize::saturating_add)
}

/// A rule made one that permits no more than it, and compiles to no regex: a Disallow's
/// `$` becomes `*` (it then covers more, and keeps its length, by which matching rules
/// rank), an Allow becomes an empty one, which allows nothing (kept rather than dropped:
/// the parser ends a group of user-agents only at a rule, so dropping the group's one
/// rule would join it to the next group).
fn stricter(line: &[u8]) -> Cow<'_, [u8]> {
    match field_of(line) {
        Some((Field::Disallow, _)) => {
            Cow::Owned(line.iter().map(|&byte| if byte == b'$' { b'*' } else { byte }).collect())
        }
        Some((Field::Allow, _)) => Cow::Borrowed(b"Allow:"),
        _ => Cow::Borrowed(line),
    }
}

/// Whether `line` is an Allow or Disallow rule ending in `$`, which the parser compiles
/// into a regex.
fn is_end_anchored(line: &[u8]) -> bool {
    matches!(field_of(line), Some((Field::Allow | Field::Disallow, pattern)) if pattern.contains(&b'$'))
}

/// `body` with the `Allow` and `Disallow` rules ending in `$` past the first
/// [`MAX_END_ANCHORED_RULES`] made [`stricter`], and how many it keeps.
fn bound_end_anchored(body: &[u8]) -> (Cow<'_, [u8]>, usize) {
    let total = lines(body).filter(|(line, _)| is_end_anchored(line)).count();
    if total <= MAX_END_ANCHORED_RULES {
        return (Cow::Borrowed(body), total);
    }
    let mut seen = 0usize;
    let bounded = with_stricter(body, |line| {
        let anchored = is_end_anchored(line);
        seen = seen.saturating_add(usize::from(anchored));
        anchored && seen > MAX_END_ANCHORED_RULES
    });
    (Cow::Owned(bounded), MAX_END_ANCHORED_RULES)
}

/// `body` with the lines `strict` picks made [`stricter`], line ends kept.
fn with_stricter(body: &[u8], mut strict: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let mut rewritten = Vec::with_capacity(body.len());
    for (line, end) in lines(body) {
        if strict(line) {
            rewritten.extend_from_slice(&stricter(line));
        } else {
            rewritten.extend_from_slice(line);
        }
        rewritten.extend_from_slice(end);
    }
    rewritten
}

#[derive(Clone, Copy)]
enum Field {
    Allow,
    Disallow,
    Sitemap,
}

/// The field of `line` and its value up to any comment, as the parser reads them: a name,
/// case-insensitive, after spaces or tabs, then a colon or a space. The parser takes these
/// misspellings of Disallow and spellings of Sitemap too.
fn field_of(line: &[u8]) -> Option<(Field, &[u8])> {
    const NAMES: [(&[u8], Field); 10] = [
        (b"allow", Field::Allow),
        (b"disallow", Field::Disallow),
        (b"dissallow", Field::Disallow),
        (b"dissalow", Field::Disallow),
        (b"disalow", Field::Disallow),
        (b"diasllow", Field::Disallow),
        (b"disallaw", Field::Disallow),
        (b"sitemap", Field::Sitemap),
        (b"site-map", Field::Sitemap),
        (b"site map", Field::Sitemap),
    ];
    let blank = |byte: &u8| matches!(byte, b' ' | b'\t');
    let text = line.get(line.iter().position(|byte| !blank(byte))?..)?;
    NAMES.iter().find_map(|&(name, field)| {
        let (start, rest) = text.split_at_checked(name.len())?;
        if !start.eq_ignore_ascii_case(name) {
            return None;
        }
        let spaced = rest.get(rest.iter().position(|byte| !blank(byte)).unwrap_or(rest.len())..)?;
        let value = match spaced.strip_prefix(b":") {
            Some(value) => value,
            None if spaced.len() < rest.len() => spaced,
            None => return None,
        };
        let value = value.split(|&byte| byte == b'#').next().unwrap_or_default();
        Some((field, value.trim_ascii()))
    })
}

/// Whether `line` is an Allow or Disallow rule the parser refuses on its own. Only rules
/// with a `$` are compiled into regexes, and a file keeps at most
/// [`MAX_END_ANCHORED_RULES`] of them, so at most that many are tried alone.
fn is_refused_rule(line: &[u8]) -> bool {
    is_end_anchored(line) && Robot::new("*", &[&b"User-agent: *\n"[..], line].concat()).is_err()
}

/// The complete lines of a robots.txt cut at [`MAX_ROBOTS_BYTES`]: half a rule can mean
/// another rule (`Disallow: /private` cut to `Disallow: /`). Lines end as in `lines`.
pub fn whole_lines(cut: &[u8]) -> &[u8] {
    cut.iter().rposition(|&byte| matches!(byte, b'\n' | b'\r' | 0)).map_or(&[], |last| cut.split_at(last).0)
}

/// The product token robots.txt groups are matched against: the User-Agent up to its
/// first `/` or space ("recrawl/0.1 (+https://…)" → "recrawl").
pub fn agent_token(user_agent: &str) -> &str {
    let token = user_agent.split(['/', ' ']).next().unwrap_or_default();
    if token.is_empty() {
        "*"
    } else {
        token
    }
}

/// How long robots.txt answers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobotsLifetimes {
    /// A fetched file, or the absence of one (4xx).
    pub ttl: Duration,
    /// A server failure (5xx, 429), after which the site counts as disallowed.
    pub error_ttl: Duration,
}

#[derive(Debug)]
struct Entry {
    rules: Arc<RobotsRules>,
    expires: Instant,
    /// What the entry counts in the cache's byte budget.
    bytes: usize,
}

/// robots.txt rules by origin (`scheme://host:port`), each kept until it expires; at most
/// `capacity` origins and about `budget_bytes` of rules, the least recently used dropped
/// first. Insert and lookup are O(1): a crawl over millions of hosts keeps the cache full,
/// and the scan for the entry to drop it replaced cost O(capacity) per insert. An expired
/// entry is dropped when looked up.
#[derive(Debug)]
pub struct RobotsCache {
    entries: LruCache<String, Entry>,
    lifetimes: RobotsLifetimes,
    budget_bytes: usize,
    bytes: usize,
}

impl RobotsCache {
    pub fn new(lifetimes: RobotsLifetimes, capacity: usize, budget_bytes: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self { entries: LruCache::new(capacity), lifetimes, budget_bytes, bytes: 0 }
    }

    /// The live rules of `origin`, if any; a lookup counts as a use.
    pub fn get(&mut self, origin: &str, now: Instant) -> Option<Arc<RobotsRules>> {
        match self.entries.get(origin) {
            Some(entry) if entry.expires > now => Some(entry.rules.clone()),
            Some(_) => {
                if let Some(entry) = self.entries.pop(origin) {
                    self.bytes = self.bytes.saturating_sub(entry.bytes);
                }
                None
            }
            None => None,
        }
    }

    /// Keeps `rules` for `origin`; `server_failure` picks the shorter lifetime.
    pub fn insert(
        &mut self,
        origin: &str,
        rules: RobotsRules,
        server_failure: bool,
        now: Instant,
    ) -> Arc<RobotsRules> {
        let lifetime = if server_failure { self.lifetimes.error_ttl } else { self.lifetimes.ttl };
        let bytes = rules.bytes().saturating_add(origin.len()).saturating_add(ENTRY_BYTES);
        let rules = Arc::new(rules);
        let entry = Entry { rules: rules.clone(), expires: later(now, lifetime), bytes };
        // The entry it replaced, or the least recently used one when the cache was full.
        if let Some((_, gone)) = self.entries.push(origin.to_owned(), entry) {
            self.bytes = self.bytes.saturating_sub(gone.bytes);
        }
        self.bytes = self.bytes.saturating_add(bytes);
        while self.bytes > self.budget_bytes && self.entries.len() > 1 {
            let Some((_, gone)) = self.entries.pop_lru() else { break };
            self.bytes = self.bytes.saturating_sub(gone.bytes);
        }
        rules
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// What the entries count in the byte budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROBOTS: &[u8] = b"User-agent: otherbot\nDisallow: /\n\nUser-agent: recrawl\nDisallow: /private/\nAllow: /private/open.html\nCrawl-delay: 1.5\n\nUser-agent: *\nDisallow: /everyone-else/\n";

    #[test]
    fn our_group_applies_with_its_crawl_delay() {
        let (rules, failure) = RobotsRules::from_answer(200, ROBOTS, "recrawl");
        assert!(!failure);
        assert!(rules.allows("http://h/index.html"));
        assert!(!rules.allows("http://h/private/secret.html"));
        assert!(rules.allows("http://h/private/open.html"), "the longer allow wins");
        assert!(rules.allows("http://h/everyone-else/x.html"), "the * group is not ours");
        assert_eq!(rules.crawl_delay(), Some(Duration::from_millis(1500)));
        let (others, _) = RobotsRules::from_answer(200, ROBOTS, "somebot");
        assert!(!others.allows("http://h/everyone-else/x.html"));
        assert_eq!(others.crawl_delay(), None);
    }

    /// A rule the parser refuses on its own (a pattern too large for its regex engine)
    /// is made stricter, and the others still apply.
    #[test]
    fn a_rule_the_parser_refuses_leaves_the_others_in_force() {
        let huge = format!("/{}$", "a*b".repeat(20_000));
        let file = format!("User-agent: *\nDisallow: /private/\nDisallow: {huge}\nAllow: /private/open\n");
        assert!(Robot::new("recrawl", file.as_bytes()).is_err(), "the parser refuses the file as a whole");
        let (rules, failure) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!failure);
        assert!(!rules.allows("http://h/private/secret.html"));
        assert!(rules.allows("http://h/private/open.html"));
        assert!(rules.allows("http://h/public.html"));
        // A short one too (102 bytes): each `*` before a `$` compiles to a costly `.*`.
        let short = format!("/{}$", "*a".repeat(50));
        let file = format!("User-agent: *\nDisallow: /private/\nDisallow: {short}\n");
        assert!(Robot::new("recrawl", file.as_bytes()).is_err());
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!rules.allows("http://h/private/secret.html"));
        // The refused rule itself stays in force, as a substring rule.
        assert!(!rules.allows(&format!("http://h/{}", "a".repeat(60))));
        let file = format!("User-agent: *\nDisallow: /private{short}\nAllow: /private/\n");
        assert!(Robot::new("recrawl", file.as_bytes()).is_err());
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!rules.allows(&format!("http://h/private/{}", "a".repeat(60))), "the longer rule wins");
        assert!(rules.allows("http://h/private/b"));
        // A refused Allow allows nothing, and still ends its group.
        let file = format!(
            "User-agent: recrawl\nDisallow: /private/\n\nUser-agent: recrawl\nAllow: {short}\n\n\
             User-agent: otherbot\nAllow: /private/\n"
        );
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!rules.allows(&format!("http://h/private/{}", "a".repeat(60))));
    }

    #[test]
    fn crawl_delay_is_not_negative_and_at_most_a_day_however_large() {
        let cases = [
            ("0", Some(Duration::ZERO)),
            ("1.5", Some(Duration::from_millis(1500))),
            ("-1", None),
            ("NaN", None),
            ("inf", Some(MAX_CRAWL_DELAY)),
            ("1e39", Some(MAX_CRAWL_DELAY)),
            ("-inf", None),
            ("1e6", Some(MAX_CRAWL_DELAY)),
            ("1e19", Some(MAX_CRAWL_DELAY)),
            ("10000000000000000000", Some(MAX_CRAWL_DELAY)),
        ];
        for (value, expected) in cases {
            let file = format!("User-agent: *\nCrawl-delay: {value}\nDisallow: /x\n");
            let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
            assert!(matches!(rules, RobotsRules::Parsed { .. }), "{value}");
            assert_eq!(rules.crawl_delay(), expected, "Crawl-delay: {value}");
        }
    }

    #[test]
    fn missing_files_allow_and_server_failures_disallow() {
        for status in [401, 403, 404, 410] {
            let (rules, failure) = RobotsRules::from_answer(status, b"Disallow: /", "recrawl");
            assert!(rules.allows("http://h/x.html") && !failure, "{status}");
        }
        for status in [429, 500, 503] {
            let (rules, failure) = RobotsRules::from_answer(status, b"", "recrawl");
            assert!(!rules.allows("http://h/x.html") && failure, "{status}");
            assert!(rules.denial().contains(&status.to_string()));
        }
    }

    #[test]
    fn agent_token_is_the_product_name() {
        assert_eq!(agent_token("recrawl/0.1 (+https://example.org/bot)"), "recrawl");
        assert_eq!(agent_token("MyBot"), "MyBot");
        assert_eq!(agent_token(""), "*");
    }

    #[test]
    fn entries_expire_and_failures_expire_sooner() {
        let lifetimes = RobotsLifetimes { ttl: Duration::from_secs(100), error_ttl: Duration::from_secs(10) };
        let mut cache = RobotsCache::new(lifetimes, 10, usize::MAX);
        let now = Instant::now();
        cache.insert("http://a", RobotsRules::AllowAll, false, now);
        cache.insert("http://b", RobotsRules::DisallowAll { reason: "503".into() }, true, now);
        let later = now + Duration::from_secs(50);
        assert!(cache.get("http://a", later).is_some());
        assert!(cache.get("http://b", later).is_none());
        assert!(cache.get("http://a", now + Duration::from_secs(100)).is_none());
    }

    #[test]
    fn a_full_cache_drops_the_least_recently_used() {
        let lifetimes = RobotsLifetimes { ttl: Duration::from_secs(100), error_ttl: Duration::from_secs(10) };
        let mut cache = RobotsCache::new(lifetimes, 2, usize::MAX);
        let now = Instant::now();
        cache.insert("http://a", RobotsRules::AllowAll, false, now);
        cache.insert("http://b", RobotsRules::AllowAll, true, now);
        assert!(cache.get("http://a", now).is_some(), "a used after b");
        cache.insert("http://c", RobotsRules::AllowAll, false, now);
        assert_eq!(cache.len(), 2);
        assert!(cache.get("http://b", now).is_none());
        assert!(cache.get("http://a", now).is_some() && cache.get("http://c", now).is_some());
    }

    /// Past the first rules ending in `$`, a Disallow covers more and an Allow goes: the
    /// file never permits more than it says, and its compiled rules stay bounded.
    #[test]
    fn rules_ending_in_a_dollar_are_compiled_up_to_a_bound() {
        let mut file = String::from("User-agent: *\nDisallow: /shop/\n");
        for i in 0..MAX_END_ANCHORED_RULES + 50 {
            file.push_str(&format!("Disallow: /d{i}.html$\nAllow: /shop/a{i}.html$\n"));
        }
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        let (first, last) = (0, MAX_END_ANCHORED_RULES + 49);
        assert!(!rules.allows(&format!("http://h/d{first}.html")));
        assert!(rules.allows(&format!("http://h/d{first}.html?page=2")), "the first rules keep their $");
        assert!(!rules.allows(&format!("http://h/d{last}.html")));
        assert!(!rules.allows(&format!("http://h/d{last}.html?page=2")), "a later Disallow covers more");
        assert!(rules.allows("http://h/shop/a0.html"), "the first Allow rules hold");
        assert!(!rules.allows(&format!("http://h/shop/a{last}.html")), "a later Allow allows nothing");
        let rule_lines = 1 + 2 * (MAX_END_ANCHORED_RULES + 50);
        let compiled = rule_lines * RULE_BYTES + MAX_END_ANCHORED_RULES * END_ANCHORED_RULE_BYTES;
        assert!((compiled..=compiled + 2 * file.len()).contains(&rules.bytes()), "{}", rules.bytes());

        // An Allow past the bound still ends its group: the next group's rules are not ours.
        let rules = past_the_bound(
            "User-agent: recrawl\nDisallow: /private/\n\nUser-agent: recrawl\nAllow: /x$\n\n\
             User-agent: otherbot\nAllow: /private/\n",
        );
        assert!(!rules.allows("http://h/private/a"));

        // A Disallow past the bound keeps its length, so it still outranks an Allow of
        // the same path (a tie would go to the Allow).
        let mut file = String::from("User-agent: *\nAllow: /page\n");
        for i in 0..MAX_END_ANCHORED_RULES {
            file.push_str(&format!("Disallow: /d{i}$\n"));
        }
        file.push_str("Disallow: /page$\n");
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!rules.allows("http://h/page"));

        // Lines the parser reads as rules however they are spelled or ended count too.
        let mut file = String::from("User-agent: *\r");
        for i in 0..MAX_END_ANCHORED_RULES + 50 {
            file.push_str(&format!("DISALOW: /d{i}$\r"));
        }
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        assert!(!rules.allows("http://h/d0") && rules.allows("http://h/d0.html"));
        assert!(!rules.allows("http://h/d249.html"), "past the bound: a substring rule");
    }

    /// The rules of `groups` after as many `$` rules as a file keeps compiled.
    fn past_the_bound(groups: &str) -> RobotsRules {
        let mut file = String::from("User-agent: *\n");
        for i in 0..MAX_END_ANCHORED_RULES {
            file.push_str(&format!("Disallow: /d{i}$\n"));
        }
        file.push_str(groups);
        RobotsRules::from_answer(200, file.as_bytes(), "recrawl").0
    }

    /// Fields are read as the parser reads them: other lines that start like a rule do
    /// not count toward the `$` bound, are not rewritten and cannot join groups.
    #[test]
    fn lines_are_rules_only_where_the_parser_reads_rules() {
        for (line, rule) in [
            ("Allow: /x$", true),
            ("  dIsAlLoW\t:/x$", true),
            ("Disallow /x$", true),
            ("Allowances: see /terms$", false),
            ("\x0cAllow: /x$", false),
            ("Disallow: /x # ends in $", false),
        ] {
            assert_eq!(is_end_anchored(line.as_bytes()), rule, "{line:?}");
        }
        let rules = past_the_bound(
            "User-agent: recrawl\nAllowances: see /terms$\nUser-agent: otherbot\nDisallow: /private/\n",
        );
        assert!(!rules.allows("http://h/private/a"), "the parser's groups are unchanged");
    }

    /// A file cut at the size limit keeps its whole lines however they end: a file of
    /// `\r` lines cut at the last `\n` would be empty, so allow everything.
    #[test]
    fn a_cut_file_keeps_its_whole_lines_however_they_end() {
        for end in ["\n", "\r", "\0", "\r\n"] {
            let file = format!("User-agent: *{end}Disallow: /private{end}Disallow: /o");
            let (rules, _) = RobotsRules::from_answer(200, whole_lines(file.as_bytes()), "recrawl");
            assert!(!rules.allows("http://h/private/a"), "{end:?}");
            assert!(rules.allows("http://h/open"), "{end:?}: half a rule is dropped");
        }
        assert_eq!(whole_lines(b"Disallow: /"), b"", "no whole line");
    }

    /// Large rules are checked on a blocking thread, small ones in place (which of the two
    /// is not visible here): the verdicts are the parser's either way.
    #[tokio::test]
    async fn checks_without_blocking_give_the_parsers_verdicts_for_large_and_small_rules() {
        let wildcards: String = (0..10_000).map(|n| format!("Disallow: /*x{n}*y\n")).collect();
        let large = format!("User-agent: *\nAllow: /*x7*y/open\n{wildcards}");
        for (file, small) in [(large.as_bytes(), false), (ROBOTS, true)] {
            let rules = Arc::new(RobotsRules::from_answer(200, file, "recrawl").0);
            assert_eq!(rules.bytes() < RULES_CHECKED_OFF_THREAD_BYTES, small);
            for url in ["http://h/index.html", "http://h/qx7zy", "http://h/qx7zy/open", "http://h/private/a"]
            {
                assert_eq!(rules.allows_without_blocking(url).await, rules.allows(url), "{url}");
            }
        }
        let large = Arc::new(RobotsRules::from_answer(200, large.as_bytes(), "recrawl").0);
        assert!(!large.allows_without_blocking("http://h/qx9999zy").await);
        assert!(large.allows_without_blocking("http://h/qx7zy/open").await, "the longer allow wins");
    }

    #[test]
    fn the_cache_keeps_its_rules_within_the_byte_budget() {
        let lifetimes = RobotsLifetimes { ttl: Duration::from_secs(100), error_ttl: Duration::from_secs(10) };
        let file = "User-agent: *\nDisallow: /a$\nDisallow: /b$\n";
        let (one, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        let entry = one.bytes() + "http://h0".len() + ENTRY_BYTES;
        let mut cache = RobotsCache::new(lifetimes, 1000, 3 * entry);
        let now = Instant::now();
        for host in 0..5 {
            let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
            cache.insert(&format!("http://h{host}"), rules, false, now);
        }
        assert_eq!(cache.len(), 3, "three entries fit the budget");
        assert_eq!(cache.bytes(), 3 * entry);
        assert!(cache.get("http://h1", now).is_none() && cache.get("http://h2", now).is_some());
        let (rules, _) = RobotsRules::from_answer(200, file.as_bytes(), "recrawl");
        cache.insert("http://h2", rules, false, now);
        assert_eq!((cache.len(), cache.bytes()), (3, 3 * entry), "a replaced entry is not counted twice");
        assert!(cache.get("http://h2", now + Duration::from_secs(200)).is_none());
        assert_eq!(cache.bytes(), 2 * entry, "an expired entry leaves the budget");
    }

    #[test]
    fn an_expired_entry_is_not_served_and_leaves_the_cache() {
        let lifetimes = RobotsLifetimes { ttl: Duration::from_secs(100), error_ttl: Duration::from_secs(10) };
        let mut cache = RobotsCache::new(lifetimes, 100_000, usize::MAX);
        let now = Instant::now();
        for host in 0..100_000 {
            cache.insert(&format!("http://h{host}"), RobotsRules::AllowAll, host % 2 == 0, now);
        }
        assert_eq!(cache.len(), 100_000);
        cache.insert("http://newcomer", RobotsRules::AllowAll, false, now);
        assert_eq!(cache.len(), 100_000, "full: one dropped for the newcomer");
        assert!(cache.get("http://h0", now).is_none(), "the least recently used went");
        let later = now + Duration::from_secs(50);
        assert!(cache.get("http://h2", later).is_none(), "an error answer expires after 10 s");
        assert!(cache.get("http://h3", later).is_some(), "a file lives 100 s");
        assert_eq!(cache.len(), 100_000 - 1);
    }
}
