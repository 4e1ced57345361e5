//! URL normalisation and the `url_key` (xxh3-64 of the normalised URL, 16 hex digits)
//! that every URL-keyed message carries so that analysts can join on a fixed-width key.

use thiserror::Error;
use url::Url;
use xxhash_rust::xxh3::xxh3_64;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("not a valid URL: {0}")]
    Parse(String),
    #[error("scheme {0:?} is not http or https")]
    Scheme(String),
    #[error("URL has no host")]
    NoHost,
    /// A user name or password in a URL from the web is someone's secret: a link or
    /// redirect carrying one must not be followed (the client would send it as
    /// `Authorization`) nor published.
    #[error("URL carries a user name or password")]
    Credentials,
}

/// Normalises an absolute http(s) URL: lower-case scheme and host, default port removed,
/// dot-segments resolved (all done by the WHATWG parser), fragment dropped.
pub fn normalise_url(raw: &str) -> Result<String, UrlError> {
    let mut url = Url::parse(raw.trim()).map_err(|e| UrlError::Parse(format!("{raw:?}: {e}")))?;
    normalise_parsed(&mut url)?;
    Ok(url.into())
}

/// The same normalisation on an already parsed URL (link extraction resolves relative
/// links first, then calls this).
pub fn normalise_parsed(url: &mut Url) -> Result<(), UrlError> {
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(UrlError::Scheme(other.to_owned())),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::NoHost);
    }
    if has_credentials(url) {
        return Err(UrlError::Credentials);
    }
    url.set_fragment(None);
    Ok(())
}

/// Whether `url` carries a user name or password.
pub fn has_credentials(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// xxh3-64 (seed 0) of the normalised URL string, as 16 lower-case hex digits.
pub fn url_key(normalised_url: &str) -> String {
    format!("{:016x}", xxh3_64(normalised_url.as_bytes()))
}

/// The host (with a non-default port, if any) of a normalised URL: the politeness and
/// response-time unit of the scheduler and the key of the fetch topic.
pub fn host_of(normalised_url: &str) -> Result<String, UrlError> {
    let url = Url::parse(normalised_url).map_err(|e| UrlError::Parse(e.to_string()))?;
    host_of_parsed(&url)
}

/// [`host_of`] a URL already parsed.
pub fn host_of_parsed(url: &Url) -> Result<String, UrlError> {
    let host = url.host_str().ok_or(UrlError::NoHost)?;
    // No record may carry a URL with credentials: every message's identity is checked
    // through here.
    if has_credentials(url) {
        return Err(UrlError::Credentials);
    }
    Ok(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// The site of `host`: its registered domain (public suffix + 1, any port dropped), e.g.
/// `news.example.co.kr:8080` → `example.co.kr`; the host itself for an IP address and for
/// a name the public suffix list does not cover.
pub fn site_of(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return name;
    }
    psl::domain_str(name).unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_case_port_dots_and_fragment() {
        assert_eq!(
            normalise_url("HTTP://Example.COM:80/a/./b/../c.html#top").unwrap(),
            "http://example.com/a/c.html"
        );
        assert_eq!(normalise_url("https://example.com:443").unwrap(), "https://example.com/");
        assert_eq!(normalise_url("http://example.com:8080/x").unwrap(), "http://example.com:8080/x");
    }

    #[test]
    fn rejects_other_schemes_and_garbage() {
        assert_eq!(normalise_url("ftp://example.com/"), Err(UrlError::Scheme("ftp".into())));
        assert!(matches!(normalise_url("not a url"), Err(UrlError::Parse(_))));
    }

    #[test]
    fn urls_with_credentials_are_refused_and_never_give_a_host() {
        for url in
            ["http://user:SECRETPW@example.com/a", "http://user@example.com/", "https://:pw@example.com/"]
        {
            assert_eq!(normalise_url(url), Err(UrlError::Credentials), "{url}");
            assert_eq!(host_of(url), Err(UrlError::Credentials), "{url}");
        }
        // An @ in the path is no credential.
        assert_eq!(host_of("http://example.com/a@b").unwrap(), "example.com");
    }

    #[test]
    fn key_is_16_hex_of_xxh3_and_host_keeps_port() {
        let key = url_key("http://example.com/");
        assert_eq!(key.len(), 16);
        assert_eq!(key, format!("{:016x}", xxh3_64(b"http://example.com/")));
        assert_ne!(key, url_key("http://example.com/a"));
        assert_eq!(host_of("http://127.0.0.1:8080/a").unwrap(), "127.0.0.1:8080");
        assert_eq!(host_of("https://example.com/a").unwrap(), "example.com");
    }

    #[test]
    fn site_is_the_registered_domain_or_the_address() {
        assert_eq!(site_of("news.example.co.kr:8080"), "example.co.kr");
        assert_eq!(site_of("example.com"), "example.com");
        assert_eq!(site_of("127.0.0.1:80"), "127.0.0.1");
        assert_eq!(site_of("[::1]:8080"), "[::1]");
        assert_eq!(site_of("localhost"), "localhost");
    }
}
