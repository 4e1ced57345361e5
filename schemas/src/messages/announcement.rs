//! What sites say of their own pages, in sitemaps and feeds: topic `announcements`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use super::page::PageRef;
use crate::envelope::{Format, Message};
use crate::time::UtcTime;
use crate::validation::ValidationError;

/// The kind of document an announcement was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnnouncingDocument {
    /// The site's robots.txt: `page` is a sitemap on the same host that a `Sitemap:` line
    /// names, or `/sitemap.xml` when no line names one.
    RobotsTxt,
    /// An HTML page: `page` is a feed on the same host it names in a `<link
    /// rel="alternate">` of an RSS or Atom type.
    Page,
    /// A sitemap (sitemaps.org `<urlset>`): `page` is one of its `<url>` entries.
    Sitemap,
    /// A sitemap index (`<sitemapindex>`): `page` is one of the sitemaps it lists.
    SitemapIndex,
    /// An RSS 2.0 feed: `page` is an item's link.
    Rss,
    /// An Atom feed: `page` is an entry's link.
    Atom,
}

impl AnnouncingDocument {
    pub const ALL: [Self; 6] =
        [Self::RobotsTxt, Self::Page, Self::Sitemap, Self::SitemapIndex, Self::Rss, Self::Atom];

    /// The name the records carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RobotsTxt => "robots_txt",
            Self::Page => "page",
            Self::Sitemap => "sitemap",
            Self::SitemapIndex => "sitemap_index",
            Self::Rss => "rss",
            Self::Atom => "atom",
        }
    }
}

/// How often a sitemap says a page changes (`<changefreq>`); a hint, not a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimedChangeFrequency {
    /// Changes at every access.
    Always,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    /// Archived: never changes.
    Never,
}

impl ClaimedChangeFrequency {
    pub const ALL: [Self; 7] =
        [Self::Always, Self::Hourly, Self::Daily, Self::Weekly, Self::Monthly, Self::Yearly, Self::Never];

    /// The protocol's spelling, as the records carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Hourly => "hourly",
            Self::Daily => "daily",
            Self::Weekly => "weekly",
            Self::Monthly => "monthly",
            Self::Yearly => "yearly",
            Self::Never => "never",
        }
    }

    /// A `<changefreq>` value, whatever its surrounding whitespace and ASCII case.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        Self::ALL.into_iter().find(|frequency| frequency.as_str().eq_ignore_ascii_case(text))
    }
}

/// One page a site announced in a sitemap or feed the fetch stage downloaded. Topic
/// `announcements`, keyed by the announced URL, so the scheduler instance owning that URL
/// reads it. What the site claims is passed on as claimed: whether its dates prove true
/// is for the readers to learn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageAnnouncement {
    /// The announced page (its URL normalised, fragment dropped); on the same host as
    /// `source` (and for a sitemap, under its directory). A sitemap or feed itself when
    /// `document` is `robots_txt`, `sitemap_index` or `page`.
    pub page: PageRef,
    /// The sitemap or feed that announced it.
    pub source: PageRef,
    /// What `source` is.
    pub document: AnnouncingDocument,
    /// The period in which `source` was fetched.
    pub period: u64,
    /// When `source` was fetched.
    pub fetched_at: UtcTime,
    /// `fetched_at` in Unix milliseconds.
    pub fetched_at_ms: i64,
    /// When the site says the page last changed: a sitemap's `<lastmod>`, an RSS item's
    /// `<pubDate>`, an Atom entry's `<updated>` (else `<published>`). Null when it says
    /// nothing or the date does not parse.
    pub claimed_modified: Option<UtcTime>,
    /// `claimed_modified` in Unix milliseconds.
    pub claimed_modified_ms: Option<i64>,
    /// A sitemap's `<changefreq>` for the page; null when absent or not one of the
    /// protocol's values.
    pub change_frequency: Option<ClaimedChangeFrequency>,
    /// A sitemap's `<priority>` for the page, in [0, 1]; null when absent or out of range.
    pub priority: Option<f32>,
    /// Links followed from a seed to reach `source`, + 1.
    pub depth: u32,
}

impl Message for PageAnnouncement {
    const NAME: &'static str = "PageAnnouncement";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 1;

    fn validate(&self) -> Result<(), ValidationError> {
        self.page.validate("page")?;
        self.source.validate("source")?;
        self.validate_claims()
    }
}

impl PageAnnouncement {
    /// [`Message::validate`] but for the identities of `page` and `source`: for the fetch
    /// stage, which makes thousands of records of one source and each page's identity
    /// itself.
    pub fn validate_claims(&self) -> Result<(), ValidationError> {
        if self.page.host != self.source.host {
            return Err(ValidationError::HostMismatch {
                field: "page.host".to_owned(),
                host: self.page.host.clone(),
                url_field: "source.url".to_owned(),
                url_host: self.source.host.clone(),
            });
        }
        bounds::period(self.period)?;
        bounds::instant("fetched_at", self.fetched_at, self.fetched_at_ms)?;
        match (self.claimed_modified, self.claimed_modified_ms) {
            (None, None) => {}
            (Some(at), Some(ms)) => bounds::instant("claimed_modified", at, ms)?,
            _ => {
                return Err(ValidationError::Contradiction(
                    "claimed_modified and claimed_modified_ms are not both null or both set",
                ))
            }
        }
        if let Some(priority) = self.priority {
            if !(0.0..=1.0).contains(&priority) {
                return Err(ValidationError::Probability {
                    field: "priority".to_owned(),
                    value: f64::from(priority),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::samples;

    #[test]
    fn an_announcement_is_checked_for_what_readers_rely_on() {
        assert_eq!(samples::page_announcement().validate(), Ok(()));
        let other_host = PageAnnouncement {
            page: PageRef::new("http://elsewhere.example/b.html", "elsewhere.example"),
            ..samples::page_announcement()
        };
        assert!(matches!(other_host.validate(), Err(ValidationError::HostMismatch { .. })));
        let half_a_date = PageAnnouncement { claimed_modified_ms: None, ..samples::page_announcement() };
        assert!(matches!(half_a_date.validate(), Err(ValidationError::Contradiction(_))));
        let skewed = PageAnnouncement { claimed_modified_ms: Some(1), ..samples::page_announcement() };
        assert!(matches!(skewed.validate(), Err(ValidationError::Instant { .. })));
        for frequency in ClaimedChangeFrequency::ALL {
            let written = serde_json::to_value(frequency).unwrap();
            assert_eq!(written.as_str(), Some(frequency.as_str()));
            let spelled = format!(" {} ", frequency.as_str().to_ascii_uppercase());
            assert_eq!(ClaimedChangeFrequency::parse(&spelled), Some(frequency));
        }
        assert_eq!(ClaimedChangeFrequency::parse("fortnightly"), None);
        for document in AnnouncingDocument::ALL {
            let written = serde_json::to_value(document).unwrap();
            assert_eq!(written.as_str(), Some(document.as_str()));
        }
        for priority in [-0.1, 1.5, f32::NAN] {
            let odd = PageAnnouncement { priority: Some(priority), ..samples::page_announcement() };
            assert!(matches!(odd.validate(), Err(ValidationError::Probability { .. })), "{priority}");
        }
    }
}
