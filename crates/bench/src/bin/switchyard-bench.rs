//! `switchyard-bench`: runs the benchmark on a fresh database and writes
//! `target/bench/results.json` plus a table on stdout. Normally started by `scripts/bench.sh`,
//! which builds in release mode and provides a private, durable PostgreSQL.
//!
//! Exit codes: 0 the run finished (whether or not every target was met — see the table),
//! 1 the run failed, 2 bad usage.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use switchyard_bench::bench::{self, Mode, Plan};
use switchyard_bench::stack::{fresh_database, note};
use switchyard_bench::{Error, limits};
use switchyard_testkit::bins::Binaries;

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "switchyard-bench", about = "Switchyard's benchmark driver")]
struct Args {
    /// PostgreSQL URL: the (empty) database to use, or the server to create `--create-database` on.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Create this database (dropping a leftover one) on the server and use it.
    #[arg(long)]
    create_database: Option<String>,
    /// Where switchyard-server, switchyard-mcp-runner and switchyard-fixture are [default: beside this binary].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where to write the results.
    #[arg(long, default_value = "target/bench/results.json")]
    out: PathBuf,
    /// Scratch directory for logs and outboxes.
    #[arg(long, default_value = "target/bench/work")]
    work_dir: PathBuf,
    /// A reduced run (under two minutes).
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// A few seconds: checks that everything runs and the JSON is written.
    #[arg(long)]
    smoke: bool,
    /// The soak's length in seconds [default: 600 full, 24 quick, 3 smoke].
    #[arg(long)]
    soak_seconds: Option<u64>,
    /// Only measure idle scale with this many runners, print it as JSON and stop (for
    /// investigating memory; writes no results file).
    #[arg(long, value_name = "RUNNERS")]
    idle_only: Option<usize>,
    /// Only measure closed-loop throughput (with its cost per call), print it as JSON and stop.
    #[arg(long, conflicts_with = "idle_only")]
    throughput_only: bool,
    /// The soak's rate in calls per second [default: 500, or 60% of the measured throughput
    /// when that is lower].
    #[arg(long)]
    soak_rate: Option<f64>,
    /// Only run the soak (at --soak-rate, default 500/s, for --soak-seconds), print it as
    /// JSON and stop.
    #[arg(long, conflicts_with_all = ["idle_only", "throughput_only"])]
    soak_only: bool,
    /// Only measure added latency (the direct baseline, central, device), print it as JSON and
    /// stop.
    #[arg(long, conflicts_with_all = ["idle_only", "throughput_only", "soak_only"])]
    latency_only: bool,
    /// With --latency-only: also measure device placement through a second paired device
    /// whose runner is this `switchyard-mcp-runner` binary (another build), in turn with the
    /// others; reported as `compared_runner_added_latency_ms`.
    #[arg(long, value_name = "BINARY", requires = "latency_only")]
    compare_runner: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let open_files = limits::raise_open_files();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("switchyard-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, open_files)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args, open_files: u64) -> Result<(), Error> {
    let mode = if args.smoke {
        Mode::Smoke
    } else if args.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    let mut plan = Plan::for_mode(mode, args.soak_seconds.map(Duration::from_secs));
    if let Some(rate) = args.soak_rate {
        plan.soak_rate = rate;
    }
    if !limits::fits_runner_channels(plan.idle_count) {
        note(&format!(
            "only {open_files} open files allowed: not all of the {} idle runners' channels can be open at once",
            plan.idle_count
        ));
    }
    let bin_dir = match args.bin_dir {
        Some(dir) => dir,
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
            .ok_or_else(|| {
                Error::Setup("cannot tell where this binary is; pass --bin-dir".into())
            })?,
    };
    let bins = Binaries::in_dir(&bin_dir)?;
    let database_url = match &args.create_database {
        Some(name) => fresh_database(&args.database_url, name).await?,
        None => args.database_url.clone(),
    };
    let _ = std::fs::remove_dir_all(&args.work_dir);
    let work_dir =
        std::path::absolute(&args.work_dir).map_err(Error::io("resolving --work-dir"))?;
    if args.throughput_only {
        return print_json(&bench::throughput_only(&plan, bins, &database_url, &work_dir).await?);
    }
    if args.latency_only {
        return print_json(
            &bench::latency_only(
                &plan,
                bins,
                &database_url,
                &work_dir,
                args.compare_runner.as_deref(),
            )
            .await?,
        );
    }
    if args.soak_only {
        return print_json(&bench::soak_only(&plan, bins, &database_url, &work_dir).await?);
    }
    if let Some(count) = args.idle_only {
        return print_json(&bench::idle_only(&plan, count, bins, &database_url, &work_dir).await?);
    }
    let results = bench::run(&plan, bins, &database_url, &work_dir).await?;
    let mut json = serde_json::to_value(&results)
        .map_err(|e| Error::Setup(format!("serializing the results: {e}")))?;
    json["targets"] =
        serde_json::to_value(results.checks()).map_err(|e| Error::Setup(e.to_string()))?;
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)
            .map_err(Error::io(format!("creating {}", parent.display())))?;
    }
    let text = serde_json::to_string_pretty(&json).map_err(|e| Error::Setup(e.to_string()))?;
    std::fs::write(&args.out, text + "\n")
        .map_err(Error::io(format!("writing {}", args.out.display())))?;
    println!("{}", results.table());
    println!("results: {}", args.out.display());
    Ok(())
}

/// Prints one partial measurement as JSON (the `--*-only` modes).
fn print_json(value: &impl serde::Serialize) -> Result<(), Error> {
    let json = serde_json::to_string_pretty(value).map_err(|e| Error::Setup(e.to_string()))?;
    println!("{json}");
    Ok(())
}
