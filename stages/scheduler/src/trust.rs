//! What the scheduler publishes on `host-trust` (`docs/algorithms/sitemaps.md` §3): each
//! owned partition's share of a host's judged claims, with the standing the instance
//! holds, whenever either changes.

use std::collections::BTreeMap;

use recrawl_model::claims::{ClaimTally, ClaimTrust};
use recrawl_schemas::{HostTrust, UtcTime};

use crate::book::Book;
use crate::hosts::Hosts;

/// Most `host-trust` records one period publishes; hosts past it wait for the next period.
pub(crate) const MAX_TRUST_RECORDS_PER_PERIOD: usize = 10_000;

/// Which hosts' records are due.
#[derive(Debug, Default)]
pub(crate) struct TrustPublisher {
    /// The host the next records start from, so none waits for ever.
    cursor: usize,
}

/// The record of `host`'s `share` of claims in `partition`, with the standing `hosts` hold.
fn record(
    hosts: &Hosts,
    host: u32,
    partition: i32,
    share: ClaimTally,
    period: u64,
    published_at_ms: i64,
) -> HostTrust {
    HostTrust {
        host: hosts.name(host).to_owned(),
        partition,
        period,
        confirmed: u64::from(share.confirmed),
        agreed: u64::from(share.agreed),
        refuted: u64::from(share.refuted),
        silent: u64::from(share.silent),
        trust: hosts.stats.get(host as usize).map_or(ClaimTrust::Unknown, |stats| stats.claims.trust()),
        published_at: UtcTime::from_ms(published_at_ms),
        published_at_ms,
    }
}

/// Records of no claims for the shares gone with their host's last tracked URL since the
/// last call: few, and outside any limit, as each must replace what the topic holds. The
/// stage sends them with the batch that dropped them, whose input offsets wait for them:
/// left to the next tick, a revocation or a crash before it would leave the old record.
pub(crate) fn dropped_records(
    hosts: &Hosts,
    books: &mut BTreeMap<i32, Book>,
    period: u64,
    published_at_ms: i64,
) -> Vec<HostTrust> {
    let mut records = Vec::new();
    for (&partition, book) in books.iter_mut() {
        for host in book.take_dropped_claims() {
            if book.host_claims(host).is_none() {
                records.push(record(hosts, host, partition, ClaimTally::default(), period, published_at_ms));
            }
        }
    }
    records
}

impl TrustPublisher {
    /// The `host-trust` records due: each owned partition's share of the claims of every
    /// host whose shares or owned partitions changed since its last records, with the
    /// standing this instance holds; past `max_records`, the hosts left wait for the next
    /// call (a host's records are never split).
    pub(crate) fn records(
        &mut self,
        hosts: &mut Hosts,
        books: &mut BTreeMap<i32, Book>,
        period: u64,
        published_at_ms: i64,
        max_records: usize,
    ) -> Vec<HostTrust> {
        let mut records = dropped_records(hosts, books, period, published_at_ms);
        let count = hosts.len();
        let mut next = self.cursor;
        for offset in 0..count {
            if records.len() >= max_records {
                break;
            }
            let Some(host) = self.cursor.saturating_add(offset).checked_rem(count) else { break };
            next = host.saturating_add(1);
            let Some(stats) = hosts.stats.get_mut(host) else { continue };
            if !std::mem::take(&mut stats.trust_unpublished) {
                continue;
            }
            let id = host as u32;
            for (&partition, book) in books.iter() {
                if let Some(share) = book.host_claims(id) {
                    records.push(record(hosts, id, partition, share, period, published_at_ms));
                }
            }
        }
        self.cursor = next;
        records
    }
}
