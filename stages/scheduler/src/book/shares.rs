//! A partition's shares of its hosts' evidence: the day profile its pages' comparisons
//! taught and the tally of their claims' judgements. They ride on the changelog records of
//! the host's tracked URLs in the partition, so a share lives as long as one of them does,
//! and the hosts' sums ([`Hosts`]) are the sums of the owned partitions' shares.

use recrawl_model::claims::ClaimTally;
use recrawl_model::day::DayProfile;

use super::Book;
use crate::hosts::Hosts;

/// A partition's share of one host's evidence.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct HostShare {
    pub(super) day: DayProfile,
    pub(super) claims: ClaimTally,
    /// The host's tracked URLs in the partition: their changelog records carry the share,
    /// so it goes with the last of them.
    pub(super) tracked: u32,
}

impl Book {
    /// This partition's share of `host`'s day profile.
    pub(super) fn host_day_mut(&mut self, host: u32) -> &mut DayProfile {
        &mut self.host_shares.entry(host).or_default().day
    }

    /// Counts one more tracked URL of `host`.
    pub(super) fn track(&mut self, host: u32) {
        let share = self.host_shares.entry(host).or_default();
        share.tracked = share.tracked.saturating_add(1);
    }

    /// Counts one tracked URL of `host` fewer; with the last, the partition's share of the
    /// host's evidence leaves the hosts' sums, as a restore would leave it out.
    pub(super) fn untrack(&mut self, hosts: &mut Hosts, host: u32) {
        let Some(share) = self.host_shares.get_mut(&host) else { return };
        share.tracked = share.tracked.saturating_sub(1);
        if share.tracked > 0 {
            return;
        }
        let Some(share) = self.host_shares.remove(&host) else { return };
        let stats = &mut hosts.stats[host as usize];
        stats.day.remove(&share.day);
        stats.claims.remove(&share.claims);
        if share.claims.total() > 0 {
            stats.trust_unpublished = true;
            self.dropped_claims.push(host);
        }
    }

    /// Hosts whose judged claims left the partition since the last call: their records on
    /// `host-trust` are to be replaced by ones of no claims.
    pub fn take_dropped_claims(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.dropped_claims)
    }

    /// Forgets the partition's share of the host counts, day profiles and claim tallies (on
    /// revocation).
    pub fn release(&self, hosts: &mut Hosts) {
        for page in self.pages.iter().filter(|page| !page.is_gone()) {
            let stats = &mut hosts.stats[page.host as usize];
            stats.urls = stats.urls.saturating_sub(1);
        }
        for (&host, share) in &self.host_shares {
            let stats = &mut hosts.stats[host as usize];
            stats.day.remove(&share.day);
            stats.claims.remove(&share.claims);
            stats.trust_unpublished |= share.claims.total() > 0;
        }
    }
}
