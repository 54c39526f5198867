//! The helper modes, run in the processes between the runner and a stdio server: *start*
//! (becomes the server) and *watch* (kills the server's group when the runner is gone). See
//! the [module documentation](super) for how they fit together.

use super::{SELF_EXE, WATCH_MODE, privileges, scratch};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getppid};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

/// Exit code of the start mode when the server could not be `exec`ed (as a shell reports a
/// command it cannot run).
const CANNOT_EXEC: u8 = 127;
/// Exit code of the start mode when the containment could not be set up (nothing was run).
const CANNOT_CONTAIN: u8 = 126;

/// The start mode: `FD PROGRAM ARGS…`. Sets up the containment and `exec`s `PROGRAM`; returns
/// only on failure, after saying why on stderr (which the runner keeps as the server's).
pub(super) fn start(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let (Some(fd), Some(program)) = (args.next(), args.next()) else {
        eprintln!("switchyard containment: usage: {} FD PROGRAM [ARGS…]", super::START_MODE);
        return ExitCode::from(CANNOT_CONTAIN);
    };
    if let Err(message) = contain(&fd) {
        eprintln!("switchyard containment: {message}; the MCP server was not started");
        return ExitCode::from(CANNOT_CONTAIN);
    }
    let error = Command::new(&program).args(args).exec();
    eprintln!(
        "switchyard containment: cannot start MCP server `{}`: {error}",
        program.display()
    );
    ExitCode::from(CANNOT_EXEC)
}

/// Takes the liveness pipe from inherited descriptor `fd`, gives up every privilege and starts
/// the watch of this process's group.
fn contain(fd: &OsString) -> Result<(), String> {
    let fd: RawFd = fd
        .to_str()
        .and_then(|fd| fd.parse().ok())
        .filter(|fd| *fd > 2)
        .ok_or_else(|| format!("{} is not a descriptor number", fd.display()))?;
    let liveness = reopen_pipe(fd)?;
    // The server must not hold the pipe: only the watch does.
    nix::unistd::close(fd).map_err(|error| format!("cannot close descriptor {fd}: {error}"))?;
    privileges::drop_all()?;
    let scratch = std::env::current_dir()
        .map_err(|error| format!("cannot read the working directory: {error}"))?;
    // Not waited for here: it outlives this program, as the child of the server it becomes.
    Command::new(SELF_EXE)
        .arg(WATCH_MODE)
        .arg(std::process::id().to_string())
        .arg(scratch)
        .env_clear()
        .stdin(liveness)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start the watch: {error}"))?;
    Ok(())
}

/// A new, blocking, close-on-exec descriptor for the pipe at inherited descriptor `fd`,
/// opened through `/proc/self/fd` (which needs no `unsafe`, unlike adopting `fd` itself).
fn reopen_pipe(fd: RawFd) -> Result<File, String> {
    let path = format!("/proc/self/fd/{fd}");
    // Non-blocking, or opening a pipe whose writer is already gone would wait for one forever.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(&path)
        .map_err(|error| format!("cannot open the liveness pipe {path}: {error}"))?;
    let is_pipe = file
        .metadata()
        .is_ok_and(|metadata| metadata.file_type().is_fifo());
    if !is_pipe {
        return Err(format!("descriptor {fd} is not the liveness pipe"));
    }
    let flags = fcntl(&file, FcntlArg::F_GETFL)
        .map_err(|error| format!("cannot read the liveness pipe's flags: {error}"))?;
    let blocking = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    fcntl(&file, FcntlArg::F_SETFL(blocking))
        .map_err(|error| format!("cannot make the liveness pipe blocking: {error}"))?;
    Ok(file)
}

/// The watch mode: `GROUP DIR`, with the liveness pipe as stdin. Returns when the server is
/// gone (this process is then killed with it) or after killing group `GROUP` and removing
/// scratch directory `DIR` because the runner is gone.
pub(super) fn watch(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let group = args
        .next()
        .and_then(|group| group.to_str()?.parse::<i32>().ok())
        .filter(|group| *group > 1);
    let (Some(group), Some(scratch)) = (group, args.next().map(PathBuf::from)) else {
        eprintln!("switchyard containment: usage: {WATCH_MODE} GROUP DIR");
        return ExitCode::FAILURE;
    };
    // Die with the server, the parent: its group's fate is then the runner's to decide.
    if let Err(error) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        eprintln!("switchyard containment: cannot tie the watch to the MCP server: {error}");
        return ExitCode::FAILURE;
    }
    if getppid().as_raw() != group {
        // The server ended before the tie was made.
        return ExitCode::SUCCESS;
    }
    // Out of the group, so that killing it spares this process until the directory is gone.
    // A failure leaves the watch in the group, which still kills the group.
    let _ = nix::unistd::setsid();
    let _ = nix::sys::prctl::set_dumpable(false);
    wait_for_end_of_file(std::io::stdin().lock());
    // The runner is gone. Killing the server must not kill this process before it is done.
    let _ = nix::sys::prctl::set_pdeathsig(None);
    let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    scratch::remove(&scratch);
    ExitCode::SUCCESS
}

/// Reads `pipe` until its last writer has closed it (or it fails).
fn wait_for_end_of_file(mut pipe: impl Read) {
    let mut buffer = [0_u8; 64];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
