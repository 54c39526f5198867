//! `switchyard-chaos`: the chaos suite. Builds a stack per case on a fresh database, injects
//! the case's fault at random moments, and checks the invariants after every round; prints a
//! summary table and writes `target/chaos/results.json`. Normally started by
//! `scripts/chaos.sh`. Loopback only; every loop is bounded, and the run stops by itself.
//!
//! Exit codes: 0 every invariant held, 1 a run failed or an invariant was violated, 2 bad usage.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use switchyard_bench::chaos::pgctl::PgControl;
use switchyard_bench::chaos::{Case, ChaosConfig, run_case, summary_table};
use switchyard_bench::rng::Rng;
use switchyard_bench::stack::note;
use switchyard_bench::{Error, limits};
use switchyard_testkit::bins::Binaries;

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "switchyard-chaos", about = "Switchyard's chaos suite")]
struct Args {
    /// PostgreSQL URL whose role may create databases (each case gets a fresh one).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// The cluster's data directory, so `pg-restart` can restart it (skipped without).
    #[arg(long)]
    pg_data: Option<PathBuf>,
    /// The directory holding `pg_ctl`.
    #[arg(long, requires = "pg_data")]
    pg_bin: Option<PathBuf>,
    /// Where the binaries under test are [default: beside this binary].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Cases to run [default: all].
    #[arg(long = "case", value_enum)]
    cases: Vec<Case>,
    /// Rounds (faults) per case.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Calls per round.
    #[arg(long, default_value_t = 40)]
    calls: usize,
    /// Calls per second while a round runs.
    #[arg(long, default_value_t = 40.0)]
    rate: f64,
    /// Random seed [default: from the clock; printed].
    #[arg(long)]
    seed: Option<u64>,
    /// Scratch directory.
    #[arg(long, default_value = "target/chaos/work")]
    work_dir: PathBuf,
    /// Where to write the results.
    #[arg(long, default_value = "target/chaos/results.json")]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    limits::raise_open_files();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("switchyard-chaos: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("switchyard-chaos: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<bool, Error> {
    let bin_dir = match args.bin_dir {
        Some(dir) => dir,
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
            .ok_or_else(|| {
                Error::Setup("cannot tell where this binary is; pass --bin-dir".into())
            })?,
    };
    let seed = args.seed.unwrap_or_else(Rng::clock_seed);
    let pg = args.pg_data.map(|datadir| PgControl {
        bindir: args.pg_bin.unwrap_or_default(),
        datadir,
    });
    let config = ChaosConfig {
        admin_url: args.database_url,
        bins: Binaries::in_dir(&bin_dir)?,
        work_dir: args.work_dir,
        rounds: args.rounds,
        calls_per_round: args.calls,
        rate: args.rate,
        seed,
        pg,
    };
    let cases = if args.cases.is_empty() {
        Case::ALL.to_vec()
    } else {
        args.cases
    };
    note(&format!(
        "chaos: seed {seed}, {} rounds per case, {} calls per round at {}/s",
        config.rounds, config.calls_per_round, config.rate
    ));
    let mut rng = Rng::new(seed);
    let mut reports = Vec::new();
    for case in cases {
        note(&format!("case {}", case.name()));
        reports.push(run_case(case, &config, &mut rng).await?);
    }
    let clean = reports.iter().all(|r| r.clean() || r.skipped.is_some());
    let json = serde_json::json!({ "seed": seed, "rounds": config.rounds, "calls_per_round": config.calls_per_round, "rate": config.rate, "cases": reports });
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)
            .map_err(Error::io(format!("creating {}", parent.display())))?;
    }
    let text = serde_json::to_string_pretty(&json).map_err(|e| Error::Setup(e.to_string()))?;
    std::fs::write(&args.out, text + "\n")
        .map_err(Error::io(format!("writing {}", args.out.display())))?;
    println!("{}", summary_table(&reports));
    println!("seed {seed}; results: {}", args.out.display());
    Ok(clean)
}
