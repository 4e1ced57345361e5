//! What a fetch learns of the pages a site announces, as `announcements` records: the
//! entries of a sitemap or feed it downloaded ([`crate::announce`] reads them), the
//! sitemaps its robots.txt names, and the feeds a page names.

use recrawl_schemas::url_key::{host_of_parsed, normalise_parsed};
use recrawl_schemas::{
    AnnouncingDocument, ClaimedChangeFrequency, FetchOutcome, FetchResult, PageAnnouncement, PageRef, UtcTime,
};
use url::Url;

use crate::announce::{
    looks_like_announcements, read_announcements, AnnouncementLimits, Announcements, DocumentKind, Skipped,
};
use crate::links::is_html;

/// Sitemaps taken from one robots.txt: sites name one or a handful; a file naming
/// thousands would have each fetched before any page.
pub const MAX_ROBOTS_SITEMAPS: usize = 16;

/// Why announced pages were not published, added up over a batch: the metric's labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Not http(s), unparsable, too long, or on another host than the document's.
    pub bad_url: u64,
    pub out_of_scope: u64,
    pub over_count: u64,
    pub duplicate: u64,
    /// A claimed date, frequency or priority that did not parse (the page is announced
    /// without it).
    pub bad_value: u64,
}

impl Dropped {
    pub const LABELS: [&'static str; 5] = ["bad_url", "out_of_scope", "over_count", "duplicate", "bad_value"];

    pub fn counts(&self) -> [u64; 5] {
        [self.bad_url, self.out_of_scope, self.over_count, self.duplicate, self.bad_value]
    }

    fn add(&mut self, skipped: &Skipped) {
        self.bad_url = self.bad_url.saturating_add(skipped.bad_urls);
        self.out_of_scope = self.out_of_scope.saturating_add(skipped.out_of_scope);
        self.over_count = self.over_count.saturating_add(skipped.over_count);
        self.duplicate = self.duplicate.saturating_add(skipped.duplicates);
        self.bad_value = self.bad_value.saturating_add(skipped.bad_values);
    }
}

/// A downloaded document read as announcements.
#[derive(Debug, Default)]
pub struct Announced {
    pub records: Vec<PageAnnouncement>,
    pub dropped: Dropped,
    /// The document's kind, if it was one; `None` for a page that is no sitemap or feed.
    pub document: Option<AnnouncingDocument>,
    /// Reading stopped early (the size limit, or malformed XML after some entries).
    pub cut_short: bool,
    /// Why a document that looked like a sitemap or feed could not be read.
    pub refused: Option<String>,
}

impl Announced {
    /// Bytes the records hold, counted in the batch's budget as bodies are.
    pub fn held_bytes(&self) -> usize {
        self.records.iter().fold(0, |held, record| {
            let (page, source) = (&record.page, &record.source);
            let text = [
                &page.url,
                &page.key,
                &page.host,
                &page.site,
                &source.url,
                &source.key,
                &source.host,
                &source.site,
            ]
            .iter()
            .map(|text| text.len())
            .fold(size_of::<PageAnnouncement>(), usize::saturating_add);
            held.saturating_add(text)
        })
    }
}

/// The announcements of a downloaded non-HTML body that is a sitemap, sitemap index or
/// feed; nothing for any other result. Reads up to the protocol's limits.
pub fn of_download(result: &FetchResult, limits: &AnnouncementLimits) -> Announced {
    let mut announced = Announced::default();
    let readable = result.outcome == FetchOutcome::Downloaded
        && !is_html(result.content_type.as_deref())
        && looks_like_announcements(&result.body);
    if !readable {
        return announced;
    }
    // Scope is judged where the document was served from, after redirects; the records
    // name the URL picked, whose host they must share.
    let Ok(served_from) = Url::parse(result.final_url.as_deref().unwrap_or(&result.url)) else {
        return announced;
    };
    let parsed: Announcements = match read_announcements(&served_from, &result.body, limits) {
        Ok(parsed) => parsed,
        Err(error) => {
            announced.refused = Some(error.to_string());
            return announced;
        }
    };
    let document = match parsed.kind {
        DocumentKind::UrlSet => AnnouncingDocument::Sitemap,
        DocumentKind::SitemapIndex => AnnouncingDocument::SitemapIndex,
        DocumentKind::Rss => AnnouncingDocument::Rss,
        DocumentKind::Atom => AnnouncingDocument::Atom,
    };
    announced.document = Some(document);
    announced.cut_short = parsed.cut_short;
    announced.dropped.add(&parsed.skipped);
    let source = PageRef::new(&result.url, &result.host);
    for entry in parsed.entries {
        let claim = Claim {
            modified_ms: entry.modified_unix_ms,
            change_frequency: entry.change_freq,
            priority: entry.priority,
        };
        match announcement(entry.url, &source, document, Context::of(result), claim) {
            Ok(record) => announced.records.push(record),
            Err(Unannounceable::BadUrl) => {
                announced.dropped.bad_url = announced.dropped.bad_url.saturating_add(1)
            }
            Err(Unannounceable::BadValue(record)) => {
                announced.dropped.bad_value = announced.dropped.bad_value.saturating_add(1);
                announced.records.push(*record);
            }
        }
    }
    announced
}

/// The sitemaps a robots.txt of `host` names on that host, at most
/// [`MAX_ROBOTS_SITEMAPS`], or `/sitemap.xml` when it names none there.
pub fn of_robots(robots_url: &Url, host: &str, named: &[String], context: Context) -> Announced {
    let mut announced = Announced { document: Some(AnnouncingDocument::RobotsTxt), ..Announced::default() };
    let source = PageRef::new(robots_url.as_str(), host);
    let mut seen: Vec<String> = Vec::new();
    for line in named {
        if announced.records.len() >= MAX_ROBOTS_SITEMAPS {
            announced.dropped.over_count = announced.dropped.over_count.saturating_add(1);
            continue;
        }
        let Ok(url) = Url::parse(line.trim()) else {
            announced.dropped.bad_url = announced.dropped.bad_url.saturating_add(1);
            continue;
        };
        if seen.iter().any(|known| known == url.as_str()) {
            announced.dropped.duplicate = announced.dropped.duplicate.saturating_add(1);
            continue;
        }
        seen.push(url.as_str().to_owned());
        match announcement(url, &source, AnnouncingDocument::RobotsTxt, context, Claim::default()) {
            Ok(record) => announced.records.push(record),
            // Another host's sitemap (the protocol lets robots.txt name one) is that host's to
            // announce: its entries could not be checked against its own scope.
            Err(_) => announced.dropped.out_of_scope = announced.dropped.out_of_scope.saturating_add(1),
        }
    }
    if announced.records.is_empty() {
        if let Ok(guess) = robots_url.join("/sitemap.xml") {
            let guessed =
                announcement(guess, &source, AnnouncingDocument::RobotsTxt, context, Claim::default());
            if let Ok(record) = guessed {
                announced.records.push(record);
            }
        }
    }
    announced
}

/// The feeds a downloaded page names, on its own host.
pub fn of_feeds(feeds: &[Url], result: &FetchResult) -> Announced {
    let mut announced = Announced { document: Some(AnnouncingDocument::Page), ..Announced::default() };
    let source = PageRef::new(&result.url, &result.host);
    for feed in feeds {
        match announcement(
            feed.clone(),
            &source,
            AnnouncingDocument::Page,
            Context::of(result),
            Claim::default(),
        ) {
            Ok(record) => announced.records.push(record),
            Err(_) => announced.dropped.out_of_scope = announced.dropped.out_of_scope.saturating_add(1),
        }
    }
    announced
}

/// The request an announcement came with.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    pub period: u64,
    /// The depth of the page whose fetch found the document.
    pub depth: u32,
    pub fetched_at_ms: i64,
}

impl Context {
    pub fn of(result: &FetchResult) -> Self {
        Self { period: result.period, depth: result.depth, fetched_at_ms: result.fetched_at_ms }
    }
}

/// What a document claims of one page.
#[derive(Debug, Clone, Copy, Default)]
struct Claim {
    modified_ms: Option<i64>,
    change_frequency: Option<ClaimedChangeFrequency>,
    priority: Option<f32>,
}

enum Unannounceable {
    /// No URL a record may carry, or not on the source's host.
    BadUrl,
    /// Announced without a claim that a record may not carry.
    BadValue(Box<PageAnnouncement>),
}

fn announcement(
    mut url: Url,
    source: &PageRef,
    document: AnnouncingDocument,
    context: Context,
    claim: Claim,
) -> Result<PageAnnouncement, Unannounceable> {
    normalise_parsed(&mut url).map_err(|_| Unannounceable::BadUrl)?;
    let host = host_of_parsed(&url).map_err(|_| Unannounceable::BadUrl)?;
    if host != source.host {
        return Err(Unannounceable::BadUrl);
    }
    let page = PageRef::new(url.as_str(), &host);
    page.validate("page").map_err(|_| Unannounceable::BadUrl)?;
    let record = PageAnnouncement {
        page,
        source: source.clone(),
        document,
        period: context.period,
        fetched_at: UtcTime::from_ms(context.fetched_at_ms),
        fetched_at_ms: context.fetched_at_ms,
        claimed_modified: claim.modified_ms.map(UtcTime::from_ms),
        claimed_modified_ms: claim.modified_ms,
        change_frequency: claim.change_frequency,
        priority: claim.priority,
        depth: context.depth.saturating_add(1),
    };
    // The source's identity is the fetch's own, checked when the record is produced.
    if record.validate_claims().is_ok() {
        return Ok(record);
    }
    // A claimed date a record may not carry (before 1970, or from year 6400 on): the page
    // is still announced, with its other claims.
    let undated = PageAnnouncement { claimed_modified: None, claimed_modified_ms: None, ..record.clone() };
    let unranked = PageAnnouncement { priority: None, ..record.clone() };
    let bare = PageAnnouncement { priority: None, ..undated.clone() };
    for kept in [undated, unranked, bare] {
        if kept.validate_claims().is_ok() {
            return Err(Unannounceable::BadValue(Box::new(kept)));
        }
    }
    Err(Unannounceable::BadUrl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        Context { period: 7, depth: 2, fetched_at_ms: 1_700_000_000_000 }
    }

    #[test]
    fn a_robots_txt_announces_at_most_sixteen_distinct_sitemaps_of_its_host() {
        let robots = Url::parse("http://a.example/robots.txt").unwrap();
        let mut named: Vec<String> = (0..40).map(|n| format!("http://a.example/s{n}.xml")).collect();
        named.insert(1, "http://a.example/s0.xml".to_owned());
        let announced = of_robots(&robots, "a.example", &named, context());
        assert_eq!(announced.records.len(), MAX_ROBOTS_SITEMAPS);
        assert_eq!(announced.dropped.duplicate, 1);
        assert_eq!(announced.dropped.over_count, 40 - MAX_ROBOTS_SITEMAPS as u64);
        let first = &announced.records[0];
        assert_eq!(
            (first.page.url.as_str(), first.source.url.as_str()),
            ("http://a.example/s0.xml", robots.as_str())
        );
        assert_eq!((first.period, first.depth, first.fetched_at_ms), (7, 3, 1_700_000_000_000));
    }

    #[test]
    fn a_robots_txt_naming_no_sitemap_of_its_host_announces_the_usual_place() {
        let robots = Url::parse("https://a.example:8443/robots.txt").unwrap();
        let announced =
            of_robots(&robots, "a.example:8443", &["https://b.example/s.xml".to_owned()], context());
        let urls: Vec<&str> = announced.records.iter().map(|r| r.page.url.as_str()).collect();
        assert_eq!(urls, ["https://a.example:8443/sitemap.xml"]);
        assert_eq!(announced.dropped.out_of_scope, 1);
    }

    #[test]
    fn a_claim_no_record_may_carry_is_left_out_and_the_page_still_announced() {
        let body =
            r#"<urlset><url><loc>http://a.example/p.html</loc><lastmod>9999-01-01</lastmod></url></urlset>"#;
        let result = FetchResult {
            content_type: Some("application/xml".to_owned()),
            ..FetchResult::html_page("http://a.example/sitemap.xml", "a.example", 3, body)
        };
        let announced = of_download(&result, &AnnouncementLimits::default());
        assert_eq!(announced.document, Some(AnnouncingDocument::Sitemap));
        assert_eq!(announced.records.len(), 1);
        assert_eq!(announced.records[0].claimed_modified, None);
        assert_eq!(announced.dropped.bad_value, 1);
        // Before 1970 in UTC: the date goes, the priority stays.
        let body = r#"<urlset><url><loc>http://a.example/p.html</loc><lastmod>1970-01-01T00:00+01:00</lastmod>
            <priority>0.5</priority></url></urlset>"#;
        let result = FetchResult { body: body.as_bytes().to_vec(), ..result };
        let announced = of_download(&result, &AnnouncementLimits::default());
        let record = &announced.records[0];
        assert_eq!((record.claimed_modified_ms, record.priority), (None, Some(0.5)));
    }
}
