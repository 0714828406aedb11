//! Files that hold secrets (pairing keys, the session key log): opened owner-only.
//!
//! `OpenOptions::mode` applies only when the file is created, so a secret written over an existing
//! file (a key file re-paired, a key log appended to) would keep that file's old permissions;
//! [`write`] sets mode 0600 on the open file as well, before writing.
//!
//! The path may come from an environment variable (the key log): [`write`] does not follow a
//! symbolic link in its last component (`O_NOFOLLOW`, so no check-then-open race), and writes only
//! to a regular file, so that a link planted at that path cannot redirect a secret elsewhere.
use std::fs::{OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// How the secret is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Replace the file's contents.
    Replace,
    /// Append to it.
    Append,
}

/// Writes `bytes` to `path` (created if missing), the file's mode 0600 afterwards. Refuses a
/// symbolic link or anything but a regular file at `path`.
pub fn write(path: &Path, bytes: &[u8], how: How) -> io::Result<()> {
    let mut o = OpenOptions::new();
    match how {
        // Truncated only once it is known to be a regular file (below).
        How::Replace => o.write(true),
        How::Append => o.append(true),
    };
    // O_NONBLOCK: opening a FIFO planted there must not hang; it is refused below.
    let opened = o
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a symbolic link: a secret is not written through one",
            ));
        }
        Err(e) => return Err(e),
    };
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file: a secret is written only to one",
        ));
    }
    f.set_permissions(Permissions::from_mode(0o600))?;
    if how == How::Replace {
        f.set_len(0)?;
    }
    (&f).write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// A symbolic link at the key log's path (which an environment variable names) must not make
    /// the secret land in the link's target: refused, the target untouched, for both modes and
    /// for a link to a file that does not exist yet.
    #[test]
    fn finding6_secret_file_does_not_follow_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"precious").unwrap();
        let link = dir.path().join("keylog");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for how in [How::Append, How::Replace] {
            let e = write(&link, b"SECRET", how).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("new"), &dangling).unwrap();
        assert!(write(&dangling, b"SECRET", How::Replace).is_err());
        assert!(
            !dir.path().join("new").exists(),
            "nothing created through it"
        );
        // Not a regular file: refused too.
        assert!(write(dir.path(), b"SECRET", How::Append).is_err());
    }

    #[test]
    fn new_and_existing_files_end_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.key"), dir.path().join("keylog"));
        write(&a, b"one", How::Replace).unwrap();
        assert_eq!(mode(&a), 0o600);
        // An existing world-readable file is made owner-only, and replaced.
        std::fs::set_permissions(&a, Permissions::from_mode(0o644)).unwrap();
        write(&a, b"two", How::Replace).unwrap();
        assert_eq!(
            (mode(&a), std::fs::read(&a).unwrap()),
            (0o600, b"two".to_vec())
        );
        // Append keeps what was there.
        std::fs::write(&b, b"x\n").unwrap();
        std::fs::set_permissions(&b, Permissions::from_mode(0o666)).unwrap();
        write(&b, b"y\n", How::Append).unwrap();
        write(&b, b"z\n", How::Append).unwrap();
        assert_eq!(
            (mode(&b), std::fs::read(&b).unwrap()),
            (0o600, b"x\ny\nz\n".to_vec())
        );
    }
}
