//! `seed serve`: the whole service on an embedded default — a data dir holding the SQLite
//! database and the local account's key, the scripted model unless a provider is configured
//! (`seed_providers::ProviderConfig::from_process_env`),
//! HTTP on loopback. SIGTERM (or Ctrl-C) drains: stop accepting, end waits and streams, let the
//! commits in flight finish, release this process's leases, exit 0. A turn cut off is taken up
//! again by the next boot's sweep.

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_http::{Protocol, error::DispatchError};
use actix_service::{IntoServiceFactory as _, ServiceFactoryExt as _, fn_service};
use actix_web::dev::AppConfig;
use actix_web::rt::net::TcpStream;
use actix_web::{App, web};
use anyhow::Context as _;
use seed_actors::{Runtime, RuntimeSettings};
use seed_store::{Config, Store};
use utoipa_actix_web::AppExt;

use crate::api::{self, AppState, Limits};
use crate::auth::Tokens;
use crate::error::ApiError;
use crate::head_timeout::HeadTimedIo;
use crate::keys::{AccountKey, LOCAL_KEY_FILE};

/// Where a running service says where it listens, for the CLI.
pub const SERVER_FILE: &str = "server.json";
/// Held by the running service, so that only one serves a data dir.
pub const LOCK_FILE: &str = "serve.lock";
/// The database in the data dir.
pub const DATABASE_FILE: &str = "seed.db";
/// How long a drain waits for the writer to empty its queue.
const DRAIN_WRITES_WAIT: Duration = Duration::from_secs(5);
/// Pending connections the listening sockets queue (actix-web's default).
const LISTEN_BACKLOG: i32 = 1024;
/// How long a connection being closed may take to flush its last bytes (actix-web's default).
const CLIENT_DISCONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The exit code of a node that stops because its lease lapsed.
pub const NODE_LAPSED_EXIT_CODE: i32 = 3;

/// How long a node whose lease lapsed goes on before it exits.
const NODE_LAPSED_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub listen: String,
    pub limits: Limits,
    /// Slows the scripted model's streaming (tests).
    pub scripted_delta_delay: Option<Duration>,
    pub http_workers: usize,
    /// Runs in flight at once: (interactive, background).
    pub runs_max: (usize, usize),
    /// Runs of one account in flight at once, on both queues together (its share).
    pub account_runs_max: usize,
    /// What one account may hold: sessions, memory files and their bytes.
    pub quotas: seed_store::Quotas,
    /// Boot sweeps that may find one run cut off and queue it again.
    pub run_restarts_max: i64,
    /// How long a call waits for a person's approval before it is denied; `None`: no limit.
    pub approval_timeout: Option<Duration>,
    /// Verbs whose calls wait for a person's approval besides those that ask for it.
    pub approval_required: Vec<String>,
    /// How long the text of a response in flight waits, at most, for its commit.
    pub live_interval: Duration,
    /// The MCP servers' configuration file (`--mcp`), whose tools become verbs.
    pub mcp_config: Option<PathBuf>,
    /// A named crash point where the process aborts, the first time a turn reaches it
    /// (crash tests of the service); `None` in service.
    pub crash_at: Option<&'static str>,
    /// The limits on the sockets of `/v1/subscribe`.
    pub subscriber_limits: crate::subscribers::SubscriberLimits,
    /// How long a bearer token is good for, in milliseconds.
    pub token_ttl_ms: u64,
    /// Bearer tokens one account may hold at once.
    pub tokens_per_account_max: usize,
    /// How long a request head may take to arrive: the first from the connection's opening (408
    /// after), each later one from its first byte (the connection is closed after).
    pub header_timeout: Duration,
    /// Connections open at once, all workers together; past it, new ones wait to be accepted.
    pub connections_max: usize,
    /// The URL clients reach the service at through a proxy (`--public-url`): requests may
    /// name its host, besides the listen address.
    pub public_url: Option<crate::guard::PublicUrl>,
    /// How long the login link printed at start is good for.
    pub login_code_ttl: Duration,
    /// The PostgreSQL database the store lives in (`--database`); `None`: the data dir's SQLite
    /// database.
    pub database: Option<seed_store::DatabaseUrl>,
    /// On a shared database: how often this node renews its lease, and how long past its last
    /// renewal the lease holds.
    pub node_renew: Duration,
    pub node_expire: Duration,
    /// On PostgreSQL, the connections the store writes over side by side (`--writer-lanes`).
    pub writer_lanes: usize,
    /// Whether a commit survives a power loss (`Full`) or a process crash (`Normal`); SQLite's
    /// alone.
    pub synchronous: seed_store::Synchronous,
    /// The schedule verb's limits: the shortest interval, the wake-ups a session may have.
    pub schedule: seed_actors::verbs::schedule::Schedule,
    /// Traces of requests, runs, model requests and tool calls (`--otlp-endpoint`): off by
    /// default.
    pub traces: seed_actors::traces::Traces,
}

/// Connections each HTTP worker may hold, for `connections_max` in all (actix counts per
/// worker): at least one.
pub fn connections_per_worker(connections_max: usize, http_workers: usize) -> usize {
    connections_max.div_ceil(http_workers.max(1)).max(1)
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// The local account's key, created on first start.
pub fn local_key(data_dir: &Path) -> anyhow::Result<(AccountKey, bool)> {
    let path = data_dir.join(LOCAL_KEY_FILE);
    if path.exists() {
        return Ok((AccountKey::load(&path)?, false));
    }
    let key = AccountKey::generate()?;
    key.save(&path)?;
    Ok((key, true))
}

/// Opens the store, with each account's `quotas`: on the PostgreSQL `database` when one is
/// named (migrating it), else on the data dir's SQLite database. A URL that does not parse or a
/// database that cannot be reached is an error naming the database (without its password) and
/// the cause.
pub fn open_store(
    data_dir: &Path,
    database: Option<&seed_store::DatabaseUrl>,
    quotas: seed_store::Quotas,
    synchronous: seed_store::Synchronous,
    writer_lanes: usize,
) -> anyhow::Result<Store> {
    crate::data_dir::create(data_dir)?;
    // No spinning for the store's replies: under many concurrent requests, a task that polls
    // for its reply keeps polling everything it awaits alongside (the request's timeout, its
    // drain watch) and takes the worker from the others. `bench -- service`: 32 clients
    // ~1,300 messages/s with no spin against ~1,050 with the default 100 µs; 1 client the same.
    let config = Config {
        spin: Duration::ZERO,
        quotas,
        synchronous,
        database: database.cloned(),
        writer_lanes,
        ..Config::new(data_dir.join(DATABASE_FILE))
    };
    match database {
        // Opened on a thread of its own: the PostgreSQL connections block on each statement
        // while they are set up, which a thread that drives async tasks may not do.
        Some(url) => std::thread::scope(|scope| scope.spawn(|| Store::open(config)).join())
            .map_err(|_| anyhow::anyhow!("opening the store panicked"))?
            .with_context(|| {
                format!(
                    "cannot open the PostgreSQL database {}",
                    describe_database(url)
                )
            }),
        None => Ok(Store::open(config)?),
    }
}

/// The PostgreSQL database `database` names, for people: its URL without the password.
pub fn describe_database(database: &seed_store::DatabaseUrl) -> String {
    seed_store::redact_password(&database.0)
}

/// The engine a store runs on, as `/healthz` and the start name it.
pub fn engine_name(store: &Store) -> &'static str {
    match store.config().database {
        Some(_) => "postgres",
        None => "sqlite",
    }
}

/// Registers an account for a key unless it exists. Returns whether it was new.
pub async fn ensure_account(store: &Store, key: &AccountKey) -> anyhow::Result<bool> {
    if store.get_account(key.account_id).await?.is_some() {
        return Ok(false);
    }
    store
        .create_account(key.account_id, key.public_key().to_vec(), now_ms())
        .await?;
    Ok(true)
}

/// Binds a listening socket to each address `listen` resolves to (as actix-web does: with
/// address reuse, and a backlog of `LISTEN_BACKLOG`); an error only when none can be bound.
fn bind(listen: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    use socket2::{Domain, Socket, Type};
    let mut listeners = Vec::new();
    let mut last_error = None;
    for addr in std::net::ToSocketAddrs::to_socket_addrs(listen)? {
        let bound = Socket::new(
            Domain::for_address(addr),
            Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .and_then(|socket| {
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(LISTEN_BACKLOG)?;
            Ok(std::net::TcpListener::from(socket))
        });
        match bound {
            Ok(listener) => listeners.push(listener),
            Err(error) => last_error = Some(error),
        }
    }
    match (listeners.is_empty(), last_error) {
        (false, _) => Ok(listeners),
        (true, Some(error)) => Err(error),
        (true, None) => Err(std::io::Error::other("the address resolves to nothing")),
    }
}

/// Runs the service until SIGTERM or SIGINT; returns after draining.
pub fn serve(options: ServeOptions) -> anyhow::Result<()> {
    actix_web::rt::System::new().block_on(run(options))
}

/// Holds the data dir for this process: a second `seed serve` on it would sweep the first's
/// leases and runs as a dead boot's. The data dir is checked (and made private) first: one that
/// another user owns or may write to is refused.
fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    crate::data_dir::prepare(
        data_dir,
        &[
            DATABASE_FILE,
            "seed.db-wal",
            "seed.db-shm",
            LOCAL_KEY_FILE,
            SERVER_FILE,
            LOCK_FILE,
        ],
    )?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(crate::data_dir::FILE_MODE)
        .open(data_dir.join(LOCK_FILE))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => {
            anyhow::bail!("another seed serve is running on {}", data_dir.display())
        }
        Err(std::fs::TryLockError::Error(error)) => Err(error.into()),
    }
}

/// Whether a `seed serve` holds the data dir now: its lock is an OS file lock, so a service
/// that was killed holds nothing, whatever files it left.
pub fn is_serving(data_dir: &Path) -> bool {
    let Ok(lock) = std::fs::File::open(data_dir.join(LOCK_FILE)) else {
        return false;
    };
    matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// Reads and checks the MCP configuration: a bad file stops the start, naming the field.
fn read_mcp_config(path: &Path) -> anyhow::Result<seed_mcp::McpConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the MCP configuration {}", path.display()))?;
    seed_mcp::McpConfig::parse(&text)
        .with_context(|| format!("the MCP configuration {} is refused", path.display()))
}

/// Starts the configured MCP servers and offers their tools beside the shipped verbs, before
/// the runtime starts, so that a run the boot sweep takes up finds them.
async fn start_verbs(
    mcp_config: Option<seed_mcp::McpConfig>,
    schedule: seed_actors::verbs::schedule::Schedule,
) -> anyhow::Result<(seed_actors::verbs::VerbSet, Option<seed_mcp::McpServers>)> {
    let verbs = seed_actors::verbs::VerbSet::start(seed_actors::verbs::shipped_with(schedule));
    let Some(config) = mcp_config else {
        return Ok((verbs, None));
    };
    let servers = seed_mcp::McpServers::start(config)
        .await
        .context("the MCP servers did not start")?;
    seed_mcp::verb::offer(&verbs, &servers).context("an MCP tool cannot be offered")?;
    for server in servers.describe() {
        println!(
            "mcp: {} ({} {}): {} tools",
            server.name,
            server.server_name.as_deref().unwrap_or("unnamed"),
            server.server_version.as_deref().unwrap_or(""),
            server.n_tools
        );
    }
    Ok((verbs, Some(servers)))
}

/// Why a question an MCP server asked is closed at boot: the call that asked is gone.
const ELICITATION_CLOSED_AT_BOOT: &str =
    "the service stopped before anyone answered; the call that asked ended with it";

async fn run(options: ServeOptions) -> anyhow::Result<()> {
    if options.node_expire <= options.node_renew {
        anyhow::bail!(
            "--node-expire-ms ({} ms) must be longer than --node-renew-ms ({} ms): a lease \
             would lapse between two renewals",
            options.node_expire.as_millis(),
            options.node_renew.as_millis()
        );
    }
    // Held until the process exits.
    let _lock = lock_data_dir(&options.data_dir)?;
    // A bad MCP configuration stops the start before anything else is opened.
    let mcp_config = options
        .mcp_config
        .as_deref()
        .map(read_mcp_config)
        .transpose()?;
    let store = open_store(
        &options.data_dir,
        options.database.as_ref(),
        options.quotas,
        options.synchronous,
        options.writer_lanes,
    )?;
    let (key, key_created) = local_key(&options.data_dir)?;
    ensure_account(&store, &key).await?;
    if key_created {
        tracing::info!(account_id = %key.account_id, "created the local account and its key");
    }
    let boot_id = uuid::Uuid::now_v7().to_string();
    let clock: Arc<dyn Fn() -> i64 + Send + Sync> = Arc::new(now_ms);
    // The model: what the environment configures (SEED_PROVIDER, OPENAI_API_KEY, … or the
    // file SEED_PROVIDER_CONFIG names), else the scripted model.
    let provider_config = seed_providers::ProviderConfig::from_process_env()?;
    let mut settings = RuntimeSettings {
        interactive_runs_max: options.runs_max.0,
        background_runs_max: options.runs_max.1,
        account_runs_max: options.account_runs_max,
        run_restarts_max: options.run_restarts_max,
        approval_timeout: options.approval_timeout,
        live_interval: options.live_interval,
        node_renew: options.node_renew,
        node_expire: options.node_expire,
        traces: options.traces.clone(),
        crash_points: match options.crash_at {
            Some(point) => seed_actors::CrashPoints::new(move |reached| {
                if reached == point {
                    tracing::error!(point, "aborting at the crash point, as asked");
                    std::process::abort();
                }
                false
            }),
            None => seed_actors::CrashPoints::default(),
        },
        ..RuntimeSettings::default()
    };
    let (inner, model_line): (Arc<dyn seed_providers::Provider>, String) =
        match provider_config.provider {
            seed_providers::ProviderKind::Scripted => {
                let windows = settings.clone();
                (
                    Arc::new(crate::model::scripted(
                        options.scripted_delta_delay,
                        move |model| windows.context_window(model),
                    )),
                    "model: scripted (no provider configured)".to_owned(),
                )
            }
            _ => {
                settings.provider_name = provider_config.provider.name().to_owned();
                settings.model = provider_config.model().to_owned();
                settings.context_windows = provider_config.context_windows.clone();
                settings.context_window_default = provider_config.context_window_default;
                (
                    provider_config.build()?,
                    format!("model: {}", provider_config.describe()),
                )
            }
        };
    let provider = Arc::new(crate::model::Metered { inner });
    // The calls that asked people questions ended with the process that made them.
    let n_closed = store
        .close_pending_elicitations(ELICITATION_CLOSED_AT_BOOT, now_ms())
        .await?;
    if n_closed > 0 {
        tracing::info!(
            n_closed,
            "closed the questions of MCP calls a restart ended"
        );
    }
    let (verbs, mcp) = start_verbs(mcp_config, options.schedule).await?;
    // A verb named for approval that no verb has would leave what was meant unprotected.
    let names = verbs.names();
    if let Some(unknown) = options
        .approval_required
        .iter()
        .find(|name| !names.contains(name))
    {
        anyhow::bail!(
            "--approval-required names {unknown:?}, which no verb has (the verbs: {})",
            names.join(", ")
        );
    }
    verbs.require_approval(options.approval_required.iter().cloned());
    let (runtime, report) = Runtime::start_with(
        store.clone(),
        provider,
        verbs,
        settings.clone(),
        boot_id.clone(),
        Arc::clone(&clock),
    )
    .await?;
    // A node whose lease lapsed (it was paused or cut off past its expiry) may have had its
    // sessions taken over: it exits, to be started again as a new node. Its writes for those
    // sessions are refused meanwhile (fencing).
    let lapsed = runtime.node_lapsed();
    actix_web::rt::spawn(async move {
        lapsed.await;
        tracing::error!(
            "this node's lease lapsed and its sessions may run elsewhere: exiting in {:?}",
            NODE_LAPSED_GRACE
        );
        // Turns still in flight here meet their fencing meanwhile, rather than being cut off
        // unseen: each write they try is refused, logged and counted in /metrics.
        tokio::time::sleep(NODE_LAPSED_GRACE).await;
        std::process::exit(NODE_LAPSED_EXIT_CODE);
    });
    tracing::info!(
        n_leases_released = report.n_leases_released,
        n_runs_requeued = report.n_runs_requeued,
        n_runs_given_up = report.n_runs_given_up,
        %boot_id,
        "runtime started"
    );
    if let Some(mcp) = &mcp {
        mcp.people().connect(
            runtime.publisher().clone(),
            options.approval_timeout,
            Arc::clone(&clock),
        );
    }
    let (drain_sender, draining) = tokio::sync::watch::channel(false);
    let tokens = Tokens::new(
        store.clone(),
        options.token_ttl_ms,
        options.tokens_per_account_max,
    );
    let login_code = tokens
        .new_login_code(
            key.account_id,
            now_ms() + options.login_code_ttl.as_millis() as i64,
        )
        .await?;
    let state = web::Data::new(AppState {
        runtime,
        store: store.clone(),
        tokens,
        keys: Default::default(),
        limits: options.limits.clone(),
        settings: settings.clone(),
        clock: Arc::clone(&clock),
        metrics: crate::metrics::install(),
        draining,
        mcp: mcp.clone(),
        subscribers: crate::subscribers::Subscribers::new(options.subscriber_limits.clone()),
        local_account_id: key.account_id,
        node_id: boot_id.clone(),
        notices_sent: Default::default(),
    });
    actix_web::rt::spawn(crate::subscribers::forward(
        Arc::clone(&state.subscribers),
        state.runtime.publisher().clone(),
        store.clone(),
    ));
    // On a shared database, what this node publishes reaches the other nodes' subscribers, and
    // what theirs publish reaches this node's; held until the service stops.
    let _bus_bridge = match &options.database {
        Some(database) => Some(
            crate::bus_bridge::start(state.runtime.publisher().clone(), &boot_id, &database.0, {
                let runtime = state.runtime.clone();
                move || runtime.wake()
            })
            .await
            .with_context(|| {
                format!(
                    "cannot listen for the other nodes' notices on {}",
                    describe_database(database)
                )
            })?,
        ),
        None => None,
    };
    if let Some(bridge) = &_bus_bridge {
        let _ = state.notices_sent.set(bridge.sent_counts());
    }
    let openapi = api::openapi();
    let routes = web::Data::new(api::routes_of(&openapi));
    let document = web::Data::new(api::document_text(&openapi, &state.runtime)?);
    let body_bytes_max = options.limits.body_bytes_max;
    let app_state = state.clone();
    // The names requests may give as their Host: the bound addresses are set once bound.
    let hosts = web::Data::new(crate::guard::Hosts {
        public: options.public_url.clone(),
        bound: Default::default(),
    });
    let app_hosts = hosts.clone();
    let make_app = move || {
        let (app, _) = App::new()
            .into_utoipa_app()
            .openapi(api::base_document())
            .configure(api::configure)
            .split_for_parts();
        app.app_data(app_state.clone())
            .app_data(document.clone())
            .app_data(routes.clone())
            .app_data(app_hosts.clone())
            .app_data(web::PayloadConfig::new(body_bytes_max))
            .app_data(
                web::PathConfig::default()
                    .error_handler(|_, _| ApiError::NotFound("resource").into()),
            )
            .route("/v1/openapi.json", web::get().to(api::openapi_json))
            .configure(crate::ui::configure)
            .default_service(web::to(api::no_route))
            .wrap(actix_web::middleware::from_fn(crate::guard::guard))
            .wrap(actix_web::middleware::from_fn(crate::traces::http_span))
            .wrap_fn(|request, service| {
                use actix_web::dev::Service as _;
                let started = Instant::now();
                let method = request.method().clone();
                let path = request.path().to_owned();
                let response = service.call(request);
                async move {
                    let response = response.await?;
                    let status = response.status().as_u16();
                    tracing::debug!(%method, %path, status, elapsed_us = started.elapsed().as_micros() as u64, "request");
                    metrics::counter!("seed_http_requests_total", "status" => status.to_string())
                        .increment(1);
                    Ok(response)
                }
            })
    };
    let listeners =
        bind(&options.listen).with_context(|| format!("cannot listen on {}", options.listen))?;
    let addrs = listeners
        .iter()
        .map(std::net::TcpListener::local_addr)
        .collect::<std::io::Result<Vec<SocketAddr>>>()?;
    let mut builder = actix_server::Server::build()
        .workers(options.http_workers)
        .max_concurrent_connections(connections_per_worker(
            options.connections_max,
            options.http_workers,
        ))
        .disable_signals()
        .shutdown_timeout(10);
    let graceful_stop = builder.graceful_shutdown_signal();
    let header_timeout = options.header_timeout;
    for (listener, addr) in listeners.into_iter().zip(addrs.iter().copied()) {
        let make_app = make_app.clone();
        let graceful_stop = graceful_stop.clone();
        // Made once per worker, on its thread.
        let make_service = move || {
            let graceful_stop = graceful_stop.clone();
            let http = actix_http::HttpService::build()
                // Every head is timed by `HeadTimedIo`, the first too.
                .client_request_timeout(Duration::ZERO)
                .client_disconnect_timeout(CLIENT_DISCONNECT_TIMEOUT)
                .local_addr(addr)
                .graceful_shutdown_signal(move || {
                    let graceful_stop = graceful_stop.clone();
                    async move { graceful_stop.notified().await }
                })
                .finish(actix_service::map_config(
                    make_app()
                        .into_factory()
                        .map_err(|error| error.error_response()),
                    // The host and address actix-web's own server gives an app.
                    move |()| AppConfig::__priv_test_new(false, addr.to_string(), addr),
                ));
            fn_service(move |io: TcpStream| {
                let peer_addr = io.peer_addr().ok();
                let io = HeadTimedIo::new(io, header_timeout);
                async move { Ok::<_, DispatchError>((io, Protocol::Http1, peer_addr)) }
            })
            .and_then(http)
        };
        builder = builder
            .listen(format!("seed-http-{addr}"), listener, make_service)
            .with_context(|| format!("cannot listen on {}", options.listen))?;
    }
    hosts
        .bound
        .set(addrs.clone())
        .map_err(|_| anyhow::anyhow!("the bound addresses are set once"))?;
    if let Some(warning) = crate::guard::plain_http_warning(&addrs) {
        tracing::warn!("{warning}");
    }
    let url = format!("http://{}", addrs[0]);
    let server = builder.run();
    let handle = server.handle();

    let server_file = options.data_dir.join(SERVER_FILE);
    crate::data_dir::write_private(
        &server_file,
        serde_json::json!({ "url": url }).to_string().as_bytes(),
    )?;
    println!("seed: listening on {url}");
    println!("{model_line}");
    println!("data dir: {}", options.data_dir.display());
    match &options.database {
        Some(database) => {
            println!("database: {}", describe_database(database));
            println!("durability: the PostgreSQL server's (its synchronous_commit)");
            println!("writer lanes: {}", options.writer_lanes);
        }
        None => {
            println!(
                "database: sqlite {}",
                options.data_dir.join(DATABASE_FILE).display()
            );
            println!("durability: {}", options.synchronous.describe());
        }
    }
    println!("node: {boot_id}");
    println!(
        "account: {} (key in {})",
        key.account_id,
        options.data_dir.join(LOCAL_KEY_FILE).display()
    );
    println!(
        "talk to it: seed chat --data-dir {}",
        options.data_dir.display()
    );
    // The link goes to the terminal (stdout) alone, never to the log.
    println!("sign in a browser (one time): {url}/login?code={login_code}");
    println!(
        "the link works once, within {} seconds",
        options.login_code_ttl.as_secs()
    );

    // Nonces whose signatures can no longer be accepted, and expired bearer tokens, are pruned
    // every minute.
    let prune_store = store.clone();
    let prune_state = state.clone();
    actix_web::rt::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_secs(60));
        loop {
            interval.tick().await;
            if let Err(error) = prune_store.prune_nonces(now_ms()).await {
                tracing::warn!(%error, "pruning nonces failed");
            }
            if let Err(error) = prune_state.tokens.sweep(now_ms()).await {
                tracing::warn!(%error, "sweeping tokens failed");
            }
        }
    });

    actix_web::rt::spawn(async move {
        let (Ok(mut terminate), Ok(mut interrupt)) = (
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()),
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot listen for signals");
            return;
        };
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("draining: no new requests; waits and streams end");
        let _ = drain_sender.send(true);
        handle.stop(true).await;
    });

    server.await?;
    let started = Instant::now();
    while store.queued_writes() > 0 && started.elapsed() < DRAIN_WRITES_WAIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Runs still in flight go on until the exit, but nothing of theirs commits after this.
    let n_released = store.release_leases_and_stop_writes(&boot_id).await?;
    let _ = std::fs::remove_file(&server_file);
    tracing::info!(n_leases_released = n_released, "drained");
    if let Some(mcp) = &mcp {
        mcp.shutdown().await;
    }
    drop(state);
    // The spans of the last requests and runs are sent before the process ends.
    crate::traces::shutdown();
    // Turns cut off stay `running` in the database; the next boot's sweep takes them up.
    std::process::exit(0)
}
