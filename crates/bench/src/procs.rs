//! What a process costs in memory. The processes themselves (server, device runner) are
//! `switchyard-testkit`'s.

/// The resident set size of a process (VmRSS in /proc/PID/status), in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
