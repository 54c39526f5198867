//! Reading a secret the server is given as a file (`DATABASE_URL_FILE`), so that it is never
//! on a command line: the file must be the operator's own — a regular file, not a symbolic
//! link, owned by the server's user, readable by nobody else (mode 0600).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The file's text without its trailing newline, or what is wrong with it, naming the file.
pub fn read_private_file(path: &Path) -> Result<String, String> {
    let refuse = |problem: &str| format!("`{}` {problem}", path.display());
    // O_NOFOLLOW: a link could point at a file that is not the operator's; O_NONBLOCK: a FIFO
    // in its place must not stall the start.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => refuse("is a symbolic link; give the file itself"),
            _ => refuse(&format!("cannot be read: {e}")),
        })?;
    let metadata = file
        .metadata()
        .map_err(|e| refuse(&format!("cannot be read: {e}")))?;
    if !metadata.is_file() {
        return Err(refuse("is not a regular file"));
    }
    let me = nix::unistd::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(refuse(&format!(
            "is owned by uid {}, not by the server's uid {me}; `chown` it",
            metadata.uid()
        )));
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode != 0o600 {
        return Err(refuse(&format!(
            "has mode {mode:04o}; it holds a secret: `chmod 600` it"
        )));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| refuse(&format!("cannot be read: {e}")))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use switchyard_testkit::scratch::Scratch;

    fn write(path: &Path, text: &str, mode: u32) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_file_is_read_and_anything_else_refused() {
        let dir = Scratch::new("private-file").unwrap();
        let good = dir.join("database-url");
        write(&good, "postgres://app:s3cret@db/switchyard\n", 0o600);
        assert_eq!(
            read_private_file(&good).unwrap(),
            "postgres://app:s3cret@db/switchyard"
        );

        let loose = dir.join("loose");
        write(&loose, "postgres://app:s3cret@db/switchyard", 0o644);
        let error = read_private_file(&loose).unwrap_err();
        assert!(
            error.contains("0644") && error.contains("chmod 600"),
            "{error}"
        );
        assert!(
            !error.contains("s3cret"),
            "the secret is never echoed: {error}"
        );

        let link = dir.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let error = read_private_file(&link).unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");

        let error = read_private_file(dir.dir()).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
