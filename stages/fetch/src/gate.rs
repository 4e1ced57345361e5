//! Each host's politeness gate in the fetch stage: when it may next be asked, as far as
//! this instance knows (its delay, Crawl-delay, a pause a 429 or 503 asked for, and the
//! requests under way).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::clock::later;

/// When a host may next be asked, as far as this instance knows.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostGate {
    pub(crate) last_start: Option<Instant>,
    pub(crate) last_end: Option<Instant>,
    pub(crate) paused_until: Option<Instant>,
    pub(crate) crawl_delay: Option<Duration>,
    /// Requests to the host under way, redirects to it from other hosts' picks included.
    pub(crate) in_flight: usize,
}

impl HostGate {
    fn delay(&self, min_delay: Duration) -> Duration {
        self.crawl_delay.map_or(min_delay, |crawl_delay| crawl_delay.max(min_delay))
    }

    /// The earliest start of the next request.
    pub(crate) fn earliest(&self, now: Instant, min_delay: Duration) -> Instant {
        let delay = self.delay(min_delay);
        [self.last_start.map(|t| later(t, delay)), self.last_end.map(|t| later(t, delay)), self.paused_until]
            .into_iter()
            .flatten()
            .fold(now, Instant::max)
    }

    /// Whether a request may start now: fewer than `connections` under way, and none
    /// ended or paused the host less than its delay ago (a slot booked while a request
    /// was under way could not know its end).
    pub(crate) fn is_free(&self, now: Instant, min_delay: Duration, connections: usize) -> bool {
        let delay = self.delay(min_delay);
        self.in_flight < connections
            && self.last_end.is_none_or(|end| later(end, delay) <= now)
            && self.paused_until.is_none_or(|until| until <= now)
    }

    /// Nothing here constrains a future request any more.
    pub(crate) fn is_spent(&self, now: Instant, min_delay: Duration) -> bool {
        self.in_flight == 0 && self.earliest(now, min_delay) <= now
    }
}

/// A host's gate, held by its task and taken from by redirects to the host.
pub(crate) type SharedGate = Arc<Mutex<HostGate>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A request starts only with a connection free and the delay passed since the last
    /// one ended: a slot booked while another was under way could not know that end.
    #[test]
    fn a_host_is_free_with_a_connection_and_its_delay_since_the_last_end() {
        let now = Instant::now();
        let delay = Duration::from_millis(300);
        let ended = |ago: u64| HostGate {
            last_end: now.checked_sub(Duration::from_millis(ago)),
            ..HostGate::default()
        };
        assert!(HostGate::default().is_free(now, delay, 1));
        assert!(ended(300).is_free(now, delay, 1));
        assert!(!ended(100).is_free(now, delay, 1), "ended 100 ms ago");
        let busy = HostGate { in_flight: 1, ..HostGate::default() };
        assert!(!busy.is_free(now, delay, 1) && busy.is_free(now, delay, 2));
        let paused = HostGate { paused_until: Some(later(now, delay)), ..HostGate::default() };
        assert!(!paused.is_free(now, delay, 1));
    }
}
