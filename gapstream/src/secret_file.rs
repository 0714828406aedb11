//! Files that hold secrets (pairing keys, the session key log): opened owner-only.
//!
//! `OpenOptions::mode` applies only when the file is created, so a secret written over an existing
//! file (a key file re-paired, a key log appended to) would keep that file's old permissions;
//! [`write`] sets mode 0600 on the open file as well, before writing.
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

/// Writes `bytes` to `path` (created if missing), the file's mode 0600 afterwards.
pub fn write(path: &Path, bytes: &[u8], how: How) -> io::Result<()> {
    let mut o = OpenOptions::new();
    match how {
        How::Replace => o.write(true).truncate(true),
        How::Append => o.append(true),
    };
    let mut f = o.create(true).mode(0o600).open(path)?;
    f.set_permissions(Permissions::from_mode(0o600))?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
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
