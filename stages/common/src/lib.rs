//! The runtime every recrawl stage uses: configuration (flags and env), the Kafka clients,
//! the at-least-once processing loop with partitioned state restored from a changelog,
//! dead-lettering, Prometheus metrics, the health server, tracing and clean shutdown.
//! Stages provide a [`runtime::Stage`]; everything Kafka-shaped lives here.
// Records come from topics and sizes from brokers: no panicking shortcut on them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod admin;
pub mod config;
pub mod descriptors;
pub mod http;
pub mod kafka;
pub mod links;
pub mod metrics;
pub mod runtime;
pub mod service;
pub mod state;
pub mod tail;

pub use config::{KafkaArgs, ServiceArgs};
pub use metrics::StageMetrics;
pub use runtime::{InputRecord, OutputRecord, Stage, StageContext};
pub use state::StateStore;

/// An HTTP date (RFC 9110 §5.6.7, any of its three forms) as Unix ms; `None` for anything
/// else, or a date before 1970.
pub fn http_date_ms(text: &str) -> Option<i64> {
    let time = httpdate::parse_http_date(text).ok()?;
    let since_epoch = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since_epoch.as_millis()).ok()
}

/// Unix ms as an HTTP date (RFC 9110 §5.6.7, the IMF-fixdate form, to the second); `None`
/// before 1970 or from the year 10000, which the form cannot say.
pub fn format_http_date(unix_ms: i64) -> Option<String> {
    // 10000-01-01T00:00:00Z: the formatter panics from there.
    if unix_ms >= 253_402_300_800_000 {
        return None;
    }
    let since_epoch = std::time::Duration::from_millis(u64::try_from(unix_ms).ok()?);
    Some(httpdate::fmt_http_date(std::time::UNIX_EPOCH.checked_add(since_epoch)?))
}

/// Unix time in milliseconds.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_date_reads_back_to_the_second() {
        let at_ms = 1_764_000_000_789;
        let text = format_http_date(at_ms).expect("after 1970");
        assert_eq!(text, "Mon, 24 Nov 2025 16:00:00 GMT");
        assert_eq!(http_date_ms(&text), Some(at_ms - 789));
        assert_eq!(format_http_date(-1), None);
        assert_eq!(format_http_date(253_402_300_799_999).as_deref(), Some("Fri, 31 Dec 9999 23:59:59 GMT"));
        assert_eq!(format_http_date(253_402_300_800_000), None);
        assert_eq!(format_http_date(i64::MAX), None);
        assert_eq!(http_date_ms("yesterday"), None);
    }
}
