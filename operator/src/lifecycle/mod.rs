//! Sleep, wake and auto-delete: when a virtual cluster should be asleep or gone, decided from
//! its spec, what its status remembers and the time, with no I/O.

pub mod decide;
pub mod schedule;
