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
    /// A sitemap (sitemaps.org `<urlset>`): `page` is one of its `<url>` entries.
    Sitemap,
    /// A sitemap index (`<sitemapindex>`): `page` is one of the sitemaps it lists.
    SitemapIndex,
    /// An RSS 2.0 feed: `page` is an item's link.
    Rss,
    /// An Atom feed: `page` is an entry's link.
    Atom,
}

/// How often a sitemap says a page changes (`<changefreq>`); a hint, not a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimedChangeFrequency {
    Always,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    Never,
}

/// One page a site announced in a sitemap or feed the fetch stage downloaded. Topic
/// `announcements`, keyed by the announced URL, so the scheduler instance owning that URL
/// reads it. What the site claims is passed on as claimed: whether its dates prove true
/// is for the readers to learn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageAnnouncement {
    /// The announced page (its URL normalised, fragment dropped); on the same host as
    /// `source` (and for a sitemap, under its directory).
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
        for priority in [-0.1, 1.5, f32::NAN] {
            let odd = PageAnnouncement { priority: Some(priority), ..samples::page_announcement() };
            assert!(matches!(odd.validate(), Err(ValidationError::Probability { .. })), "{priority}");
        }
    }
}
