//! Integration tests of the `switchyard` binary on its own: how it finds and hands over to the
//! device runner helper beside it, and `config validate`, which reads a local file only.
//!
//! Runs against the CLI's real server, runner and fixture live in `crates/e2e`, which needs the
//! workspace built; these need only this package's binary.

mod config;
mod runner;

/// Writing an executable and starting a process, one at a time.
///
/// A process started while another test thread still holds a file open for writing inherits
/// that descriptor until it execs; executing that file meanwhile fails with `ETXTBSY` ("Text
/// file busy"). Every file these tests execute is written, and every process started, under
/// this lock, so no fork ever sees a file being written.
pub mod exclusive {
    use std::process::{Child, Command, Output, Stdio};
    use std::sync::Mutex;

    static FORKING: Mutex<()> = Mutex::new(());

    /// Runs `write` (which writes and closes files) while no process is being started.
    pub fn write<T>(write: impl FnOnce() -> T) -> T {
        let _alone = FORKING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        write()
    }

    /// Starts `command` while no file is being written.
    pub fn spawn(command: &mut Command) -> std::io::Result<Child> {
        let _alone = FORKING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        command.spawn()
    }

    /// What [`Command::output`] does, started through [`spawn`]: stdin empty, stdout and
    /// stderr captured.
    pub fn output(command: &mut Command) -> std::io::Result<Output> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        spawn(command)?.wait_with_output()
    }
}
