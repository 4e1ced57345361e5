//! The back-off between retries.

use std::time::Duration;

pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(200);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Doubling back-off between retries, from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`].
#[derive(Debug)]
pub(super) struct Backoff(Duration);

impl Backoff {
    pub(super) fn new() -> Self {
        Self(FIRST_BACKOFF)
    }

    pub(super) fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = self.0.saturating_mul(2).min(MAX_BACKOFF);
        wait
    }
}
