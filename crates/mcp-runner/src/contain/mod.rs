//! Containment of the stdio MCP servers this process starts: they cannot read this process,
//! they hold no capabilities, they run in a scratch home of their own, and they die with it.
//!
//! - **Unreadable runner.** [`make_process_unreadable`] clears this process's dumpable flag
//!   (`PR_SET_DUMPABLE` 0): `/proc/<pid>/environ`, `mem` and `ptrace` then need
//!   `CAP_SYS_PTRACE`, which a child does not have (next point), even when it runs as the same
//!   user, root included.
//! - **No privileges.** A stdio server is started through a helper mode of a Switchyard binary
//!   (see below), which sets `PR_SET_NO_NEW_PRIVS`, drops every capability from its bounding
//!   set when it may (`CAP_SETPCAP`: a runner started as root) and empties its inheritable,
//!   ambient, permitted and effective sets before the server is `exec`ed. A server started by
//!   root therefore runs as uid 0 with no capability at all; when any bit is left in the
//!   bounding set the server is not started (fail closed). Without `CAP_SETPCAP` there is
//!   nothing to drop.
//! - **Scratch home.** Each stdio session gets a fresh private directory (mode 0700, owned by
//!   the runner's user, in the temp directory) as `HOME` and working directory; it is removed
//!   once the session's process group is gone ([`ScratchDir`]). A relative command is found on
//!   the runner's `PATH` or in the runner's own working directory before the change, so a
//!   connector's *arguments* that name relative paths now resolve in the scratch directory.
//! - **Killed with the runner.** A stdio server leads its own process group (the session's
//!   [`crate::process_group::ProcessGroup`]). Next to it runs a *watch*, a process of the same
//!   helper binary that holds the read end of a pipe whose write end only this process holds
//!   (close-on-exec, so no child ever has it). The kernel closes that write end however this
//!   process ends, SIGKILL included; the watch then sees end-of-file and SIGKILLs the whole
//!   group — the server and everything it started in the group — and removes the scratch
//!   directory. No thread of this process is involved (`PR_SET_PDEATHSIG` on the server itself
//!   would fire when the spawning *thread* exits, and reach the server only, not its group).
//!   The watch lasts as long as the server: when the server ends (its death signal reaches the
//!   watch, its child) while the runner lives, the watch exits and the session's close kills
//!   what is left of the group. A runner that dies also ends its server (stdin closes), so the
//!   watch then still looks for the pipe's end-of-file for a moment before deciding.
//!
//! ## The helper
//!
//! The workspace forbids `unsafe`, so nothing can run between `fork` and `exec` of a server.
//! Instead the session starts a Switchyard binary in a hidden mode, which sets the process up
//! and then `exec`s the server in place, keeping its PID, process group, environment, working
//! directory and standard streams:
//!
//! 1. `HELPER --switchyard-contain FD PROGRAM ARGS…` (the *start* mode, [`helper::start`]):
//!    reopens the inherited pipe end `FD` through `/proc/self/fd` and closes `FD`, drops its
//!    privileges, starts the watch with that pipe as its stdin, and `exec`s `PROGRAM`. A failed
//!    `exec` is reported on stderr (so it appears in the session's error) with exit code 127.
//! 2. `HELPER --switchyard-contain-watch GROUP DIR` (the *watch* mode, [`helper::watch`]): asks
//!    for SIGHUP when its parent (the server) dies (`PR_SET_PDEATHSIG`, read through a
//!    signalfd), leaves the group for a session of its own (so that it survives the group kill
//!    long enough to remove `DIR`), and polls the pipe and the signal.
//!
//! The modes are flags (`--switchyard-contain…`), so a test executable named as the helper by
//! mistake fails on an unknown option instead of running its tests.
//!
//! The server is thus the direct child of this process and the group leader, as if it had been
//! spawned directly; it has one extra child, the watch, which it never waits for.
//!
//! `switchyard-server` and `switchyard-mcp-runner` call [`run_helper_if_asked`] first thing in
//! `main`, which makes their own executable the helper. A program embedding the executor any
//! other way (a test) names a Switchyard binary with [`use_helper_program`].

mod helper;
mod privileges;
mod scratch;

pub(crate) use scratch::ScratchDir;

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// First argument of the start mode.
const START_MODE: &str = "--switchyard-contain";
/// First argument of the watch mode.
const WATCH_MODE: &str = "--switchyard-contain-watch";
/// The running executable, whatever its path on disk is now.
const SELF_EXE: &str = "/proc/self/exe";

/// Whether this executable runs the helper modes ([`run_helper_if_asked`] was called).
static SELF_IS_HELPER: AtomicBool = AtomicBool::new(false);
/// A Switchyard binary named by [`use_helper_program`].
static HELPER_PROGRAM: Mutex<Option<PathBuf>> = Mutex::new(None);
/// The pipe whose end-of-file tells every watch that this process is gone.
static LIVENESS: OnceLock<Result<LivenessPipe, String>> = OnceLock::new();

/// Runs this process as a containment helper when it was started as one (its first argument
/// names a helper mode) and returns its exit code. Otherwise it records that this executable
/// serves as the helper for the stdio servers this process starts, and returns `None`.
///
/// Call it first thing in `main`, before parsing arguments or starting a runtime.
pub fn run_helper_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    let mode = args.next();
    match mode.as_deref().and_then(OsStr::to_str) {
        Some(START_MODE) => Some(helper::start(args)),
        Some(WATCH_MODE) => Some(helper::watch(args)),
        _ => {
            SELF_IS_HELPER.store(true, Ordering::SeqCst);
            None
        }
    }
}

/// Names the Switchyard binary (`switchyard-server` or `switchyard-mcp-runner`) that starts
/// stdio servers for this process, for a process whose own executable does not run the helper
/// modes (a test). It wins over the running executable.
pub fn use_helper_program(program: impl Into<PathBuf>) {
    let program = program.into();
    *HELPER_PROGRAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(program);
}

/// Makes this process unreadable by its children and other processes of its user: clears the
/// dumpable flag, so that `/proc/<pid>/environ` and `ptrace` need `CAP_SYS_PTRACE`.
pub fn make_process_unreadable() -> Result<(), nix::Error> {
    nix::sys::prctl::set_dumpable(false)
}

/// The command that starts the stdio server `command args` contained: through the helper, with
/// exactly `env` plus `HOME` set to `scratch`, `scratch` as its working directory and as the
/// leader of a new process group. Standard streams are left to the caller.
///
/// `command` is resolved here, on the `PATH` of `env` unless it names a path, so that a missing
/// program is an error now rather than a failed handshake.
pub(crate) fn stdio_command(
    command: &str,
    args: &[String],
    env: Vec<(OsString, OsString)>,
    scratch: &ScratchDir,
) -> io::Result<tokio::process::Command> {
    let path_var = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone());
    let program = resolve_program(command, path_var.as_deref())?;
    let helper = helper_program()?;
    let liveness = liveness_fd()?;
    let mut cmd = tokio::process::Command::new(helper);
    cmd.arg(START_MODE)
        .arg(liveness.to_string())
        .arg(program)
        .args(args)
        .env_clear()
        .envs(env)
        .env("HOME", scratch.path())
        .current_dir(scratch.path())
        .process_group(0);
    Ok(cmd)
}

/// The helper binary: the one named by [`use_helper_program`], else the running executable
/// when it runs the helper modes.
fn helper_program() -> io::Result<PathBuf> {
    let named = HELPER_PROGRAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match named {
        Some(program) => Ok(program),
        None if SELF_IS_HELPER.load(Ordering::SeqCst) => Ok(PathBuf::from(SELF_EXE)),
        None => Err(io::Error::other(
            "no containment helper: this program must call \
             switchyard_mcp_runner::contain::run_helper_if_asked in main, or name a Switchyard \
             binary with use_helper_program",
        )),
    }
}

/// Both ends of the liveness pipe, kept open for the life of the process.
struct LivenessPipe {
    /// Inherited by every child (not close-on-exec); the start mode hands it to the watch.
    read: OwnedFd,
    /// Close-on-exec: held by this process alone, closed by the kernel when it ends.
    _write: OwnedFd,
}

/// The descriptor number of the liveness pipe's read end, made on first use.
fn liveness_fd() -> io::Result<RawFd> {
    let pipe = LIVENESS.get_or_init(|| {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|error| format!("cannot make the liveness pipe: {error}"))?;
        fcntl(&read, FcntlArg::F_SETFD(FdFlag::empty()))
            .map_err(|error| format!("cannot make the liveness pipe inheritable: {error}"))?;
        Ok(LivenessPipe {
            read,
            _write: write,
        })
    });
    match pipe {
        Ok(pipe) => Ok(pipe.read.as_raw_fd()),
        Err(message) => Err(io::Error::other(message.clone())),
    }
}

/// The absolute path of the program `command` names, as `execvp` would find it: a name with a
/// slash is a path (relative to this process's working directory), any other is looked up on
/// `path_var`.
fn resolve_program(command: &str, path_var: Option<&OsStr>) -> io::Result<PathBuf> {
    if command.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the command is empty",
        ));
    }
    if command.contains('/') {
        let path = std::path::absolute(command)?;
        check_executable(&path)?;
        return Ok(path);
    }
    std::env::split_paths(path_var.unwrap_or_default())
        .map(|dir| dir.join(command))
        .find(|candidate| check_executable(candidate).is_ok())
        .map(std::path::absolute)
        .unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "not found on the runner's PATH",
            ))
        })
}

/// Whether `path` is a regular file with an execute bit.
fn check_executable(path: &Path) -> io::Result<()> {
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a regular file",
        ));
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not executable",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_path() {
        let found = resolve_program("sh", Some(OsStr::new("/nonexistent:/bin:/usr/bin")))
            .expect("sh is on PATH");
        assert!(found.is_absolute() && found.ends_with("sh"), "{found:?}");
    }

    #[test]
    fn a_missing_program_is_not_found() {
        for (command, path) in [
            ("switchyard-no-such-program", Some("/bin:/usr/bin")),
            ("sh", None),
            ("/nonexistent/switchyard-no-such-program", Some("/bin")),
            ("", Some("/bin")),
        ] {
            let error = resolve_program(command, path.map(OsStr::new)).expect_err(command);
            assert_eq!(error.kind(), io::ErrorKind::NotFound, "{command}: {error}");
        }
    }

    #[test]
    fn a_directory_or_a_plain_file_is_not_a_program() {
        let error = resolve_program("/tmp", None).expect_err("a directory");
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        let error = resolve_program("/etc/passwd", None).expect_err("not executable");
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn the_liveness_read_end_is_inherited_and_the_write_end_is_not() {
        let fd = liveness_fd().expect("a liveness pipe");
        let pipe = LIVENESS
            .get()
            .and_then(|pipe| pipe.as_ref().ok())
            .expect("made");
        assert_eq!(pipe.read.as_raw_fd(), fd);
        let read_flags = fcntl(&pipe.read, FcntlArg::F_GETFD).expect("read flags");
        let write_flags = fcntl(&pipe._write, FcntlArg::F_GETFD).expect("write flags");
        assert_eq!(read_flags & FdFlag::FD_CLOEXEC.bits(), 0);
        assert_ne!(write_flags & FdFlag::FD_CLOEXEC.bits(), 0);
    }
}
