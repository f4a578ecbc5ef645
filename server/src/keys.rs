//! Account keys: the ed25519 key `seed serve` creates for the local account on first start and
//! the CLI signs with, kept as a small JSON file readable by its owner only (mode 0600). The
//! secret is never logged: `Debug` shows the account and the public key alone.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use ed25519_dalek::SigningKey;
use seed_events::AccountId;
use serde::{Deserialize, Serialize};

/// The local account's key file in a data dir.
pub const LOCAL_KEY_FILE: &str = "local.key";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write the key file {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the key file {path} is malformed: {detail}")]
    Malformed { path: String, detail: String },
    #[error("no random source")]
    Random,
}

/// An account and the key it signs with.
#[derive(Clone)]
pub struct AccountKey {
    pub account_id: AccountId,
    pub signing_key: SigningKey,
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountKey")
            .field("account_id", &self.account_id)
            .field("public_key", &self.public_key_base64())
            .finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    account_id: AccountId,
    public_key: String,
    secret_key: String,
}

impl AccountKey {
    /// A new account with a fresh key.
    pub fn generate() -> Result<AccountKey, Error> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|_| Error::Random)?;
        let signing_key = SigningKey::from_bytes(&seed);
        Ok(AccountKey {
            account_id: account_id_for(&signing_key.verifying_key().to_bytes()),
            signing_key,
        })
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.signing_key.verifying_key().to_bytes()
    }

    pub fn public_key_base64(&self) -> String {
        BASE64.encode(self.public_key())
    }

    /// Reads a key file.
    pub fn load(path: &Path) -> Result<AccountKey, Error> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let malformed = |detail: String| Error::Malformed {
            path: path.display().to_string(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(io)?;
        let file: KeyFile = serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        let secret = BASE64
            .decode(&file.secret_key)
            .map_err(|e| malformed(e.to_string()))?;
        let seed: [u8; 32] = secret
            .as_slice()
            .try_into()
            .map_err(|_| malformed("the secret key is not 32 bytes".to_owned()))?;
        let key = AccountKey {
            account_id: file.account_id,
            signing_key: SigningKey::from_bytes(&seed),
        };
        if key.public_key_base64() != file.public_key
            || key.account_id != account_id_for(&key.public_key())
        {
            return Err(malformed(
                "the public key does not match the secret".to_owned(),
            ));
        }
        Ok(key)
    }

    /// Writes a new key file, readable by its owner only; an existing file is not replaced.
    /// The file appears whole or not at all: it is written and synced under a staging name
    /// beside it, then linked into place (a link, unlike a rename, fails when the name is
    /// taken), so a process killed midway never leaves a torn key that the next start of
    /// `seed serve` would refuse. The staging name is random and created new
    /// (`O_EXCL | O_NOFOLLOW`): a file or symlink planted beside the key is never written
    /// through.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = KeyFile {
            account_id: self.account_id,
            public_key: self.public_key_base64(),
            secret_key: BASE64.encode(self.signing_key.to_bytes()),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| Error::Malformed {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        if path.exists() {
            return Err(io(std::io::Error::from(std::io::ErrorKind::AlreadyExists)));
        }
        let file_name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut suffix = [0u8; 16];
        getrandom::fill(&mut suffix).map_err(|_| Error::Random)?;
        let staging = path.with_file_name(format!(
            ".{file_name}.{}.tmp",
            URL_SAFE_NO_PAD.encode(suffix)
        ));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(0o600)
            .open(&staging)
            .map_err(io)?;
        let written = (|| {
            out.write_all(text.as_bytes())?;
            out.sync_all()?;
            std::fs::hard_link(&staging, path)
        })();
        // Only a file this call created is removed.
        let _ = std::fs::remove_file(&staging);
        written.map_err(io)?;
        // The new name is durable once its directory is.
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::File::open(dir)
                .and_then(|dir| dir.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

/// The account id of a public key: the first 16 bytes of its sha-256, as a uuid (version 8), so
/// `seed account add PUBLIC_KEY` and the key's holder agree on it without asking each other.
pub fn account_id_for(public_key: &[u8; 32]) -> AccountId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(public_key);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    AccountId(uuid::Builder::from_custom_bytes(bytes).into_uuid())
}

/// A public key as given on a command line: 32 bytes in base64.
pub fn parse_public_key(text: &str) -> Result<[u8; 32], String> {
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let key: [u8; 32] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| format!("{} bytes, not 32", bytes.len()))?;
    ed25519_dalek::VerifyingKey::from_bytes(&key).map_err(|_| "not an ed25519 key".to_owned())?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_file_round_trips_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOCAL_KEY_FILE);
        let key = AccountKey::generate().expect("key");
        key.save(&path).expect("saves");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = AccountKey::load(&path).expect("loads");
        assert_eq!(back.account_id, key.account_id);
        assert_eq!(back.public_key(), key.public_key());
        assert!(
            key.save(&path).is_err(),
            "an existing key is never replaced"
        );
        let other = AccountKey::generate().expect("key");
        assert!(other.save(&path).is_err());
        assert_eq!(
            AccountKey::load(&path).expect("loads").account_id,
            key.account_id
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("lists")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, [LOCAL_KEY_FILE], "nothing is left beside the key");
        assert!(!format!("{key:?}").contains(&BASE64.encode(key.signing_key.to_bytes())));
        assert_eq!(
            parse_public_key(&key.public_key_base64()),
            Ok(key.public_key())
        );
        assert!(parse_public_key("AAAA").is_err());
        assert_eq!(account_id_for(&key.public_key()), key.account_id);
        assert_eq!(key.account_id.0.get_version_num(), 8);
    }

    #[test]
    fn a_symlink_planted_at_a_staging_name_is_not_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOCAL_KEY_FILE);
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "untouched").expect("writes the target");
        // The staging name a predictable scheme would pick: this process's id.
        let planted = dir
            .path()
            .join(format!(".{LOCAL_KEY_FILE}.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &planted).expect("plants a symlink");
        let key = AccountKey::generate().expect("key");
        key.save(&path).expect("saves");
        assert_eq!(
            std::fs::read_to_string(&target).expect("reads the target"),
            "untouched"
        );
        assert!(
            !std::fs::symlink_metadata(&path)
                .expect("the key")
                .file_type()
                .is_symlink(),
            "the key is a file of its own"
        );
        assert_eq!(
            AccountKey::load(&path).expect("loads").account_id,
            key.account_id
        );
    }
}
