//! A real `seed serve` process on a free loopback port, for the service tests: started from the
//! built binary with its own data dir, talked to with the signing client. With
//! `SEED_TEST_SERVE_ENGINE=postgres` every server keeps its store in a PostgreSQL database of its
//! data dir's own on the test cluster (`SEED_TEST_DATABASE_URL`); else in the data dir's SQLite.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Weak};

use seed_server::client::Client;
use seed_server::keys::{AccountKey, LOCAL_KEY_FILE};
use seed_store::{Config, DatabaseUrl, ScratchDatabase, Store};

pub const SEED: &str = env!("CARGO_BIN_EXE_seed");

/// The variable that picks the engine the started servers use: `postgres`, or `sqlite` (the
/// default).
pub const ENGINE_VAR: &str = "SEED_TEST_SERVE_ENGINE";

/// Whether the started servers keep their store on PostgreSQL ([`ENGINE_VAR`]).
pub fn on_postgres() -> bool {
    match std::env::var(ENGINE_VAR).as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Ok("") | Err(_) => false,
        Ok(other) => panic!("{ENGINE_VAR}={other:?}: the engines are sqlite and postgres"),
    }
}

/// Whether a test of what only SQLite has (its file, its WAL, its pages, `seed migrate` on the
/// data dir) runs: not on PostgreSQL, where it says so and passes.
pub fn sqlite_only(what: &str) -> bool {
    if on_postgres() {
        eprintln!("not on PostgreSQL: {what} is SQLite's");
        return false;
    }
    true
}

/// Each data dir's database on PostgreSQL, by the data dir: a restart on it finds the same.
static DATABASES: Mutex<Option<HashMap<PathBuf, Weak<ScratchDatabase>>>> = Mutex::new(None);

thread_local! {
    /// The databases this thread made, kept until it ends (a test's thread ends with the
    /// test), so that a data dir keeps its database between a server's exit and the next
    /// start, and a test may read it after its server is gone.
    static MADE_HERE: RefCell<Vec<Arc<ScratchDatabase>>> = const { RefCell::new(Vec::new()) };
}

/// The PostgreSQL database of `data_dir`'s servers when the tests run on PostgreSQL, made on
/// the test cluster at the first ask; `None` on SQLite.
pub fn database_of(data_dir: &Path) -> Option<Arc<ScratchDatabase>> {
    let mut databases = DATABASES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let databases = databases.get_or_insert_with(HashMap::new);
    if let Some(database) = databases.get(data_dir).and_then(Weak::upgrade) {
        return Some(database);
    }
    if !on_postgres() {
        return None;
    }
    let database = Arc::new(ScratchDatabase::on_test_cluster());
    databases.insert(data_dir.to_owned(), Arc::downgrade(&database));
    MADE_HERE.with(|made| made.borrow_mut().push(Arc::clone(&database)));
    Some(database)
}

/// Puts the servers of each of `data_dirs` on one PostgreSQL database of the test cluster,
/// whatever engine the other tests run on: the nodes of one service. Returns it.
pub fn shared_database(data_dirs: &[&Path]) -> Arc<ScratchDatabase> {
    let database = Arc::new(ScratchDatabase::on_test_cluster());
    let mut databases = DATABASES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let databases = databases.get_or_insert_with(HashMap::new);
    for data_dir in data_dirs {
        databases.insert(data_dir.to_path_buf(), Arc::downgrade(&database));
    }
    MADE_HERE.with(|made| made.borrow_mut().push(Arc::clone(&database)));
    database
}

/// The arguments that put a `seed` command on `data_dir`'s database: `--database URL` on
/// PostgreSQL, none on SQLite.
pub fn database_args(data_dir: &Path) -> Vec<String> {
    database_of(data_dir)
        .map(|database| vec!["--database".to_owned(), database.url().to_owned()])
        .unwrap_or_default()
}

/// A handle on `data_dir`'s database, as its servers open it, to read what they wrote.
/// It opens on a thread of its own: a PostgreSQL store's connections block while they are set
/// up, which an async test's thread may not do.
pub fn open_store(data_dir: &Path) -> Store {
    let config = Config {
        database: database_of(data_dir).map(|database| DatabaseUrl(database.url().to_owned())),
        ..Config::new(data_dir.join("seed.db"))
    };
    std::thread::scope(|scope| scope.spawn(|| Store::open(config)).join())
        .expect("opening the store does not panic")
        .expect("the data dir's database opens")
}

pub struct Server {
    pub child: Child,
    pub url: String,
    /// The one-time browser login link it printed.
    pub login_url: String,
    pub data_dir: PathBuf,
    /// The node id it printed at start: the boot id it claims runs with.
    pub node_id: String,
    /// The PostgreSQL database it uses, kept at least as long as the process runs.
    pub database: Option<Arc<ScratchDatabase>>,
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
        Server::start_with_env(data_dir, extra_args, &[], stderr)
    }

    /// Starts `seed serve` as [`Server::start`] does, with `env` set in its environment.
    pub fn start_with_env(
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Server {
        let database = database_of(data_dir);
        let mut child = Command::new(SEED)
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(database_args(data_dir))
            .args(extra_args)
            // The engine is the harness's choice, whatever the developer's environment names.
            .env_remove("SEED_DATABASE_URL")
            .env("RUST_LOG", "warn")
            // The scripted model, whatever provider the developer's environment configures.
            .env("SEED_PROVIDER", "scripted")
            // No traces, unless a test asks for them, wherever the developer's environment
            // sends them.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("seed serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut url = None;
        let mut node_id = None;
        let login_url = loop {
            let line = lines
                .next()
                .expect("seed serve printed where it listens")
                .expect("stdout");
            if let Some(listening) = line.strip_prefix("seed: listening on ") {
                url = Some(listening.to_owned());
            }
            if let Some(node) = line.strip_prefix("node: ") {
                node_id = Some(node.to_owned());
            }
            if let Some(login) = line.strip_prefix("sign in a browser (one time): ") {
                break login.to_owned();
            }
        };
        let url = url.expect("the URL comes before the login link");
        let node_id = node_id.expect("the node id comes before the login link");
        // Keep reading, so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            url,
            login_url,
            data_dir: data_dir.to_owned(),
            node_id,
            database,
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
        drop(self.database.take());
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
            .args(database_args(&self.data_dir))
            .env_remove("SEED_DATABASE_URL")
            .output()
            .expect("seed account add runs");
        assert!(output.status.success(), "{output:?}");
        key
    }

    /// A second handle on the database, to count rows.
    pub fn store(&self) -> Store {
        open_store(&self.data_dir)
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
    let mut command = assert_cmd::Command::new(SEED);
    // `seed account add` finds the service's database as `seed serve` was given it.
    match database_of(data_dir) {
        Some(database) => command.env("SEED_DATABASE_URL", database.url()),
        None => command.env_remove("SEED_DATABASE_URL"),
    };
    let output = command
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

/// The response texts that text deltas carried, one per response: a delta at offset 0 starts
/// the next; each later one must follow the text so far exactly.
pub fn responses_of(deltas: &[(usize, String)]) -> Vec<String> {
    let mut responses: Vec<String> = Vec::new();
    for (offset_chars, text) in deltas {
        if *offset_chars == 0 {
            responses.push(String::new());
        }
        let current = responses.last_mut().expect("a response starts at offset 0");
        assert_eq!(
            current.chars().count(),
            *offset_chars,
            "a delta at {offset_chars} after {current:?}"
        );
        current.push_str(text);
    }
    responses
}
