//! Reading a credential value: from a prompt without echo when stdin is a terminal, else from
//! stdin. Never from the command line, where other users could read it (`/proc/PID/cmdline`).
//!
//! The value is returned as read, less one trailing newline (`\n` or `\r\n`): `echo "$TOKEN" |
//! switchyard credential set …` stores the token, not the newline the shell added. The value
//! rules (length, NUL, CR/LF in headers) are checked where it is stored, not here.

use crate::error::CliError;
use nix::sys::termios::{self, LocalFlags, SetArg};
use std::fmt;
use std::io::{BufRead, IsTerminal, Read, Write};

/// A credential value read from the user. `Debug` never shows it.
pub struct SecretInput(String);

impl fmt::Debug for SecretInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretInput(..)")
    }
}

impl SecretInput {
    /// The value.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Reads a value: asks with `prompt` on stderr, echo off, when stdin is a terminal; else reads
/// stdin to its end.
pub fn read_secret(prompt: &str) -> Result<SecretInput, CliError> {
    let stdin = std::io::stdin();
    let bytes = if stdin.is_terminal() {
        read_from_terminal(prompt)?
    } else {
        let mut bytes = Vec::new();
        stdin.lock().read_to_end(&mut bytes).map_err(read_error)?;
        bytes
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::Usage("the value is not valid UTF-8 text".to_owned()))?;
    Ok(SecretInput(without_one_newline(text)))
}

/// One line from the terminal, typed with echo off; echo is restored whatever happens.
fn read_from_terminal(prompt: &str) -> Result<Vec<u8>, CliError> {
    let stdin = std::io::stdin();
    let saved =
        termios::tcgetattr(&stdin).map_err(|error| read_error(std::io::Error::from(error)))?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    quiet.local_flags.insert(LocalFlags::ECHONL);
    // Echo goes off before the prompt shows: what is typed once it shows is neither echoed
    // nor flushed away.
    termios::tcsetattr(&stdin, SetArg::TCSAFLUSH, &quiet)
        .map_err(|error| read_error(std::io::Error::from(error)))?;
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{prompt}");
    let _ = stderr.flush();
    let mut line = Vec::new();
    let read = stdin.lock().read_until(b'\n', &mut line);
    let restored = termios::tcsetattr(&stdin, SetArg::TCSAFLUSH, &saved);
    read.map_err(read_error)?;
    restored.map_err(|error| read_error(std::io::Error::from(error)))?;
    Ok(line)
}

fn read_error(source: std::io::Error) -> CliError {
    CliError::ReadInput {
        name: "the value".to_owned(),
        source,
    }
}

/// `text` without one trailing `\n` or `\r\n`.
fn without_one_newline(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_removed() {
        assert_eq!(without_one_newline("tok-1\n".to_owned()), "tok-1");
        assert_eq!(without_one_newline("tok-1\r\n".to_owned()), "tok-1");
        assert_eq!(without_one_newline("tok-1\n\n".to_owned()), "tok-1\n");
        assert_eq!(without_one_newline("tok-1".to_owned()), "tok-1");
        assert_eq!(without_one_newline("tok\r".to_owned()), "tok\r");
    }

    #[test]
    fn debug_never_shows_the_value() {
        let secret = SecretInput("canary-91ab".to_owned());
        assert_eq!(format!("{secret:?}"), "SecretInput(..)");
    }
}
