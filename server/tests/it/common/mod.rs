//! A real `seed serve` process on a free loopback port, for the service tests: started from the
//! built binary with its own data dir, talked to with the signing client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use seed_server::client::Client;
use seed_server::keys::{AccountKey, LOCAL_KEY_FILE};
use seed_store::{Config, Store};

pub const SEED: &str = env!("CARGO_BIN_EXE_seed");

pub struct Server {
    pub child: Child,
    pub url: String,
    /// The one-time browser login link it printed.
    pub login_url: String,
    pub data_dir: PathBuf,
}

impl Server {
    /// Starts `seed serve` on `data_dir` and waits until it listens.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> Server {
        Server::start_with_stderr(data_dir, extra_args, Stdio::inherit())
    }

    /// Starts `seed serve` as [`Server::start`] does, its log (stderr) written to `log`.
    pub fn start_logging_to(data_dir: &Path, extra_args: &[&str], log: &Path) -> Server {
        let file = std::fs::File::create(log).expect("the log file");
        Server::start_with_stderr(data_dir, extra_args, Stdio::from(file))
    }

    fn start_with_stderr(data_dir: &Path, extra_args: &[&str], stderr: Stdio) -> Server {
        let mut child = Command::new(SEED)
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra_args)
            .env("RUST_LOG", "warn")
            // The scripted model, whatever provider the developer's environment configures.
            .env("SEED_PROVIDER", "scripted")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("seed serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut url = None;
        let login_url = loop {
            let line = lines
                .next()
                .expect("seed serve printed where it listens")
                .expect("stdout");
            if let Some(listening) = line.strip_prefix("seed: listening on ") {
                url = Some(listening.to_owned());
            }
            if let Some(login) = line.strip_prefix("sign in a browser (one time): ") {
                break login.to_owned();
            }
        };
        let url = url.expect("the URL comes before the login link");
        // Keep reading, so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            url,
            login_url,
            data_dir: data_dir.to_owned(),
        }
    }

    pub fn local_key(&self) -> AccountKey {
        AccountKey::load(&self.data_dir.join(LOCAL_KEY_FILE)).expect("local key")
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url, self.local_key()).expect("client")
    }

    pub fn client_with(&self, key: AccountKey) -> Client {
        Client::new(&self.url, key).expect("client")
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let status = self.child.wait().expect("waits");
        std::mem::forget(self);
        status
    }

    /// A new account with its key, registered through `seed account add`.
    pub fn add_account(&self) -> AccountKey {
        let key = AccountKey::generate().expect("key");
        let output = Command::new(SEED)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["account", "add", &key.public_key_base64()])
            .output()
            .expect("seed account add runs");
        assert!(output.status.success(), "{output:?}");
        key
    }

    /// A second handle on the database, to count rows.
    pub fn store(&self) -> Store {
        Store::open(Config::new(self.data_dir.join("seed.db"))).expect("opens")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the `seed` command line on the server's data dir with `stdin`; returns stdout.
pub fn seed_cli(data_dir: &Path, args: &[&str], stdin: &str) -> String {
    let output = assert_cmd::Command::new(SEED)
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .write_stdin(stdin)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("seed runs");
    assert!(output.status.success(), "seed {args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("utf-8")
}

/// A new session of the client's account.
pub async fn new_session(client: &Client) -> seed_server::api::SessionInfo {
    client
        .post("/v1/sessions", &serde_json::json!({}))
        .await
        .expect("session created")
}

/// Rows in every table.
pub async fn row_counts(store: &Store) -> Vec<(&'static str, i64)> {
    store.row_counts().await.expect("counts")
}
