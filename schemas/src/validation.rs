//! Why a record holds what no stage writes: the error of every [`Message::validate`]
//! (messages and the stages' changelog states). Its text names the field and is the
//! reason a dead letter carries, so a variant's words are part of what operators read.
//!
//! [`Message::validate`]: crate::Message::validate

use thiserror::Error;

use crate::{UrlError, UtcTime};

/// A field out of its bounds ([`crate::messages::bounds`]), or fields that contradict
/// each other.
#[derive(Debug, PartialEq, Error)]
pub enum ValidationError {
    #[error("{field} is {bytes} bytes, more than {max}")]
    TooLong { field: String, bytes: usize, max: usize },
    /// One header of an exchange, named, whose value is too long.
    #[error("{field} {name:?} is {bytes} bytes, more than {max}")]
    HeaderTooLong { field: String, name: String, bytes: usize, max: usize },
    /// One side's headers of an exchange, together.
    #[error("{field} hold {bytes} bytes, more than {max}")]
    HeadersTooLarge { field: String, bytes: usize, max: usize },
    #[error("{count} {field}, more than {max}")]
    TooMany { field: String, count: usize, max: usize },
    #[error("{field} holds {value}, more than {max}")]
    Tally { field: String, value: u64, max: u64 },
    #[error("period {period} is beyond {max}")]
    Period { period: u64, max: u64 },
    #[error("partition {partition} is not in [0, {max}]")]
    Partition { partition: i32, max: i32 },
    #[error("{field} is empty")]
    Empty { field: String },
    /// A page filed under another host than its URL's.
    #[error("{field} is {host:?}, the host of {url_field} is {url_host:?}")]
    HostMismatch { field: String, host: String, url_field: String, url_host: String },
    /// A page whose site is not its host's.
    #[error("{field} is {site:?}, the site of {host:?} is {host_site:?}")]
    SiteMismatch { field: String, site: String, host: String, host_site: String },
    #[error("{field}: {source}")]
    Url { field: String, source: UrlError },
    #[error("{field} carries a user name or password")]
    Credentials { field: String },
    /// An instant carried twice, as RFC 3339 and as Unix ms, that are not the same.
    #[error("{field} {at} and {field}_ms {ms} are not the same instant")]
    Instant { field: String, at: UtcTime, ms: i64 },
    #[error("{field} {ms} is not a Unix time in milliseconds in [0, {max}]")]
    UnixTime { field: String, ms: i64, max: i64 },
    #[error("{field} is {value}, not a finite number")]
    NotFinite { field: String, value: f64 },
    #[error("{field} is {value}, not a finite number ≥ 0")]
    NotNonNegative { field: String, value: f64 },
    /// A rate or interval kept as `f32` (printed as one).
    #[error("{field} is {value}, not a number ≥ 0")]
    Negative { field: String, value: f32 },
    #[error("{field} {value} is negative")]
    NegativeOffset { field: String, value: i64 },
    #[error("{field} is {value}, not a duration in [0, {max}] ms")]
    Duration { field: String, value: f64, max: f64 },
    #[error("{field} is {value}, more than {max} bytes")]
    Size { field: String, value: u64, max: u64 },
    #[error("{field} is {value}, not a probability in [0, 1]")]
    Probability { field: String, value: f64 },
    #[error("{field} is {bin}, not a fine bin below {bins}")]
    FineBin { field: String, bin: u8, bins: usize },
    /// A part of an exchange that an HTTP message's line cannot hold.
    #[error("exchange: {part} holds a line break or NUL")]
    LineBreak { part: &'static str },
    #[error("{field} {value:?} is not an IP address")]
    NotAnIp { field: String, value: String },
    #[error("{field} {value:?} is not a file name")]
    NotAFileName { field: String, value: String },
    #[error("last_request.outcome {outcome} does not agree with downloaded {downloaded}")]
    OutcomeDisagrees { outcome: &'static str, downloaded: bool },
    /// Fields that contradict each other; the text says which.
    #[error("{0}")]
    Contradiction(&'static str),
}
