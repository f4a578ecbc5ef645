//! The data dir's permissions: it holds the database (every account's sessions) and the local
//! account's secret key, so it is created private (0700, its files 0600) and `seed serve`
//! refuses one that another user owns or that others may write to: whoever can write there can
//! replace the database or the key under the service.
//!
//! Every file and folder is created with its mode rather than under a narrowed umask: the umask
//! is the process's, and the MCP servers it starts would inherit it, writing a user's files
//! owner-only.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context as _;

/// The mode the data dir (and every folder in it) is created with: its owner's alone.
pub const DIR_MODE: u32 = 0o700;
/// The mode every file in the data dir is created with.
pub const FILE_MODE: u32 = 0o600;

/// Why a data dir is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Owned by another user than the one the service runs as.
    OtherOwner { owner_uid: u32, uid: u32 },
    /// Its group or everyone may write to it (`mode`: its permission bits).
    WritableByOthers { mode: u32 },
}

/// Whether a data dir owned by `owner_uid`, with the permission bits `mode`, may be used by a
/// service running as `uid`.
pub fn check(owner_uid: u32, mode: u32, uid: u32) -> Result<(), Refusal> {
    if owner_uid != uid {
        return Err(Refusal::OtherOwner { owner_uid, uid });
    }
    if mode & 0o022 != 0 {
        return Err(Refusal::WritableByOthers {
            mode: mode & 0o7777,
        });
    }
    Ok(())
}

/// What a person reads when the data dir is refused: what is wrong and how to fix it.
pub fn refusal_message(data_dir: &Path, refusal: &Refusal) -> String {
    let dir = data_dir.display();
    match refusal {
        Refusal::OtherOwner { owner_uid, uid } => format!(
            "the data dir {dir} belongs to another user (uid {owner_uid}; this process runs as \
             uid {uid}): run seed serve as its owner, or use a data dir of your own \
             (--data-dir)"
        ),
        Refusal::WritableByOthers { mode } => format!(
            "the data dir {dir} may be written by other users (mode {mode:04o}), who could \
             replace its database or key: make it private with `chmod 700 {dir}`"
        ),
    }
}

/// Creates the data dir (and its missing parents) with [`DIR_MODE`].
pub fn create(data_dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(data_dir)
        .with_context(|| format!("cannot create the data dir {}", data_dir.display()))
}

/// Creates the data dir if it is missing and checks it (see [`check`]); a data dir that others
/// could read is made private, with the named files in it.
pub fn prepare(data_dir: &Path, files: &[&str]) -> anyhow::Result<()> {
    create(data_dir)?;
    let metadata = std::fs::metadata(data_dir)
        .with_context(|| format!("cannot read the data dir {}", data_dir.display()))?;
    let uid = rustix::process::geteuid().as_raw();
    if let Err(refusal) = check(metadata.uid(), metadata.mode(), uid) {
        anyhow::bail!(refusal_message(data_dir, &refusal));
    }
    tighten(data_dir, metadata.mode(), DIR_MODE)?;
    for name in files {
        let path = data_dir.join(name);
        // A symlink is left alone: its target is not the data dir's to change.
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_file() => tighten(&path, metadata.mode(), FILE_MODE)?,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        }
    }
    Ok(())
}

/// Takes away the permission bits `mode` has beyond `allowed`.
fn tighten(path: &Path, mode: u32, allowed: u32) -> anyhow::Result<()> {
    if mode & 0o777 & !allowed == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & allowed))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    tracing::info!(path = %path.display(), from = format!("{:04o}", mode & 0o7777), "made private");
    Ok(())
}

/// Writes a whole file readable by its owner only ([`FILE_MODE`]), replacing what was there.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    file.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_is_refused_when_another_user_owns_it_or_others_may_write() {
        let me = 1000;
        for (owner_uid, mode, expected) in [
            (me, 0o700, Ok(())),
            (me, 0o755, Ok(())),
            (me, 0o750, Ok(())),
            (me, 0o40700, Ok(())),
            (me, 0o777, Err(Refusal::WritableByOthers { mode: 0o777 })),
            (me, 0o770, Err(Refusal::WritableByOthers { mode: 0o770 })),
            (me, 0o702, Err(Refusal::WritableByOthers { mode: 0o702 })),
            (me, 0o41777, Err(Refusal::WritableByOthers { mode: 0o1777 })),
            (
                0,
                0o700,
                Err(Refusal::OtherOwner {
                    owner_uid: 0,
                    uid: me,
                }),
            ),
        ] {
            assert_eq!(check(owner_uid, mode, me), expected, "{owner_uid} {mode:o}");
        }
    }

    #[test]
    fn a_refusal_names_the_dir_and_the_fix() {
        let dir = Path::new("/srv/seed-data");
        let message = refusal_message(dir, &Refusal::WritableByOthers { mode: 0o777 });
        assert!(message.contains("/srv/seed-data"), "{message}");
        assert!(message.contains("0777"), "{message}");
        assert!(message.contains("chmod 700 /srv/seed-data"), "{message}");
        let message = refusal_message(
            dir,
            &Refusal::OtherOwner {
                owner_uid: 0,
                uid: 1000,
            },
        );
        assert!(message.contains("/srv/seed-data"), "{message}");
        assert!(message.contains("another user"), "{message}");
    }

    #[test]
    fn an_open_data_dir_and_its_files_are_made_private() {
        let root = tempfile::tempdir().expect("tempdir");
        let data_dir = root.path().join("data");
        std::fs::create_dir(&data_dir).expect("creates");
        std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755))
            .expect("opens the dir");
        let file = data_dir.join("seed.db");
        std::fs::write(&file, "").expect("writes");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))
            .expect("opens the file");
        prepare(&data_dir, &["seed.db", "missing"]).expect("prepares");
        let mode = |path: &Path| std::fs::metadata(path).expect("metadata").mode() & 0o777;
        assert_eq!(mode(&data_dir), DIR_MODE);
        assert_eq!(mode(&file), FILE_MODE);
        let fresh = root.path().join("fresh/data");
        prepare(&fresh, &[]).expect("creates");
        assert_eq!(mode(&fresh), DIR_MODE);
    }
}
