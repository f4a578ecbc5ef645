//! The data dir through a real `seed serve`: created private with its files owner-only, and a
//! data dir that others may write to is refused at start, with nothing written in it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{SEED, Server, new_session, on_postgres};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[actix_web::test]
async fn a_fresh_data_dir_is_private_and_so_are_its_files() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("data");
    let server = Server::start(&data_dir, &[]);
    // A write, so the WAL holds something while the service runs.
    new_session(&server.client()).await;
    assert_eq!(mode(&data_dir), 0o700, "the data dir");
    // On PostgreSQL the data dir holds no database at all.
    let database_files = ["seed.db", "seed.db-wal", "seed.db-shm"];
    if on_postgres() {
        for name in database_files {
            assert!(!data_dir.join(name).exists(), "{name} on PostgreSQL");
        }
    }
    let database_files = if on_postgres() {
        &[][..]
    } else {
        &database_files[..]
    };
    for name in database_files
        .iter()
        .chain(&["local.key", "server.json", "serve.lock"])
    {
        assert_eq!(mode(&data_dir.join(name)), 0o600, "{name}");
    }
}

#[test]
fn a_data_dir_others_may_write_to_is_refused_at_start() {
    for dir_mode in [0o777, 0o770, 0o1777] {
        let root = tempfile::tempdir().expect("tempdir");
        let data_dir = root.path().join("data");
        std::fs::create_dir(&data_dir).expect("creates the data dir");
        std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(dir_mode))
            .expect("opens the data dir");
        let output = assert_cmd::Command::new(SEED)
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .env("SEED_PROVIDER", "scripted")
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("seed serve runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{dir_mode:o}: {output:?}");
        assert!(
            stderr.contains(&data_dir.display().to_string()),
            "{dir_mode:o}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("chmod 700 {}", data_dir.display())),
            "{dir_mode:o}: {stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(&data_dir)
            .expect("lists")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert!(
            left.is_empty(),
            "{dir_mode:o}: nothing is written: {left:?}"
        );
    }
}
