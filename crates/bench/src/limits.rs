//! Process limits: thousands of concurrent long-polls need as many file descriptors, in the
//! driver and in the server it starts (children inherit the limit).

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Raises the soft open-files limit to the hard one; returns the new soft limit.
pub fn raise_open_files() -> u64 {
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

/// The soft open-files limit now.
pub fn open_files() -> u64 {
    getrlimit(Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(0)
}

/// Whether `count` idle runners can each keep their runner channel open within the open-files
/// limit, in the driver and in the server it started.
pub fn fits_runner_channels(count: usize) -> bool {
    open_files() >= count as u64 + 1024
}
