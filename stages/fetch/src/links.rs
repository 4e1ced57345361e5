//! Link extraction from fetched HTML: the discovery half of the crawl.
//!
//! The page is streamed through lol_html rather than parsed into a DOM, so memory stays flat
//! however large the body is, and malformed markup can only end extraction early, never panic.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::LazyLock;

use lol_html::html_content::Element;
use lol_html::{ElementContentHandlers, HtmlRewriter, Selector, Settings};
use recrawl_common::links::{LinkRules, Rejection};
use recrawl_schemas::url_key::normalise_parsed;
use recrawl_schemas::UrlError;
use url::Url;

use crate::http::MAX_URL_BYTES;
use recrawl_schemas::messages::bounds::MAX_HOST_BYTES;

/// Which links [`extract_links`] keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFilter {
    /// `docs/algorithms/in-degree-first.md` §2, shared with the scheduler's frontier.
    pub rules: LinkRules,
    /// At most this many distinct links per page.
    pub max_links: usize,
}

impl Default for LinkFilter {
    fn default() -> Self {
        Self { rules: LinkRules::default(), max_links: 1000 }
    }
}

/// One distinct link found on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedLink {
    /// The absolute, normalised URL (fragment dropped).
    pub url: String,
    /// How many times the page links to `url`.
    pub occurrences: u32,
}

/// What a page links to.
#[derive(Debug, Clone, Default)]
pub struct PageLinks {
    /// Links that pass the filter, in order of first occurrence.
    pub links: Vec<ExtractedLink>,
    /// Feeds the page names (`<link rel="alternate">` of an RSS or Atom type), in order,
    /// distinct, at most [`MAX_FEEDS`].
    pub feeds: Vec<Url>,
    /// `<frame src>` documents, in order, distinct, at most [`MAX_FRAMES`]: their links
    /// count as the page's own.
    pub frames: Vec<Url>,
    /// The rule each distinct rejected http(s) link failed.
    pub rejected: Vec<Rejection>,
    /// Whether extraction stopped at [`MAX_RESOLVED_BYTES`], before the end of the page.
    pub cut_short: bool,
    /// Distinct links dropped for being longer than [`MAX_URL_BYTES`] or naming a host
    /// longer than [`MAX_HOST_BYTES`] with its port (which no record may carry: a DNS name
    /// of 253 bytes and a port are past it): a rule of this stage's, not one of
    /// [`LinkRules`].
    pub too_long: u64,
    /// Position of each kept URL in `links`, by the URL's hash (as `sighted`), so the
    /// URLs' text is held once.
    kept: HashMap<u64, usize>,
    /// Hashes of the URLs rejected or too long: only whether one is new matters, and their
    /// text would let a page of short links resolved against a long URL hold gigabytes.
    /// The hasher's keys are random per page, so no server can aim collisions.
    sighted: HashSet<u64>,
    /// Hashes of `frames`, so a page of repeated frames costs no scans of them.
    framed: HashSet<u64>,
    hasher: RandomState,
}

/// URL text resolved per page, base and reference together: each link is parsed again
/// with its base, so a page of short links against a long URL costs its number times the
/// URL's length (0.5 GB/s here: 7 s for an 8 MiB page of them against an 8 KiB URL).
/// 64 MiB is over a hundred times what a page of 5,000 links of 100 bytes takes, and
/// about a tenth of a second.
pub const MAX_RESOLVED_BYTES: usize = 64 << 20;

/// Frames kept as documents per page; past it a frame is a plain link. Well above what
/// the stage fetches (`--max-frames`), so the cap only bounds a hostile page.
pub const MAX_FRAMES: usize = 64;
/// Feeds kept per page: a site has a few (all items, comments, a category or two).
pub const MAX_FEEDS: usize = 8;

impl PageLinks {
    /// Adds a frame document's links to its framing page's: new URLs after the page's
    /// own, repeats counted, up to `max_links` distinct links.
    pub fn merge(&mut self, frame: PageLinks, max_links: usize) {
        for link in frame.links {
            self.add(link.url, link.occurrences, max_links);
        }
        self.rejected.extend(frame.rejected);
        self.too_long = self.too_long.saturating_add(frame.too_long);
        self.cut_short |= frame.cut_short;
    }

    /// Adds the normalised `url` if `filter` admits it as a link at `depth`, else counts
    /// its rejection.
    pub fn record(&mut self, url: Url, filter: &LinkFilter, depth: u32) {
        // The host as records carry it (`host_of`): with the port, when there is one.
        // Only a port other than the scheme's default is kept, and written.
        let port_bytes = url.port().map_or(0, |port| format!(":{port}").len());
        let host_bytes = url.host_str().map_or(0, str::len).saturating_add(port_bytes);
        let verdict = filter.rules.check_parsed(&url, depth);
        let url = String::from(url);
        if url.len() > MAX_URL_BYTES || host_bytes > MAX_HOST_BYTES {
            if self.first_sighting(&url) {
                self.too_long = self.too_long.saturating_add(1);
            }
            return;
        }
        match verdict {
            Ok(()) => self.add(url, 1, filter.max_links),
            Err(rejection) => {
                if self.first_sighting(&url) {
                    self.rejected.push(rejection);
                }
            }
        }
    }

    /// Counts `url` as kept, or keeps it while fewer than `max_links` are; a URL past the
    /// cap is not remembered, as the cap never lets it in later.
    fn add(&mut self, url: String, occurrences: u32, max_links: usize) {
        let hash = self.hasher.hash_one(&url);
        if let Some(link) = self.kept.get(&hash).and_then(|&index| self.links.get_mut(index)) {
            link.occurrences = link.occurrences.saturating_add(occurrences);
        } else if self.links.len() < max_links {
            self.kept.insert(hash, self.links.len());
            self.links.push(ExtractedLink { url, occurrences });
        }
    }

    /// Lets go of what telling new URLs from seen ones takes (a hash per URL seen): a
    /// page's links wait for the whole batch to be published. Links added after this are
    /// not deduplicated.
    pub fn finish(&mut self) {
        self.kept = HashMap::new();
        self.sighted = HashSet::new();
        self.framed = HashSet::new();
    }

    /// About the memory these links hold, for the batch's budget.
    pub fn held_bytes(&self) -> usize {
        // A hash set's or map's entry with its control byte, at its fullest load.
        const HASHED_BYTES: usize = 2 * size_of::<(u64, usize)>();
        let links = self.links.iter().map(|link| link.url.len().saturating_add(size_of::<ExtractedLink>()));
        let frames = self.frames.iter().chain(&self.feeds);
        let frames = frames.map(|frame| frame.as_str().len().saturating_add(size_of::<Url>()));
        let rejected = self.rejected.len().saturating_mul(size_of::<Rejection>());
        let hashed = [self.kept.len(), self.sighted.len(), self.framed.len()]
            .into_iter()
            .fold(0usize, usize::saturating_add)
            .saturating_mul(HASHED_BYTES);
        links.chain(frames).fold(rejected.saturating_add(hashed), usize::saturating_add)
    }

    /// Whether `url` is seen here first.
    fn first_sighting(&mut self, url: &str) -> bool {
        self.sighted.insert(self.hasher.hash_one(url))
    }

    /// Keeps `url` as a frame document if it is new and there is room; a frame past
    /// [`MAX_FRAMES`] is a plain link.
    fn add_feed(&mut self, url: Url) {
        let fits = matches!(url.scheme(), "http" | "https") && url.as_str().len() <= MAX_URL_BYTES;
        if fits && self.feeds.len() < MAX_FEEDS && !self.feeds.contains(&url) {
            self.feeds.push(url);
        }
    }

    fn add_frame(&mut self, url: Url, filter: &LinkFilter, depth: u32) {
        let hash = self.hasher.hash_one(url.as_str());
        if self.framed.contains(&hash) {
            return;
        }
        if self.frames.len() < MAX_FRAMES {
            self.framed.insert(hash);
            self.frames.push(url);
        } else {
            self.record(url, filter, depth);
        }
    }
}

/// Whether a `Content-Type` is HTML; a missing one is taken as HTML.
pub fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|ct| {
        let ct = ct.trim_start().to_ascii_lowercase();
        ct.starts_with("text/html") || ct.starts_with("application/xhtml")
    })
}

/// The elements that hold links, parsed once rather than for each page (about 1.3 µs, 4 %
/// of a 10 KB page's extraction).
static LINK_ELEMENTS: LazyLock<Selector> = LazyLock::new(|| {
    "a[href], area[href], base[href], meta[http-equiv][content], frame[src], link[rel][href]"
        .parse()
        .unwrap_or_else(|error| unreachable!("the constant selector parses: {error}"))
});

/// Finds the links of an HTML page: `<a href>`, `<area href>` and
/// `<meta http-equiv="refresh">` targets, resolved against the page URL or the first
/// `<base href>` that precedes them and normalised, then checked against `filter.rules`
/// as links at `depth`; and the page's `<frame src>` documents.
///
/// Links come back in order of first occurrence, one entry per distinct URL. Once
/// `filter.max_links` distinct URLs are kept, new URLs are ignored but repeats of kept ones
/// are still counted. Markup the parser gives up on, or [`MAX_RESOLVED_BYTES`], ends
/// extraction with what was found so far.
pub fn extract_links(page_url: &Url, html: &[u8], filter: &LinkFilter, depth: u32) -> PageLinks {
    let mut collector = LinkCollector::new(page_url, filter, depth);
    let visit = ElementContentHandlers::default().element(|el: &mut Element<'_, '_>| {
        collector.visit(el);
        if collector.found.cut_short {
            return Err("the page's links took more than their limit of URL text to resolve".into());
        }
        Ok(())
    });
    let settings = Settings {
        element_content_handlers: vec![(Cow::Borrowed(&*LINK_ELEMENTS), visit)],
        // Strict mode aborts on markup a browser might parse differently; that protects
        // rewriters, but a reader loses nothing by guessing, so keep going.
        strict: false,
        // Attribute values are decoded as UTF-8 unless the page declares otherwise; a
        // Latin-1 page's "café" must not turn into a replacement character.
        adjust_charset_on_meta_tag: true,
        ..Settings::new()
    };
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    let parsed = rewriter.write(html).and_then(|()| rewriter.end());
    if let Err(error) = parsed {
        tracing::debug!(page = %page_url, %error, "link extraction stopped early");
    }
    collector.found
}

/// The offline `links` command: the links the stage would publish for `html` fetched
/// from `base` (a seed, so links at depth 1), as a JSON array of URLs.
pub fn links_json(base: &Url, html: &[u8], filter: &LinkFilter) -> String {
    let found = extract_links(base, html, filter, 1);
    let urls: Vec<&str> = found.links.iter().map(|link| link.url.as_str()).collect();
    let mut json = serde_json::to_string_pretty(&urls).unwrap_or_else(|_| "[]".to_owned());
    json.push('\n');
    json
}

/// `<link rel="alternate" type="application/rss+xml">` or Atom's type: a feed of the page's
/// site. Other `<link>`s (style sheets, icons, canonical) are no pages to crawl.
fn is_feed_link(element: &Element<'_, '_>) -> bool {
    let alternate = element
        .get_attribute("rel")
        .is_some_and(|rel| rel.split_ascii_whitespace().any(|token| token.eq_ignore_ascii_case("alternate")));
    let feed_type = element.get_attribute("type").is_some_and(|kind| {
        let essence = kind.split(';').next().unwrap_or_default().trim();
        ["application/rss+xml", "application/atom+xml"].iter().any(|feed| essence.eq_ignore_ascii_case(feed))
    });
    alternate && feed_type
}

/// Accumulates links while lol_html walks the page.
struct LinkCollector<'a> {
    filter: &'a LinkFilter,
    depth: u32,
    base: Url,
    /// Only the first `<base href>` counts, as in browsers.
    base_seen: bool,
    /// URL text resolved so far, against [`MAX_RESOLVED_BYTES`].
    resolved_bytes: usize,
    found: PageLinks,
}

impl<'a> LinkCollector<'a> {
    fn new(page_url: &Url, filter: &'a LinkFilter, depth: u32) -> Self {
        Self {
            filter,
            depth,
            base: page_url.clone(),
            base_seen: false,
            resolved_bytes: 0,
            found: PageLinks::default(),
        }
    }

    fn visit(&mut self, element: &Element<'_, '_>) {
        match element.tag_name().as_str() {
            "a" | "area" => {
                if let Some(href) = element.get_attribute("href") {
                    self.record(&decode_character_references(&href));
                }
            }
            "base" => self.set_base(element),
            // A page's feed: announced, and read as announcements of the site's pages once
            // fetched. Not a link: feeds are no pages, and their paths end in anything.
            "link" if is_feed_link(element) => {
                if let Some(href) = element.get_attribute("href") {
                    if let Some(url) = self.resolve(&decode_character_references(&href)) {
                        self.found.add_feed(url);
                    }
                }
            }
            "meta" if is_refresh(element) => {
                if let Some(content) = element.get_attribute("content") {
                    if let Some(target) = refresh_target(&decode_character_references(&content)) {
                        self.record(target);
                    }
                }
            }
            "frame" => {
                if let Some(src) = element.get_attribute("src") {
                    if let Some(url) = self.resolve(&decode_character_references(&src)) {
                        self.found.add_frame(url, self.filter, self.depth);
                    }
                }
            }
            _ => {}
        }
    }

    fn set_base(&mut self, element: &Element<'_, '_>) {
        if self.base_seen {
            return;
        }
        self.base_seen = true;
        let Some(href) = element.get_attribute("href") else { return };
        // The base resolves against the page URL; an unusable one leaves the page URL in
        // force, as does one past the URL limit, which every link resolved against it
        // would copy and exceed.
        if let Ok(base) = self.base.join(&decode_character_references(&href)) {
            if base.as_str().len() <= MAX_URL_BYTES {
                self.base = base;
            }
        }
    }

    /// The normalised absolute http(s) URL `reference` stands for; `None` also once the
    /// page has resolved its limit of URL text.
    fn resolve(&mut self, reference: &str) -> Option<Url> {
        let cost = self.base.as_str().len().saturating_add(reference.len());
        self.resolved_bytes = self.resolved_bytes.saturating_add(cost);
        if self.resolved_bytes > MAX_RESOLVED_BYTES {
            self.found.cut_short = true;
            return None;
        }
        let mut url = self.base.join(reference).ok()?;
        match normalise_parsed(&mut url) {
            Ok(()) => Some(url),
            // Someone's secret: neither followed (it would be sent as `Authorization`)
            // nor published. Counted, but its text not kept.
            Err(UrlError::Credentials) => {
                if self.found.first_sighting(url.as_str()) {
                    self.found.rejected.push(Rejection::Credentials);
                }
                None
            }
            Err(_) => None,
        }
    }

    fn record(&mut self, reference: &str) {
        if let Some(url) = self.resolve(reference) {
            self.found.record(url, self.filter, self.depth);
        }
    }
}

fn is_refresh(meta: &Element<'_, '_>) -> bool {
    meta.get_attribute("http-equiv").is_some_and(|value| value.eq_ignore_ascii_case("refresh"))
}

/// The URL in a refresh `content` value such as `5; url='next.html'`, parsed the way HTML's
/// declarative refresh does; `None` when the value only reloads the page or is malformed.
fn refresh_target(content: &str) -> Option<&str> {
    let after_space = content.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let rest = after_space.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    if rest.len() == after_space.len() {
        return None;
    }
    let separated = rest.is_empty()
        || rest.starts_with([';', ','])
        || rest.starts_with(|c: char| c.is_ascii_whitespace());
    if !separated {
        return None;
    }
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let rest = rest.strip_prefix([';', ',']).unwrap_or(rest);
    let rest = strip_url_label(rest.trim_start_matches(|c: char| c.is_ascii_whitespace()));
    let target = match rest.strip_prefix(['\'', '"']) {
        Some(quoted) => {
            let quote = &rest[..1];
            quoted.split_once(quote).map_or(quoted, |(inside, _)| inside)
        }
        None => rest,
    };
    (!target.is_empty()).then_some(target)
}

/// Drops a leading `url =` (any case, optional spaces); the label is optional in HTML.
fn strip_url_label(value: &str) -> &str {
    let labelled = value.get(..3).is_some_and(|label| label.eq_ignore_ascii_case("url"));
    if !labelled {
        return value;
    }
    let after_label = value[3..].trim_start_matches(|c: char| c.is_ascii_whitespace());
    match after_label.strip_prefix('=') {
        Some(target) => target.trim_start_matches(|c: char| c.is_ascii_whitespace()),
        None => value,
    }
}

/// Decodes character references in an attribute value as a browser does: lol_html hands
/// values over raw, `&amp;` between query parameters is how valid HTML writes `&`, and
/// pages use every reference of HTML's table. htmlize follows the standard's attribute
/// rules: a legacy name without `;` followed by `=` or an alphanumeric stays as written
/// (`?a=1&copy=2`), numeric references 0x80–0x9F map through Windows-1252, NUL,
/// surrogates and out-of-range numbers become U+FFFD.
fn decode_character_references(raw: &str) -> Cow<'_, str> {
    htmlize::unescape_attribute(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl_schemas::PageRef;

    fn page() -> Url {
        Url::parse("http://example.com/dir/page.html").unwrap()
    }

    fn urls(links: &[ExtractedLink]) -> Vec<&str> {
        links.iter().map(|link| link.url.as_str()).collect()
    }

    fn extract(html: &str) -> Vec<ExtractedLink> {
        extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1).links
    }

    #[test]
    fn resolves_relative_absolute_parent_and_fragment_links() {
        let links = extract(
            r##"<p><a href="other.html">o</a> <a href="/root">r</a>
            <a href="HTTPS://Example.ORG:443/x#frag">abs</a> <a href="../up.html">up</a>
            <a href="#top">self</a> <a href="//cdn.example.net/lib">scheme-relative</a>"##,
        );
        assert_eq!(
            urls(&links),
            [
                "http://example.com/dir/other.html",
                "http://example.com/root",
                "https://example.org/x",
                "http://example.com/up.html",
                "http://example.com/dir/page.html",
                "http://cdn.example.net/lib",
            ]
        );
    }

    #[test]
    fn a_page_s_feeds_are_links_and_its_other_link_elements_are_not() {
        let found = extract_links(
            &page(),
            br#"<head><link rel="stylesheet" href="/style.css"><link rel="canonical" href="/c">
            <link rel="alternate" type="application/rss+xml" href="/feed.rss">
            <LINK REL="Alternate home" TYPE="Application/Atom+XML; charset=utf-8" HREF="atom.xml">
            <link rel="alternate" hreflang="fr" href="/fr/"><link rel="alternate" type="text/html" href="/m">
            <link rel="alternate" type="application/rss+xml" href="/feed.rss">"#,
            &LinkFilter::default(),
            1,
        );
        let feeds: Vec<&str> = found.feeds.iter().map(Url::as_str).collect();
        assert_eq!(feeds, ["http://example.com/feed.rss", "http://example.com/dir/atom.xml"]);
        assert!(found.links.is_empty(), "{:?}", found.links);
    }

    #[test]
    fn area_links_and_upper_case_markup_are_read() {
        let links = extract(r#"<MAP><AREA HREF="/map-target"></MAP><A HREF="/upper">u</A>"#);
        assert_eq!(urls(&links), ["http://example.com/map-target", "http://example.com/upper"]);
    }

    #[test]
    fn first_base_href_changes_resolution_of_later_links() {
        let links = extract(
            r#"<a href="before.html">b</a>
            <base href="http://other.example/sub/"><base href="http://ignored.example/">
            <a href="after.html">a</a><a href="/rooted">r</a>"#,
        );
        assert_eq!(
            urls(&links),
            [
                "http://example.com/dir/before.html",
                "http://other.example/sub/after.html",
                "http://other.example/rooted",
            ]
        );
    }

    #[test]
    fn relative_base_href_resolves_against_the_page() {
        let links = extract(r#"<base href="/other/"><a href="x.html">x</a>"#);
        assert_eq!(urls(&links), ["http://example.com/other/x.html"]);
    }

    #[test]
    fn meta_refresh_targets_are_links() {
        let links = extract(
            r#"<meta http-equiv="Refresh" content="5; URL='/quoted.html'">
            <meta http-equiv="refresh" content="0;url=plain.html">
            <meta http-equiv="REFRESH" content="3, Url = &quot;/spaced&quot;">
            <meta http-equiv="refresh" content="1; /unlabelled">
            <meta http-equiv="refresh" content="30">
            <meta http-equiv="content-type" content="0; url=/not-a-refresh">
            <meta name="refresh" content="0; url=/no-http-equiv">
            <meta http-equiv="refresh" content="soon; url=/no-delay">"#,
        );
        assert_eq!(
            urls(&links),
            [
                "http://example.com/quoted.html",
                "http://example.com/dir/plain.html",
                "http://example.com/spaced",
                "http://example.com/unlabelled",
            ]
        );
    }

    #[test]
    fn repeats_are_counted_in_order_of_first_occurrence() {
        let links = extract(
            r##"<a href="/b">1</a><a href="/a">2</a><a href="/b#x">3</a>
            <a href="http://example.com/b">4</a><a href="/a">5</a><a href="/c">6</a>"##,
        );
        let counted: Vec<(&str, u32)> =
            links.iter().map(|link| (link.url.as_str(), link.occurrences)).collect();
        assert_eq!(
            counted,
            [("http://example.com/b", 3), ("http://example.com/a", 2), ("http://example.com/c", 1)]
        );
    }

    #[test]
    fn frames_are_documents_not_links() {
        let found = extract_links(
            &page(),
            br#"<frameset><frame src="menu.html"><frame src="/main.html#top"><frame src="menu.html">
            <frame src="javascript:void(0)"></frameset><a href="x.html">x</a>"#,
            &LinkFilter::default(),
            1,
        );
        assert_eq!(urls(&found.links), ["http://example.com/dir/x.html"]);
        let frames: Vec<&str> = found.frames.iter().map(Url::as_str).collect();
        assert_eq!(frames, ["http://example.com/dir/menu.html", "http://example.com/main.html"]);
    }

    #[test]
    fn links_and_frames_with_credentials_are_dropped_and_counted() {
        let found = extract_links(
            &page(),
            br#"<a href="http://user:SECRETPW@example.com/a.html">1</a>
            <a href="http://user:SECRETPW@example.com/a.html">again</a>
            <a href="//me@example.com/b.html">2</a><a href="c.html">3</a>
            <frameset><frame src="http://u:p@example.com/menu.html"></frameset>"#,
            &LinkFilter::default(),
            1,
        );
        assert_eq!(urls(&found.links), ["http://example.com/dir/c.html"]);
        assert!(found.frames.is_empty(), "a frame with credentials is not fetched");
        assert_eq!(found.rejected, [Rejection::Credentials; 3]);
    }

    #[test]
    fn the_papers_rules_apply_to_each_distinct_link() {
        let found = extract_links(
            &page(),
            br#"<a href="a.htm">1</a><a href="b.asp">2</a><a href="c.jsp">3</a><a href="d.cfm">4</a>
            <a href="e.php">5</a><a href="sub/">6</a><a href="photo.jpg">7</a><a href="photo.jpg">7 again</a>
            <a href="/cgi-bin/run">8</a><a href="run.cgi">9</a><a href="doc.pdf">10</a>
            <a href="ftp://example.com/f.html">11</a><a href="page.html#section">12</a>
            <a href="../../up.html">13</a>"#,
            &LinkFilter::default(),
            1,
        );
        assert_eq!(
            urls(&found.links),
            [
                "http://example.com/dir/a.htm",
                "http://example.com/dir/b.asp",
                "http://example.com/dir/c.jsp",
                "http://example.com/dir/d.cfm",
                "http://example.com/dir/e.php",
                "http://example.com/dir/sub/",
                "http://example.com/dir/page.html",
                "http://example.com/up.html",
            ]
        );
        assert_eq!(
            found.rejected,
            [Rejection::Extension, Rejection::Cgi, Rejection::Cgi, Rejection::Extension],
            "each distinct rejected URL once; ftp is not a link at all"
        );
        let too_deep = extract_links(&page(), br#"<a href="a.html">a</a>"#, &LinkFilter::default(), 10);
        assert!(too_deep.links.is_empty());
        assert_eq!(too_deep.rejected, [Rejection::Depth]);
    }

    #[test]
    fn a_frames_links_merge_into_the_framing_pages() {
        let filter = LinkFilter { max_links: 3, ..LinkFilter::default() };
        let mut page_links = extract_links(&page(), br#"<a href="/a">a</a><a href="/b">b</a>"#, &filter, 1);
        let frame =
            extract_links(&page(), br#"<a href="/b">b</a><a href="/c">c</a><a href="/d">d</a>"#, &filter, 1);
        page_links.merge(frame, filter.max_links);
        let counted: Vec<(&str, u32)> =
            page_links.links.iter().map(|l| (l.url.as_str(), l.occurrences)).collect();
        assert_eq!(
            counted,
            [("http://example.com/a", 1), ("http://example.com/b", 2), ("http://example.com/c", 1)]
        );
    }

    #[test]
    fn the_offline_command_prints_the_published_links_as_json() {
        let json = links_json(
            &page(),
            br#"<base href="http://example.com/base/"><a href="x.html#f">x</a><a href="x.html">x</a>
            <a href="y.gif">y</a><meta http-equiv="refresh" content="0;URL='z.php'">"#,
            &LinkFilter::default(),
        );
        let parsed: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed, ["http://example.com/base/x.html", "http://example.com/base/z.php"]);
    }

    #[test]
    fn links_past_the_url_limit_are_dropped_and_counted() {
        let long = "l".repeat(MAX_URL_BYTES);
        let html = format!(r#"<a href="/{long}">1</a><a href="/{long}">2</a><a href="/ok">3</a>"#);
        let found = extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1);
        assert_eq!(urls(&found.links), ["http://example.com/ok"]);
        assert_eq!(found.too_long, 1, "each distinct URL once");
        assert!(found.rejected.is_empty());
    }

    #[test]
    fn hosts_past_the_dns_limit_are_dropped_and_counted() {
        let long_host = format!("{}test", format!("{}.", "a".repeat(60)).repeat(5));
        let html = format!(r#"<a href="http://{long_host}/x.html">1</a><a href="/ok">2</a>"#);
        let found = extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1);
        assert_eq!(urls(&found.links), ["http://example.com/ok"]);
        assert_eq!(found.too_long, 1);
    }

    /// A record carries the host with its port: a DNS name of legal length can pass the
    /// limit with one, and the link would be a record every reader refuses.
    #[test]
    fn a_host_within_the_limit_only_without_its_port_is_dropped_and_counted() {
        let labels = |last: usize| {
            format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(last))
        };
        let (longest, shorter) = (labels(61), labels(57));
        assert_eq!(longest.len(), 253);
        let html = format!(
            r#"<a href="http://{longest}:8080/x.html">1</a><a href="http://{longest}/y.html">2</a><a href="http://{shorter}:8080/z.html">3</a>"#
        );
        let found = extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1);
        assert_eq!(found.too_long, 1);
        assert_eq!(found.links.len(), 2);
        for link in &found.links {
            let page = PageRef::of_url(&link.url).unwrap();
            page.validate("page").unwrap();
            assert!(page.host.len() >= 253, "{}", page.host);
        }
    }

    #[test]
    fn a_base_past_the_url_limit_leaves_the_page_url_in_force() {
        let html = format!(r#"<base href="/{}/"><a href="x.html">x</a>"#, "b".repeat(MAX_URL_BYTES));
        let found = extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1);
        assert_eq!(urls(&found.links), ["http://example.com/dir/x.html"]);
    }

    /// A page of many short links against a URL at the limit: each resolves past it. Its
    /// links are counted as distinct without their text being kept.
    #[test]
    fn a_page_of_links_past_the_limit_counts_each_once() {
        let page_url = Url::parse(&format!("http://example.com/{}", "p".repeat(MAX_URL_BYTES - 19))).unwrap();
        assert_eq!(page_url.as_str().len(), MAX_URL_BYTES);
        let html: String = (0..6_000).map(|n| format!("<a href=?{}>", n % 3_000)).collect();
        let found = extract_links(&page_url, html.as_bytes(), &LinkFilter::default(), 1);
        assert!(found.links.is_empty());
        assert_eq!(found.too_long, 3_000);
        assert!(!found.cut_short);
    }

    /// Past its limit of URL text to resolve, a page's links are not read on.
    #[test]
    fn a_page_stops_at_its_limit_of_url_text() {
        let page_url = Url::parse(&format!("http://example.com/{}/", "p".repeat(MAX_URL_BYTES / 2))).unwrap();
        let per_link = page_url.as_str().len() + "00001".len();
        let within = MAX_RESOLVED_BYTES / per_link;
        let html: String = (0..within + 100).map(|n| format!("<a href={:05}>", n)).collect();
        let filter = LinkFilter { max_links: usize::MAX, ..LinkFilter::default() };
        let found = extract_links(&page_url, html.as_bytes(), &filter, 1);
        assert!(found.cut_short);
        assert_eq!(found.links.len(), within);
        let short = extract_links(&page(), html.as_bytes(), &filter, 1);
        assert!(!short.cut_short);
        assert_eq!(short.links.len(), within + 100);
    }

    #[test]
    fn frames_past_the_cap_are_links_and_repeats_nothing() {
        let html: String = (0..MAX_FRAMES + 10)
            .flat_map(|n| [format!(r#"<frame src="/f{n}.html">"#), r#"<frame src="/f0.html">"#.to_owned()])
            .collect();
        let found = extract_links(&page(), html.as_bytes(), &LinkFilter::default(), 1);
        assert_eq!(found.frames.len(), MAX_FRAMES);
        assert_eq!(found.frames[1].as_str(), "http://example.com/f1.html");
        let past: Vec<String> =
            (MAX_FRAMES..MAX_FRAMES + 10).map(|n| format!("http://example.com/f{n}.html")).collect();
        assert_eq!(urls(&found.links), past);
    }

    #[test]
    fn non_http_schemes_are_skipped() {
        let links = extract(
            r#"<a href="mailto:someone@example.com">m</a><a href="javascript:void(0)">j</a>
            <a href="ftp://example.com/file">f</a><a href="data:text/html,hi">d</a>
            <a href="tel:+123">t</a><a href="https://example.com/kept">k</a>"#,
        );
        assert_eq!(urls(&links), ["https://example.com/kept"]);
    }

    #[test]
    fn query_links_are_dropped_unless_allowed() {
        let html = br#"<a href="/plain">p</a><a href="/search?q=x&amp;page=2">s</a>"#;
        let without_query = LinkFilter {
            rules: LinkRules { allow_query: false, ..LinkRules::default() },
            ..LinkFilter::default()
        };
        assert_eq!(
            urls(&extract_links(&page(), html, &without_query, 1).links),
            ["http://example.com/plain"]
        );
        assert_eq!(
            urls(&extract_links(&page(), html, &LinkFilter::default(), 1).links),
            ["http://example.com/plain", "http://example.com/search?q=x&page=2"]
        );
    }

    #[test]
    fn max_links_caps_distinct_links_but_repeats_still_count() {
        let html = br#"<a href="/1">1</a><a href="/2">2</a><a href="/3">3</a><a href="/1">1</a>"#;
        let filter = LinkFilter { max_links: 2, ..LinkFilter::default() };
        let links = extract_links(&page(), html, &filter, 1).links;
        assert_eq!(urls(&links), ["http://example.com/1", "http://example.com/2"]);
        assert_eq!(links[0].occurrences, 2);
        let none = LinkFilter { max_links: 0, ..LinkFilter::default() };
        assert!(extract_links(&page(), html, &none, 1).links.is_empty());
    }

    #[test]
    fn character_references_in_hrefs_are_decoded() {
        let links = extract(
            r#"<a href="/q?a=1&amp;b=2&#38;c=3&#x26;d=4">q</a><a href="/q?x=1&copy=2&amp=3">legacy</a>
            <a href="/q?once=&amp;amp;">decoded once</a>"#,
        );
        assert_eq!(
            urls(&links),
            [
                "http://example.com/q?a=1&b=2&c=3&d=4",
                "http://example.com/q?x=1&copy=2&amp=3",
                "http://example.com/q?once=&amp;",
            ]
        );
    }

    /// Cases from the HTML standard's named character references and its numeric rules,
    /// as a browser resolves these hrefs.
    #[test]
    fn every_html_character_reference_is_decoded_as_a_browser_does() {
        let cases = [
            ("caf&eacute;.html", "http://example.com/dir/caf%C3%A9.html"),
            ("a&ndash;b", "http://example.com/dir/a%E2%80%93b"),
            // 0x80-0x9F are Windows-1252's characters: &#150; is an en dash, not U+0096.
            ("a&#150;b", "http://example.com/dir/a%E2%80%93b"),
            ("a&#x2013;b", "http://example.com/dir/a%E2%80%93b"),
            ("x&AMP;y", "http://example.com/dir/x&y"),
            // Legacy names need no `;`, unless `=` or an alphanumeric follows in an attribute.
            ("x?a&AMP b", "http://example.com/dir/x?a&%20b"),
            ("x?a=1&copy=2", "http://example.com/dir/x?a=1&copy=2"),
            ("x?a=1&copy", "http://example.com/dir/x?a=1%C2%A9"),
            ("x?n&notit;", "http://example.com/dir/x?n&notit;"),
            ("x?n&notin;", "http://example.com/dir/x?n%E2%88%89"),
            ("x&zzz;y", "http://example.com/dir/x&zzz;y"),
            ("x&#0;y", "http://example.com/dir/x%EF%BF%BDy"),
            ("x&#xD800;y", "http://example.com/dir/x%EF%BF%BDy"),
            ("x&#x110000;y", "http://example.com/dir/x%EF%BF%BDy"),
        ];
        for (href, expected) in cases {
            let links = extract(&format!(r#"<a href="{href}">l</a>"#));
            assert_eq!(urls(&links), [expected], "{href}");
        }
    }

    #[test]
    fn declared_charset_decodes_non_ascii_hrefs() {
        let html = b"<meta charset=\"windows-1252\"><a href=\"/caf\xe9\">c</a>";
        let links = extract_links(&page(), html, &LinkFilter::default(), 1).links;
        assert_eq!(urls(&links), ["http://example.com/caf%C3%A9"]);
    }

    #[test]
    fn garbage_and_broken_markup_do_not_panic() {
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        assert!(extract_links(&page(), &garbage, &LinkFilter::default(), 1).links.is_empty());

        let broken = b"<a href=\"/ok\">x</a><a href=\"\xff\xfe/bad\"<<<>\x00<a href='/unclosed";
        let links = extract_links(&page(), broken, &LinkFilter::default(), 1).links;
        assert_eq!(links.first().map(|link| link.url.as_str()), Some("http://example.com/ok"));
    }

    #[test]
    fn ambiguous_markup_does_not_end_extraction() {
        // lol_html's strict mode would abort on this select/xmp nesting.
        let links =
            extract(r#"<a href="/before">b</a><select><xmp>text</xmp></select><a href="/after">a</a>"#);
        assert_eq!(urls(&links), ["http://example.com/before", "http://example.com/after"]);
    }

    #[test]
    fn refresh_content_parsing() {
        assert_eq!(refresh_target("5; url=a.html"), Some("a.html"));
        assert_eq!(refresh_target(" 0.5 ,URL = \"b c\" trailing"), Some("b c"));
        assert_eq!(refresh_target("1;url='unterminated"), Some("unterminated"));
        assert_eq!(refresh_target("2 urlish.html"), Some("urlish.html"));
        assert_eq!(refresh_target("5"), None);
        assert_eq!(refresh_target("5;"), None);
        assert_eq!(refresh_target("url=a.html"), None);
        assert_eq!(refresh_target("5x; url=a.html"), None);
    }
}
