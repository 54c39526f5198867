//! The benchmark driver and the core chaos cases, with the real binaries (server, device
//! runner, fixture, `switchyard-bench`).

mod chaos;
mod harness;
mod smoke;
