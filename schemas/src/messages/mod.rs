//! One type per Kafka message. Field documentation here becomes the `description` of the
//! generated JSON Schemas, so it is written for the analysts who read those.
//!
//! Internal messages (bincode) are positional: never reorder their fields, and bump their
//! [`Message::VERSION`](crate::Message::VERSION) on any change. The messages people read (JSON) are at schema 2;
//! The private module `v1` keeps schema 1's shapes so that records already on a topic stay readable.
//! No `skip_serializing_if` or `flatten`: every field is always written.

mod announcement;
pub(crate) mod change;
mod distribution;
pub(crate) mod estimate;
pub(crate) mod fetch;
mod links;
mod page;
mod pick;
mod trust;

pub mod bounds;
#[cfg(any(test, feature = "samples"))]
pub mod samples;

pub use announcement::*;
pub use change::*;
pub use distribution::*;
pub use estimate::*;
pub use fetch::*;
pub use links::*;
pub use page::*;
pub use pick::*;
pub use trust::*;
