//! Bounds on what a message from a topic may hold, checked before a stage uses it
//! ([`Message::validate`](crate::Message::validate)): whatever the producer, a stage's arithmetic and memory stay
//! within these.

use crate::validation::ValidationError;

/// Longest URL accepted anywhere (browsers and servers commonly stop near 8 KiB).
pub const MAX_URL_BYTES: usize = 8 * 1024;
/// Longest host name (DNS allows 253 characters).
pub const MAX_HOST_BYTES: usize = 255;
/// Longest `Content-Type`, `ETag` or `Last-Modified` a record carries: the fetcher
/// drops a longer one, and the scheduler keeps the validators of every URL it tracks.
pub const MAX_HEADER_BYTES: usize = 1024;
/// Most redirects followed (and recorded) for one request.
pub const MAX_REDIRECTS: usize = 10;
/// Most headers a fetch result keeps of one side of its exchange (hyper, the fetcher's
/// HTTP client, reads at most 100 response headers).
pub const MAX_EXCHANGE_HEADERS: usize = 100;
/// Most bytes of names and values a fetch result keeps of one side of its exchange.
pub const MAX_EXCHANGE_HEADER_BYTES: usize = 32 * 1024;
/// Longest HTTP method or version (`HTTP/1.1`) a record carries.
pub const MAX_HTTP_TOKEN_BYTES: usize = 32;
/// Largest period number: a million years of one-minute periods, far from overflow.
pub const MAX_PERIOD: u64 = 1 << 40;
/// Latest Unix time in milliseconds accepted (about the year 6400).
pub const MAX_TIME_MS: i64 = 1 << 47;
/// Highest partition number (Kafka clusters stop far below).
pub const MAX_PARTITION: i32 = (1 << 20) - 1;
/// Largest count of URLs or requests: summed over every partition up to
/// [`MAX_PARTITION`], still far below `u64::MAX`.
pub const MAX_TALLY: u64 = 1 << 40;
/// Longest request duration accepted, milliseconds: a day, past any request timeout,
/// and finite as the `f32` the stages keep it in.
pub const MAX_DURATION_MS: f64 = 86_400_000.0;
/// Largest body size accepted, bytes: past any record, and the difference of two is
/// an `i64`.
pub const MAX_SIZE_BYTES: u64 = 1 << 40;
/// How far past 1 a probability may be, as a sum of floating-point terms can be.
const PROBABILITY_ROUNDING: f64 = 1e-9;

pub fn text(name: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.len() > max {
        return Err(ValidationError::TooLong { field: name.to_owned(), bytes: value.len(), max });
    }
    Ok(())
}

pub fn optional_text(name: &str, value: Option<&str>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |value| text(name, value, MAX_URL_BYTES))
}

/// A header value a record carries, if any: at most [`MAX_HEADER_BYTES`].
pub fn header(name: &str, value: Option<&str>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |value| text(name, value, MAX_HEADER_BYTES))
}

/// One side's headers of an exchange: within [`MAX_EXCHANGE_HEADERS`] and
/// [`MAX_EXCHANGE_HEADER_BYTES`], each value within [`MAX_HEADER_BYTES`].
pub fn headers(name: &str, headers: &[crate::HttpHeader]) -> Result<(), ValidationError> {
    count(name, headers.len(), MAX_EXCHANGE_HEADERS)?;
    let mut total = 0usize;
    for header in headers {
        text(&format!("{name} name"), &header.name, MAX_HEADER_BYTES)?;
        if header.value.len() > MAX_HEADER_BYTES {
            return Err(ValidationError::HeaderTooLong {
                field: name.to_owned(),
                name: header.name.clone(),
                bytes: header.value.len(),
                max: MAX_HEADER_BYTES,
            });
        }
        total = total.saturating_add(header.name.len()).saturating_add(header.value.len());
    }
    if total > MAX_EXCHANGE_HEADER_BYTES {
        return Err(ValidationError::HeadersTooLarge {
            field: name.to_owned(),
            bytes: total,
            max: MAX_EXCHANGE_HEADER_BYTES,
        });
    }
    Ok(())
}

pub fn count(name: &str, count: usize, max: usize) -> Result<(), ValidationError> {
    if count > max {
        return Err(ValidationError::TooMany { field: name.to_owned(), count, max });
    }
    Ok(())
}

pub fn tally(name: &str, value: u64) -> Result<(), ValidationError> {
    if value > MAX_TALLY {
        return Err(ValidationError::Tally { field: name.to_owned(), value, max: MAX_TALLY });
    }
    Ok(())
}

/// A partition a record names as its own: readers key their sums by it.
pub fn partition(partition: i32) -> Result<(), ValidationError> {
    if !(0..=MAX_PARTITION).contains(&partition) {
        return Err(ValidationError::Partition { partition, max: MAX_PARTITION });
    }
    Ok(())
}

pub fn period(period: u64) -> Result<(), ValidationError> {
    if period > MAX_PERIOD {
        return Err(ValidationError::Period { period, max: MAX_PERIOD });
    }
    Ok(())
}

/// The page identity every keyed message carries.
pub fn identity(url: &str, url_key: &str, host: &str, period_number: u64) -> Result<(), ValidationError> {
    text("url", url, MAX_URL_BYTES)?;
    text("url_key", url_key, MAX_URL_BYTES)?;
    if host.is_empty() {
        return Err(ValidationError::Empty { field: "host".to_owned() });
    }
    text("host", host, MAX_HOST_BYTES)?;
    // A pick filed under another host than its URL's would be fetched under that
    // host's politeness gate and its change event refused downstream.
    match crate::host_of(url) {
        Ok(own) if own == host => {}
        Ok(own) => {
            return Err(ValidationError::HostMismatch {
                field: "host".to_owned(),
                host: host.to_owned(),
                url_field: "url".to_owned(),
                url_host: own,
            })
        }
        Err(source) => return Err(ValidationError::Url { field: "url".to_owned(), source }),
    }
    period(period_number)
}

/// A URL a record carries besides its identity (a redirect, a final URL): without
/// credentials. The serialised form the stages write puts them before the first `@`
/// of the authority, so the text is enough.
pub fn no_credentials(name: &str, url: &str) -> Result<(), ValidationError> {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(ValidationError::Credentials { field: name.to_owned() });
    }
    Ok(())
}

/// An instant carried twice, as RFC 3339 `name` and as `name_ms`: in range and equal.
pub fn instant(name: &str, at: crate::UtcTime, ms: i64) -> Result<(), ValidationError> {
    time_ms(&format!("{name}_ms"), ms)?;
    if at.ms() != ms {
        return Err(ValidationError::Instant { field: name.to_owned(), at, ms });
    }
    Ok(())
}

pub fn time_ms(name: &str, ms: i64) -> Result<(), ValidationError> {
    if !(0..=MAX_TIME_MS).contains(&ms) {
        return Err(ValidationError::UnixTime { field: name.to_owned(), ms, max: MAX_TIME_MS });
    }
    Ok(())
}

pub fn finite(name: &str, value: f64) -> Result<(), ValidationError> {
    if !value.is_finite() {
        return Err(ValidationError::NotFinite { field: name.to_owned(), value });
    }
    Ok(())
}

pub fn non_negative(name: &str, value: f64) -> Result<(), ValidationError> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(ValidationError::NotNonNegative { field: name.to_owned(), value });
    }
    Ok(())
}

pub fn duration_ms(name: &str, value: f64) -> Result<(), ValidationError> {
    if !(0.0..=MAX_DURATION_MS).contains(&value) {
        return Err(ValidationError::Duration { field: name.to_owned(), value, max: MAX_DURATION_MS });
    }
    Ok(())
}

pub fn size_bytes(name: &str, value: u64) -> Result<(), ValidationError> {
    if value > MAX_SIZE_BYTES {
        return Err(ValidationError::Size { field: name.to_owned(), value, max: MAX_SIZE_BYTES });
    }
    Ok(())
}

/// A probability: a page forecast to download or change more surely than certainly
/// would outrank every other.
pub fn probability(name: &str, value: f64) -> Result<(), ValidationError> {
    if !(0.0..=1.0 + PROBABILITY_ROUNDING).contains(&value) {
        return Err(ValidationError::Probability { field: name.to_owned(), value });
    }
    Ok(())
}
