//! recrawl's research tooling, kept out of the stage binaries: the papers' experiments on
//! the simulated web (`paper`), the change-degree criteria experiments (`criteria`,
//! `report`), the estimator's evaluation protocol and synthetic histories (`evaluate`), and
//! the SVG charts they draw (`chart`), and the simulator's worlds as change histories
//! (`histories`). Each runs the stages' own code. `changes` reports on a
//! run's change events as an analyst would read them.

pub mod changes;
pub mod chart;
pub mod criteria;
pub mod evaluate;
pub mod histories;
pub mod paper;
pub mod report;
