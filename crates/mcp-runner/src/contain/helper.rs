//! The helper modes, run in the processes between the runner and a stdio server: *start*
//! (becomes the server) and *watch* (kills the server's group when the runner is gone). See
//! the [module documentation](super) for how they fit together.

use super::{SELF_EXE, WATCH_MODE, privileges, scratch};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{Pid, getppid};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// Exit code of the start mode when the server could not be `exec`ed (as a shell reports a
/// command it cannot run).
const CANNOT_EXEC: u8 = 127;
/// Exit code of the start mode when the containment could not be set up (nothing was run).
const CANNOT_CONTAIN: u8 = 126;

/// The start mode: `FD PROGRAM ARGS…`. Sets up the containment and `exec`s `PROGRAM`; returns
/// only on failure, after saying why on stderr (which the runner keeps as the server's).
pub(super) fn start(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let (Some(fd), Some(program)) = (args.next(), args.next()) else {
        eprintln!(
            "switchyard containment: usage: {} FD PROGRAM [ARGS…]",
            super::START_MODE
        );
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

/// The watch mode: `GROUP DIR`, with the liveness pipe as stdin. Waits until either the
/// runner is gone (end-of-file on the pipe: then it kills group `GROUP` and removes scratch
/// directory `DIR`) or the server, its parent, is gone while the runner lives (then it only
/// exits: the runner closes the session and kills what is left of the group).
pub(super) fn watch(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let group = args
        .next()
        .and_then(|group| group.to_str()?.parse::<i32>().ok())
        .filter(|group| *group > 1);
    let (Some(group), Some(scratch)) = (group, args.next().map(PathBuf::from)) else {
        eprintln!("switchyard containment: usage: {WATCH_MODE} GROUP DIR");
        return ExitCode::FAILURE;
    };
    let server_gone = match parent_death_signal() {
        Ok(server_gone) => server_gone,
        Err(error) => {
            eprintln!("switchyard containment: cannot watch the MCP server: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Out of the group, so that killing it spares this process until the directory is gone.
    // A failure leaves the watch in the group, which still kills the group.
    let _ = nix::unistd::setsid();
    let _ = nix::sys::prctl::set_dumpable(false);
    let pipe = std::io::stdin();
    let runner_gone = if getppid().as_raw() == group {
        match wait_for_either(pipe.as_fd(), server_gone.as_fd()) {
            Ended::Runner => true,
            Ended::Server => runner_gone_within(pipe.as_fd(), SERVER_END_GRACE),
        }
    } else {
        // The server ended before the tie to it was made.
        runner_gone_within(pipe.as_fd(), SERVER_END_GRACE)
    };
    if runner_gone {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        scratch::remove(&scratch);
    }
    ExitCode::SUCCESS
}

/// How long the watch of a server that has ended still looks for the runner's end. A runner
/// that dies ends its server too (its stdin closes), and the kernel closes the runner's pipes
/// one after the other: the liveness pipe's end-of-file may trail a moment behind.
const SERVER_END_GRACE: Duration = Duration::from_millis(500);

/// Which side ended first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The runner: end-of-file (or an error) on the liveness pipe.
    Runner,
    /// The server, this process's parent (its death signal arrived).
    Server,
}

/// Blocks SIGHUP and asks for it when the parent (the server) dies; the returned descriptor
/// becomes readable then.
fn parent_death_signal() -> nix::Result<SignalFd> {
    let mut hangup = SigSet::empty();
    hangup.add(Signal::SIGHUP);
    hangup.thread_block()?;
    let server_gone = SignalFd::with_flags(&hangup, SfdFlags::SFD_CLOEXEC)?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGHUP)?;
    Ok(server_gone)
}

/// Waits until the liveness `pipe` ends or `server_gone` is readable.
fn wait_for_either(pipe: BorrowedFd<'_>, server_gone: BorrowedFd<'_>) -> Ended {
    loop {
        let mut fds = [
            PollFd::new(pipe, PollFlags::POLLIN),
            PollFd::new(server_gone, PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            // Unable to watch: the runner may be gone, and a group left running is worse.
            Err(_) => return Ended::Runner,
        }
        // Nothing is ever written to the pipe: ready means its writer is gone.
        if fds[0].any().unwrap_or(false) {
            return Ended::Runner;
        }
        if fds[1].any().unwrap_or(false) {
            return Ended::Server;
        }
    }
}

/// Whether the liveness `pipe` ends within `grace`.
fn runner_gone_within(pipe: BorrowedFd<'_>, grace: Duration) -> bool {
    let timeout = PollTimeout::try_from(grace).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(pipe, PollFlags::POLLIN)];
    matches!(poll(&mut fds, timeout), Ok(ready) if ready > 0)
}
