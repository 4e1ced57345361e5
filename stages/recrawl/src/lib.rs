//! The `recrawl` launcher and admin tool: the demo, topic administration, `tail`, `dlq`, and
//! the four stages runnable as subcommands. The library part is shared with the
//! end-to-end tests.

pub mod demo;
pub mod dlq;
pub mod observe;
pub mod sim;
pub mod tail;
