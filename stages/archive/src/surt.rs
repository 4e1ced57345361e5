//! SURT keys (Sort-friendly URI Reordering Transform) as the web archiving tools make
//! them: the Python `surt` package's default, itself a port of the Internet Archive's
//! `WaybackURLKeyMaker` (Google's canonicalisation, then the IA's). pywb looks captures up
//! by this key and `cdxj-indexer` writes it, so an index line must carry exactly theirs:
//! the tests compare the two where Python has `surt`.
//!
//! Two cases are left out, as no URL the fetcher makes reaches them: a host that is not
//! ASCII once percent-decoded (the fetcher's URLs carry punycode), which `surt` encodes
//! with IDNA 2003; and a numeric-looking host that is no address, which `surt` hands to
//! the resolver (here it stays a name).

use std::sync::LazyLock;

use regex::bytes::Regex;

/// The SURT key of `url` (`http://www.Example.com/a?b=1&a=2` → `com,example)/a?a=2&b=1`).
pub fn surt(url: &str) -> String {
    let mut parsed = Parsed::parse(url.as_bytes());
    parsed.canonicalize_google();
    parsed.canonicalize_ia();
    String::from_utf8_lossy(&parsed.key()).into_owned()
}

#[derive(Debug, Default)]
struct Parsed {
    scheme: Vec<u8>,
    host: Option<Vec<u8>>,
    port: Option<u16>,
    path: Option<Vec<u8>>,
    query: Option<Vec<u8>>,
}

impl Parsed {
    fn parse(url: &[u8]) -> Self {
        let trimmed = url.trim_ascii();
        let mut url: Vec<u8> =
            trimmed.iter().copied().filter(|b| !matches!(b, b'\n' | b'\r' | b'\t')).collect();
        if !has_scheme(&url) {
            url.splice(0..0, b"http://".iter().copied());
        }
        collapse_repeated_protocols(&mut url);
        // RFC 3986 appendix B: scheme, authority, path, query, fragment.
        let (scheme, rest) = match url.iter().position(|&b| b == b':') {
            Some(colon) if is_scheme(&url[..colon]) => {
                (url[..colon].to_vec(), &url[colon.saturating_add(1)..])
            }
            _ => (Vec::new(), &url[..]),
        };
        let rest = rest.split(|&b| b == b'#').next().unwrap_or_default();
        let (rest, query) = match rest.iter().position(|&b| b == b'?') {
            Some(mark) => (&rest[..mark], Some(rest[mark.saturating_add(1)..].to_vec())),
            None => (rest, None),
        };
        let (netloc, path) = match rest.strip_prefix(b"//") {
            Some(after) => {
                let end = after.iter().position(|&b| b == b'/').unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
            None => (&b""[..], rest),
        };
        let netloc = trim_end(netloc, b':');
        let (host, port) = host_and_port(netloc);
        Self {
            scheme,
            host: host.filter(|h| !h.is_empty()),
            port: port.filter(|&p| p != 0),
            path: (!path.is_empty()).then(|| path.to_vec()),
            query: query.filter(|q| !q.is_empty()),
        }
    }

    /// `GoogleURLCanonicalizer`.
    fn canonicalize_google(&mut self) {
        if let Some(query) = &self.query {
            self.query = Some(escape_once(&unescape_repeatedly(query)));
        }
        if let Some(host) = &self.host {
            let host = unescape_repeatedly(host);
            let host = replace_double_dots(&host);
            let host = trim_end(trim_start(&host, b'.'), b'.').to_vec();
            self.host = Some(match ip_of(&host) {
                Some(ip) => ip.into_bytes(),
                None => escape_once(&host.to_ascii_lowercase()),
            });
        }
        let path = self.path.as_deref().map(unescape_repeatedly);
        let path = match (&self.host, path) {
            (Some(_), path) => Some(normalize_path(path.as_deref().unwrap_or_default())),
            (None, path) => path,
        };
        self.path = path.map(|path| escape_once(&path));
    }

    /// `IAURLCanonicalizer` with its defaults.
    fn canonicalize_ia(&mut self) {
        if let Some(host) = &mut self.host {
            host.make_ascii_lowercase();
            if let Some(found) = WWW.find(host) {
                host.drain(..found.end());
            }
        }
        let default_port = match self.scheme.to_ascii_lowercase().as_slice() {
            b"http" => Some(80),
            b"https" => Some(443),
            _ => None,
        };
        if !self.scheme.is_empty() && self.port.is_some() && self.port == default_port {
            self.port = None;
        }
        if let Some(path) = &mut self.path {
            path.make_ascii_lowercase();
            for pattern in PATH_SESSION_IDS.iter() {
                if let Some(found) = pattern.captures(path) {
                    let groups = [found.get(1), found.get(3)];
                    *path = groups.iter().flatten().flat_map(|m| m.as_bytes()).copied().collect();
                }
            }
            if path.len() > 1 && path.ends_with(b"/") {
                path.pop();
            }
        }
        if let Some(query) = &mut self.query {
            for pattern in QUERY_SESSION_IDS.iter() {
                if let Some(found) = pattern.captures(query) {
                    let mut kept = found.get(1).map(|m| m.as_bytes().to_vec()).unwrap_or_default();
                    if let Some(after) = found.get(2).filter(|m| !m.as_bytes().is_empty()) {
                        kept.extend_from_slice(after.as_bytes());
                    }
                    *query = kept;
                }
            }
            query.make_ascii_lowercase();
            *query = alpha_reorder(query);
            if query.is_empty() {
                self.query = None;
            }
        }
    }

    /// The key: the host's labels reversed and comma-joined, the port, `)`, the path and
    /// the query.
    fn key(&self) -> Vec<u8> {
        let mut key = Vec::new();
        match &self.host {
            Some(host) => {
                let mut labels: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
                labels.reverse();
                key.extend_from_slice(&labels.join(&b','));
                if let Some(port) = self.port {
                    key.extend_from_slice(format!(":{port}").as_bytes());
                }
                key.push(b')');
            }
            None => {
                key.extend_from_slice(&self.scheme);
                key.push(b':');
            }
        }
        match &self.path {
            Some(path) if !path.is_empty() => key.extend_from_slice(path),
            _ if self.query.is_some() => key.push(b'/'),
            _ => {}
        }
        if let Some(query) = &self.query {
            key.push(b'?');
            key.extend_from_slice(query);
        }
        key
    }
}

static WWW: LazyLock<Regex> = LazyLock::new(|| compiled(r"^www\d*\."));

static PATH_SESSION_IDS: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        compiled(r"(?i)^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^\?]+\.aspx.*)$"),
        compiled(r"(?i)^(.*/)(\([0-9a-z]{24}\)/)([^\?]+\.aspx.*)$"),
    ]
});

static QUERY_SESSION_IDS: LazyLock<[Regex; 5]> = LazyLock::new(|| {
    [
        compiled(r"(?i)^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$"),
        compiled(r"(?i)^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$"),
        compiled(r"(?i)^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$"),
        compiled(r"(?i)^(.*)(?:ASPSESSIONID[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$"),
        compiled(r"(?i)^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$"),
    ]
});

/// A pattern over bytes as Python's `re` reads a bytes pattern: ASCII classes, `.` any
/// byte but a newline.
fn compiled(pattern: &str) -> Regex {
    #[allow(clippy::expect_used)] // constant patterns, each compiled by the tests
    Regex::new(&format!("(?-u){pattern}")).expect("a valid constant pattern")
}

fn has_scheme(url: &[u8]) -> bool {
    url.iter().position(|&b| b == b':').is_some_and(|colon| is_scheme(&url[..colon]))
}

fn is_scheme(text: &[u8]) -> bool {
    text.first().is_some_and(u8::is_ascii_alphabetic)
        && text.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// `^(https?://)+` becomes its last repetition.
fn collapse_repeated_protocols(url: &mut Vec<u8>) {
    let protocol =
        |at: &[u8]| [&b"http://"[..], b"https://"].into_iter().find(|p| at.starts_with(p)).map(<[u8]>::len);
    let mut start = 0;
    let mut last = None;
    while let Some(length) = protocol(&url[start..]) {
        last = Some(start);
        start = start.saturating_add(length);
    }
    if let Some(last) = last {
        url.drain(..last);
    }
}

fn trim_start(bytes: &[u8], byte: u8) -> &[u8] {
    let start = bytes.iter().position(|&b| b != byte).unwrap_or(bytes.len());
    &bytes[start..]
}

fn trim_end(bytes: &[u8], byte: u8) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != byte).map_or(0, |last| last.saturating_add(1));
    &bytes[..end]
}

/// Python's `urlsplit` host (lower case, brackets off) and port; a port that is not a
/// number in range makes the whole URL unusable there, and is dropped here.
fn host_and_port(netloc: &[u8]) -> (Option<Vec<u8>>, Option<u16>) {
    let hostinfo = match netloc.iter().rposition(|&b| b == b'@') {
        Some(at) => &netloc[at.saturating_add(1)..],
        None => netloc,
    };
    let (host, port) = match hostinfo.iter().position(|&b| b == b'[') {
        Some(open) => {
            let bracketed = &hostinfo[open.saturating_add(1)..];
            let close = bracketed.iter().position(|&b| b == b']').unwrap_or(bracketed.len());
            let after = &bracketed[close.saturating_add(1).min(bracketed.len())..];
            let port = after.iter().position(|&b| b == b':').map(|colon| &after[colon.saturating_add(1)..]);
            (&bracketed[..close], port)
        }
        None => match hostinfo.iter().position(|&b| b == b':') {
            Some(colon) => (&hostinfo[..colon], Some(&hostinfo[colon.saturating_add(1)..])),
            None => (hostinfo, None),
        },
    };
    let port = port
        .filter(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
        .and_then(|p| std::str::from_utf8(p).ok()?.parse::<u16>().ok());
    (Some(host.to_ascii_lowercase()), port)
}

/// Python's `str.replace('..', '.')`: non-overlapping, left to right.
fn replace_double_dots(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(host.len());
    let mut i = 0;
    while i < host.len() {
        if host[i..].starts_with(b"..") {
            out.push(b'.');
            i = i.saturating_add(2);
        } else {
            out.push(host[i]);
            i = i.saturating_add(1);
        }
    }
    out
}

/// Percent-decodes until nothing changes (`unquote_to_bytes`, repeatedly).
fn unescape_repeatedly(input: &[u8]) -> Vec<u8> {
    let mut current = input.to_vec();
    loop {
        let next = unquote(&current);
        if next == current {
            return current;
        }
        current = next;
    }
}

fn unquote(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let hex = |at: usize| input.get(at).and_then(|&b| char::from(b).to_digit(16));
        match (input[i], hex(i.saturating_add(1)), hex(i.saturating_add(2))) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high.saturating_mul(16).saturating_add(low)).unwrap_or(0));
                i = i.saturating_add(3);
            }
            (byte, ..) => {
                out.push(byte);
                i = i.saturating_add(1);
            }
        }
    }
    out
}

/// Percent-encodes what is not printable ASCII, `#` and `%` (`quote_from_bytes` with the
/// canonicaliser's safe set), in upper-case hex.
fn escape_once(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for &byte in input {
        if byte > b' ' && byte < 0x7f && byte != b'#' && byte != b'%' {
            out.push(byte);
        } else {
            out.extend_from_slice(format!("%{byte:02X}").as_bytes());
        }
    }
    out
}

/// `normalizePath`: dot segments resolved, empty segments dropped but a trailing one.
fn normalize_path(path: &[u8]) -> Vec<u8> {
    if path.is_empty() {
        return b"/".to_vec();
    }
    let mut kept: Vec<&[u8]> = Vec::new();
    for segment in path.split(|&b| b == b'/').skip(1) {
        match segment {
            b"." => {}
            b".." if !kept.is_empty() => {
                kept.pop();
            }
            _ => kept.push(segment),
        }
    }
    let mut out = b"/".to_vec();
    if let Some((last, rest)) = kept.split_last() {
        for segment in rest.iter().filter(|segment| !segment.is_empty()) {
            out.extend_from_slice(segment);
            out.push(b'/');
        }
        out.extend_from_slice(last);
    }
    out
}

/// A host the canonicaliser reads as an IPv4 address: digits alone (a 32-bit number), or
/// dotted parts as `inet_aton` reads them (a leading 0 octal).
fn ip_of(host: &[u8]) -> Option<String> {
    if !host.is_empty() && host.iter().all(u8::is_ascii_digit) {
        let value = std::str::from_utf8(host).ok()?.bytes().fold(0u64, |value, digit| {
            value.wrapping_mul(10).wrapping_add(u64::from(digit.wrapping_sub(b'0'))) & 0xffff_ffff
        });
        return Some(std::net::Ipv4Addr::from(u32::try_from(value).ok()?).to_string());
    }
    let looks_numeric = host.first().is_some_and(u8::is_ascii_digit)
        && host.iter().all(|&b| b.is_ascii_digit() || b == b'.')
        && !host.ends_with(b".")
        && !host.windows(2).any(|pair| pair == b"..");
    let parts: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
    if !looks_numeric || parts.len() > 4 {
        return None;
    }
    let decimal_first = host.first().is_some_and(|&b| b != b'0');
    let octal_only = parts.iter().all(|part| part.iter().all(|&b| (b'0'..=b'7').contains(&b)));
    if !decimal_first && !octal_only {
        return None;
    }
    inet_aton(&parts).map(|ip| ip.to_string())
}

fn inet_aton(parts: &[&[u8]]) -> Option<std::net::Ipv4Addr> {
    let values: Vec<u64> = parts.iter().map(|part| number_c(part)).collect::<Option<_>>()?;
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&value| value > 0xff) {
        return None;
    }
    let room_bits = 32u32.checked_sub(8u32.checked_mul(u32::try_from(leading.len()).ok()?)?)?;
    if *last >= 1u64.checked_shl(room_bits)? {
        return None;
    }
    let mut address = 0u64;
    for (index, value) in leading.iter().enumerate() {
        address |= value << 24u32.checked_sub(8u32.checked_mul(u32::try_from(index).ok()?)?)?;
    }
    u32::try_from(address | last).ok().map(std::net::Ipv4Addr::from)
}

/// A number as C's `strtoul` with base 0 reads it: octal after a leading 0, else decimal.
fn number_c(part: &[u8]) -> Option<u64> {
    let (digits, radix) = match part {
        [b'0', rest @ ..] if !rest.is_empty() => (rest, 8),
        _ => (part, 10),
    };
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, radix).ok()
}

/// `alphaReorderQuery`: the `&`-separated arguments sorted by name, then value (an
/// argument without `=` before one with it).
fn alpha_reorder(query: &[u8]) -> Vec<u8> {
    if query.len() <= 1 {
        return query.to_vec();
    }
    let mut arguments: Vec<(&[u8], Option<&[u8]>)> = query
        .split(|&b| b == b'&')
        .map(|argument| match argument.iter().position(|&b| b == b'=') {
            Some(equals) => (&argument[..equals], Some(&argument[equals.saturating_add(1)..])),
            None => (argument, None),
        })
        .collect();
    arguments.sort();
    let joined: Vec<Vec<u8>> = arguments
        .into_iter()
        .map(|(name, value)| match value {
            Some(value) => [name, b"=", value].concat(),
            None => name.to_vec(),
        })
        .collect();
    joined.join(&b'&')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys the `surt` package (0.3.1) gives, from its own tests and cases of ours.
    const KNOWN: &[(&str, &str)] = &[
        ("http://www.archive.org/", "org,archive)/"),
        ("http://archive.org/goo/?a=2&b&a=1", "org,archive)/goo?a=1&a=2&b"),
        ("http://www.Example.com:80/A/b/../c/./d.html?Z=1&a=2#frag", "com,example)/a/c/d.html?a=2&z=1"),
        ("https://example.com:443/", "com,example)/"),
        ("https://example.com:8443/x/", "com,example:8443)/x"),
        ("http://127.0.0.1:8080/p/1.html", "1,0,0,127:8080)/p/1.html"),
        ("http://s0.sim.test:41234/p/7.html", "test,sim,s0:41234)/p/7.html"),
        ("http://example.com/%7Efoo/%C3%A9?q=%41", "com,example)/~foo/%c3%a9?q=a"),
        ("http://example.com/a%2520b", "com,example)/a%20b"),
        ("http://www3.example.com/", "com,example)/"),
        ("http://example.com/a//b/", "com,example)/a/b"),
        ("http://example.com/?", "com,example)/"),
        ("http://example.com/x?jsessionid=0123456789abcdef0123456789abcdef&b=1", "com,example)/x?b=1"),
        ("http://3232235777/", "1,1,168,192)/"),
    ];

    #[test]
    fn keys_are_the_surt_package_s() {
        for (url, key) in KNOWN {
            assert_eq!(surt(url), *key, "{url}");
        }
    }

    #[test]
    fn the_patterns_compile() {
        LazyLock::force(&WWW);
        LazyLock::force(&PATH_SESSION_IDS);
        LazyLock::force(&QUERY_SESSION_IDS);
    }

    #[test]
    fn numeric_hosts_read_as_inet_aton_does() {
        assert_eq!(ip_of(b"10.1.2.3").as_deref(), Some("10.1.2.3"));
        assert_eq!(ip_of(b"010.1.2.3").as_deref(), Some("8.1.2.3"));
        assert_eq!(ip_of(b"1.2.3").as_deref(), Some("1.2.0.3"));
        assert_eq!(ip_of(b"300.1.1.1"), None);
        assert_eq!(ip_of(b"1.08.1.1"), None);
        assert_eq!(ip_of(b"example.com"), None);
    }
}
