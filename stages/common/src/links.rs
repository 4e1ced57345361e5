//! Which discovered URLs the fetch stage publishes and the scheduler admits to its
//! frontier (`docs/algorithms/in-degree-first.md` §2): http(s) only, page-like paths, no CGI,
//! optionally no query string, bounded depth. Both stages share these flags; the per-site
//! cap depends on what the scheduler already tracks and is checked by its book.

use clap::Args;
use url::Url;

/// The link rules, as flags.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct LinkRules {
    /// Path extensions that count as pages (comma-separated, without the dot; `*`: any).
    #[arg(
        long = "link-extensions",
        env = "RECRAWL_LINK_EXTENSIONS",
        value_delimiter = ',',
        default_value = "htm,html,asp,jsp,php,cfm"
    )]
    pub extensions: Vec<String>,
    /// Also accept paths with no extension or ending in `/` (the paper's crawler did not).
    #[arg(
        long = "link-allow-bare-paths",
        env = "RECRAWL_LINK_ALLOW_BARE_PATHS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub allow_bare_paths: bool,
    /// Accept URLs with a query string (the estimator paper's crawl excluded them).
    #[arg(
        long = "link-allow-query",
        env = "RECRAWL_LINK_ALLOW_QUERY",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub allow_query: bool,
    /// Deepest link level followed from a seed (the estimator paper: 9).
    #[arg(long = "link-max-depth", env = "RECRAWL_LINK_MAX_DEPTH", default_value_t = 9)]
    pub max_depth: u32,
}

impl Default for LinkRules {
    fn default() -> Self {
        Self {
            extensions: ["htm", "html", "asp", "jsp", "php", "cfm"].map(str::to_owned).to_vec(),
            allow_bare_paths: true,
            allow_query: true,
            max_depth: 9,
        }
    }
}

/// Why a link was not taken; the label of the links metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    Unparsable,
    Scheme,
    Extension,
    Cgi,
    Query,
    Depth,
    SiteCap,
    /// A user name or password in the URL: someone's secret, never followed or published.
    Credentials,
}

impl Rejection {
    pub const ALL: [Self; 8] = [
        Self::Unparsable,
        Self::Scheme,
        Self::Extension,
        Self::Cgi,
        Self::Query,
        Self::Depth,
        Self::SiteCap,
        Self::Credentials,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Unparsable => "unparsable",
            Rejection::Scheme => "scheme",
            Rejection::Extension => "extension",
            Rejection::Cgi => "cgi",
            Rejection::Query => "query",
            Rejection::Depth => "depth",
            Rejection::SiteCap => "site_cap",
            Rejection::Credentials => "credentials",
        }
    }
}

impl LinkRules {
    /// These rules for a sitemap or feed a site names: any extension (`.xml`, `.rss`,
    /// `.gz`), the rest as for pages.
    pub fn for_documents(&self) -> Self {
        Self { extensions: vec!["*".to_owned()], ..self.clone() }
    }

    /// Whether a link at `depth` to `url` may enter the frontier.
    pub fn check(&self, url: &str, depth: u32) -> Result<(), Rejection> {
        if depth > self.max_depth {
            return Err(Rejection::Depth);
        }
        let parsed = Url::parse(url).map_err(|_| Rejection::Unparsable)?;
        self.check_parsed(&parsed, depth)
    }

    /// [`Self::check`] of a URL already parsed: link extraction has parsed every link to
    /// resolve it, and parsing it again was about 30 % of a link's cost.
    pub fn check_parsed(&self, parsed: &Url, depth: u32) -> Result<(), Rejection> {
        if depth > self.max_depth {
            return Err(Rejection::Depth);
        }
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Rejection::Scheme);
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Rejection::Credentials);
        }
        if parsed.query().is_some() && !self.allow_query {
            return Err(Rejection::Query);
        }
        let path = parsed.path();
        let last = path.rsplit('/').next().unwrap_or("");
        let extension = last.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase());
        let cgi = path.split('/').any(|segment| segment.eq_ignore_ascii_case("cgi-bin"))
            || matches!(extension.as_deref(), Some("cgi" | "pl"));
        if cgi {
            return Err(Rejection::Cgi);
        }
        match extension {
            None if self.allow_bare_paths => Ok(()),
            Some(ext)
                if self
                    .extensions
                    .iter()
                    .any(|allowed| allowed == "*" || allowed.eq_ignore_ascii_case(&ext)) =>
            {
                Ok(())
            }
            _ => Err(Rejection::Extension),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_take_any_extension_and_keep_the_other_rules() {
        let rules = LinkRules::default();
        assert_eq!(rules.check("http://a.example/sitemap.xml.gz", 1), Err(Rejection::Extension));
        let documents = rules.for_documents();
        for ok in ["http://a.example/sitemap.xml.gz", "http://a.example/feed.rss", "http://a.example/atom"] {
            assert_eq!(documents.check(ok, 1), Ok(()), "{ok}");
        }
        assert_eq!(documents.check("ftp://a.example/sitemap.xml", 1), Err(Rejection::Scheme));
        assert_eq!(documents.check("http://a.example/sitemap.xml", 10), Err(Rejection::Depth));
    }

    #[test]
    fn the_papers_rules_with_the_products_options() {
        let rules = LinkRules::default();
        for ok in [
            "http://a.example/x.html",
            "https://a.example/dir/index.PHP",
            "http://a.example/",
            "http://a.example/about",
            "http://a.example/list.jsp?page=2",
        ] {
            assert_eq!(rules.check(ok, 3), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("ftp://a.example/x.html", Rejection::Scheme),
            ("mailto:someone@a.example", Rejection::Scheme),
            ("http://a.example/cgi-bin/search", Rejection::Cgi),
            ("http://a.example/run.cgi", Rejection::Cgi),
            ("http://a.example/photo.jpg", Rejection::Extension),
            ("http://a.example/paper.pdf", Rejection::Extension),
            ("not a url", Rejection::Unparsable),
            ("http://user:SECRETPW@a.example/x.html", Rejection::Credentials),
        ] {
            assert_eq!(rules.check(bad, 0), Err(why), "{bad}");
        }
        assert_eq!(rules.check("http://a.example/x.html", 10), Err(Rejection::Depth));
        let strict = LinkRules { allow_query: false, allow_bare_paths: false, ..LinkRules::default() };
        assert_eq!(strict.check("http://a.example/list.jsp?page=2", 0), Err(Rejection::Query));
        assert_eq!(strict.check("http://a.example/about", 0), Err(Rejection::Extension));
        assert_eq!(strict.check("http://a.example/", 0), Err(Rejection::Extension));
        assert_eq!(strict.check("http://a.example/a.htm", 0), Ok(()));
    }
}
