//! Reading a secret the server is given as a file (`DATABASE_URL_FILE`), so that it is never
//! on a command line: the file must be the operator's own — a regular file, not a symbolic
//! link, owned by the server's user, readable by nobody else (mode 0600; the checks are
//! [`switchyard_mcp_runner::owned_file`]'s).

use std::io::Read;
use std::path::Path;
use switchyard_mcp_runner::owned_file::{self, ModeRule, Refusal};

/// The file's text without its trailing newline, or what is wrong with it, naming the file
/// (never its content).
pub fn read_private_file(path: &Path) -> Result<String, String> {
    let refuse = |problem: &str| format!("`{}` {problem}", path.display());
    let mut file =
        owned_file::open(path, ModeRule::OwnerOnly).map_err(|refusal| match refusal {
            Refusal::Symlink => refuse("is a symbolic link; give the file itself"),
            Refusal::NotRegular => refuse("is not a regular file"),
            Refusal::Foreign { owner, me } => refuse(&format!(
                "is owned by uid {owner}, not by the server's uid {me}; `chown` it"
            )),
            Refusal::Mode(mode) => refuse(&format!(
                "has mode {mode:04o}; it holds a secret: `chmod 600` it"
            )),
            Refusal::Io(e) => refuse(&format!("cannot be read: {e}")),
        })?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| refuse(&format!("cannot be read: {e}")))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
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
