//! The admin token: read from `--admin-token-file` (the operator's, from a
//! Secret), or, when none is given, generated at start and written to a
//! file only its user can read, whose path the facade logs. Either way
//! there is a token: the admin port is never open because nobody
//! configured it. The generated one changes with every start.
//!
//! Where the generated token goes: `--generated-admin-token-file`, else
//! `$XDG_RUNTIME_DIR/mcp-warden/admin-<port>.token` (a per-user tmpfs),
//! else `<temp dir>/mcp-warden-<uid>/admin-<port>.token`. The directory is
//! made 0700 and must be this user's own; the file is written 0600 under
//! a fresh name and renamed into place, so a link planted at the path is
//! replaced, never followed.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the admin token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the admin token {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the admin token in {0} must be at least 16 characters")]
    Short(PathBuf),
    #[error("cannot write the generated admin token to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{0} is not a directory only this user owns (0700); pass --generated-admin-token-file"
    )]
    UnsafeDir(PathBuf),
}

/// The token in `path` (trimmed; at least 16 characters).
pub fn read(path: &Path) -> Result<String, TokenError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.trim().to_string();
    if token.len() < 16 {
        return Err(TokenError::Short(path.to_path_buf()));
    }
    Ok(token)
}

/// The default place of a generated token for an admin port on `port`.
pub fn default_path(port: u16) -> PathBuf {
    let file = format!("admin-{port}.token");
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("mcp-warden").join(file),
        None => std::env::temp_dir()
            .join(format!("mcp-warden-{}", own_uid()))
            .join(file),
    }
}

/// Make a fresh random token and write it to `path` (0600).
pub fn generate(path: &Path) -> Result<String, TokenError> {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).expect("the OS random source is available");
    let token = hex::encode(random);
    let write_err = |source| TokenError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        private_dir(dir)?;
    }
    let fresh = path.with_extension(format!("tmp-{}", hex::encode(&random[..6])));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .map_err(write_err)?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&fresh, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&fresh);
            write_err(e)
        })?;
    Ok(token)
}

/// Create `dir` 0700, or accept it when it already is this user's and no
/// one else's (a shared temp dir is where someone could plant it first).
fn private_dir(dir: &Path) -> Result<(), TokenError> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(source) => {
            return Err(TokenError::Write {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|source| TokenError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let private =
        meta.is_dir() && meta.uid() == own_uid() && meta.permissions().mode() & 0o077 == 0;
    if !private {
        return Err(TokenError::UnsafeDir(dir.to_path_buf()));
    }
    Ok(())
}

/// This process's user id (the owner of what it creates; no `libc` needed).
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh private directory for one test, removed when it ends.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("admin-token-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn a_generated_token_is_private_fresh_and_readable_back() {
        let scratch = scratch("fresh");
        let dir = scratch.path();
        let path = dir.join("sub").join("admin.token");
        let first = generate(&path).unwrap();
        assert_eq!(read(&path).unwrap(), first);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        // A link planted at the path is replaced, not written through.
        let target = dir.join("target");
        std::fs::write(&target, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let second = generate(&path).unwrap();
        assert_ne!(first, second);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(read(&path).unwrap(), second);
    }

    #[test]
    fn a_shared_directory_is_refused_and_short_tokens_too() {
        let scratch = scratch("shared");
        let dir = scratch.path();
        let open = dir.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            generate(&open.join("t")),
            Err(TokenError::UnsafeDir(_))
        ));
        std::fs::write(dir.join("short"), "abc\n").unwrap();
        assert!(matches!(
            read(&dir.join("short")),
            Err(TokenError::Short(_))
        ));
    }
}
