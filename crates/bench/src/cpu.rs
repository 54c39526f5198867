//! Where the CPU goes: user+system time of the processes under test, read from /proc, so a
//! throughput figure can say which component limits it (on a 2-core machine everything shares
//! the same cores).

use serde::Serialize;

/// CPU seconds used so far, per component.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CpuTimes {
    /// The server process.
    pub server: f64,
    /// The server's children (the central runner's MCP servers, e.g. the fixture).
    pub mcp_servers: f64,
    /// Every PostgreSQL process on the machine (the benchmark's cluster is private).
    pub postgres: f64,
    /// Device runner processes (`switchyard-mcp-runner`) and their children.
    pub device_runners: f64,
    /// The driver itself (its client load).
    pub driver: f64,
}

impl CpuTimes {
    /// `self - earlier`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            server: self.server - earlier.server,
            mcp_servers: self.mcp_servers - earlier.mcp_servers,
            postgres: self.postgres - earlier.postgres,
            device_runners: self.device_runners - earlier.device_runners,
            driver: self.driver - earlier.driver,
        }
    }

    /// Each component divided by `n` (e.g. per call), in milliseconds.
    pub fn per_ms(&self, n: f64) -> CpuTimes {
        let per = |s: f64| if n > 0.0 { s * 1000.0 / n } else { 0.0 };
        CpuTimes {
            server: per(self.server),
            mcp_servers: per(self.mcp_servers),
            postgres: per(self.postgres),
            device_runners: per(self.device_runners),
            driver: per(self.driver),
        }
    }
}

/// One process as /proc shows it.
struct Proc {
    pid: u32,
    ppid: u32,
    comm: String,
    seconds: f64,
}

fn ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map(|t| t as f64)
        .unwrap_or(100.0)
}

fn processes() -> Vec<Proc> {
    let hz = ticks_per_second();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // comm is in parentheses and may contain spaces: split after the last ')'.
        let (head, tail) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_owned();
        let fields: Vec<&str> = tail.split_whitespace().collect();
        // After ')': state ppid ... utime is field 14 overall (index 11 here), stime 15.
        let ppid = fields.get(1)?.parse().ok()?;
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some(Proc {
            pid,
            ppid,
            comm,
            seconds: (utime + stime) / hz,
        })
    })
    .collect()
}

/// The CPU time used so far by the server `server_pid` (and its children), PostgreSQL, device
/// runners and this process.
pub fn sample(server_pid: Option<u32>) -> CpuTimes {
    let all = processes();
    let own = std::process::id();
    let mut times = CpuTimes::default();
    let runners: Vec<u32> = all
        .iter()
        .filter(|p| p.comm.starts_with("switchyard-mcp"))
        .map(|p| p.pid)
        .collect();
    for p in &all {
        if Some(p.pid) == server_pid {
            times.server += p.seconds;
        } else if Some(p.ppid) == server_pid {
            times.mcp_servers += p.seconds;
        } else if p.comm == "postgres" {
            times.postgres += p.seconds;
        } else if runners.contains(&p.pid) || runners.contains(&p.ppid) {
            times.device_runners += p.seconds;
        } else if p.pid == own {
            times.driver += p.seconds;
        }
    }
    times
}
