//! Instants a wait away, whatever the wait: waits come from servers, topics and flags.

use std::time::Duration;

/// How far [`later`] looks at most: beyond any wait that means more than "not now".
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// `wait` after `at`, at most [`FAR_FUTURE`] after it. Waits come from servers
/// (Crawl-delay, Retry-After), topics (deadlines) and flags, and `Instant + Duration`
/// panics past what the clock can represent, so every such sum goes through here.
pub(crate) fn later(at: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    // Clock readings count from boot, so 30 years on is representable; were it not,
    // `at` is the one time known to be.
    at.checked_add(wait.min(FAR_FUTURE)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_adds_what_it_can_and_stops_far_ahead() {
        let now = tokio::time::Instant::now();
        assert_eq!(later(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        assert_eq!(later(now, Duration::MAX), now + FAR_FUTURE);
        assert_eq!(later(now, Duration::from_secs(u64::MAX / 2)), now + FAR_FUTURE);
    }
}
