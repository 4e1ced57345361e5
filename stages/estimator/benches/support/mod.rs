//! What the estimator's benches share.

use recrawl_common::StateStore;
use recrawl_estimator::estimate::EstimatorState;

/// A copy of the 4 partitions of `state`, for an iteration to change.
pub fn clone_store(state: &StateStore<EstimatorState>) -> StateStore<EstimatorState> {
    let mut copy = StateStore::default();
    for partition in 0..4 {
        copy.insert_partition(
            partition,
            state.partition(partition).map(|(k, v)| (k.to_owned(), v.clone())).collect(),
        );
    }
    copy
}
