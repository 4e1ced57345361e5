//! The page every message is about.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use crate::validation::ValidationError;

/// Which page a message is about: its identity, carried once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PageRef {
    /// The normalised absolute URL.
    pub url: String,
    /// xxh3-64 of `url`, 16 hex digits: the key to join topics on.
    pub key: String,
    /// Host of `url`, with the port when it is not the scheme's default.
    pub host: String,
    /// The registered domain of `host` (public suffix + 1: `news.example.co.kr` →
    /// `example.co.kr`); the address itself for an IP host.
    pub site: String,
}

impl PageRef {
    /// The identity of `url` (normalised), whose host is `host`.
    pub fn new(url: &str, host: &str) -> Self {
        Self {
            url: url.to_owned(),
            key: crate::url_key(url),
            host: host.to_owned(),
            site: crate::site_of(host).to_owned(),
        }
    }

    /// The identity of `url` (normalised), its host read from it.
    pub fn of_url(url: &str) -> Result<Self, crate::UrlError> {
        Ok(Self::new(url, &crate::host_of(url)?))
    }

    /// From schema 1's fields, keeping the key it carried.
    pub(crate) fn from_v1(url: String, key: String, host: String) -> Self {
        let site = crate::site_of(&host).to_owned();
        Self { url, key, host, site }
    }

    /// Checks the identity `name` (`page`, `source`) holds; the error names the field.
    pub fn validate(&self, name: &str) -> Result<(), ValidationError> {
        bounds::text(&format!("{name}.url"), &self.url, bounds::MAX_URL_BYTES)?;
        bounds::text(&format!("{name}.key"), &self.key, bounds::MAX_URL_BYTES)?;
        if self.host.is_empty() {
            return Err(ValidationError::Empty { field: format!("{name}.host") });
        }
        bounds::text(&format!("{name}.host"), &self.host, bounds::MAX_HOST_BYTES)?;
        // The scheduler caps and spaces requests per host: a page filed under another
        // host than its URL's would escape its own host's, and be filed elsewhere again
        // when the state is restored from the URLs.
        match crate::host_of(&self.url) {
            Ok(host) if host == self.host => {}
            Ok(host) => {
                return Err(ValidationError::HostMismatch {
                    field: format!("{name}.host"),
                    host: self.host.clone(),
                    url_field: format!("{name}.url"),
                    url_host: host,
                })
            }
            Err(source) => return Err(ValidationError::Url { field: format!("{name}.url"), source }),
        }
        // Readers group by the site: it must be the host's, whoever produced the record.
        let site = crate::site_of(&self.host);
        if self.site != site {
            return Err(ValidationError::SiteMismatch {
                field: format!("{name}.site"),
                site: self.site.clone(),
                host: self.host.clone(),
                host_site: site.to_owned(),
            });
        }
        Ok(())
    }
}
