//! The `seed` command line: its arguments and what each command runs — `serve`; the clients
//! that talk to a running service with the local key (`chat`, and in `remote` `sessions`,
//! `show`, `token`, `tools`, `schedules`, `approvals`); the key and account commands that work
//! on the data dir directly; `migrate`, which brings a database's schema up to date; `fsck`,
//! which checks it read-only; and `sim`, the actor simulation.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::client::Client;
use crate::keys::{AccountKey, LOCAL_KEY_FILE, account_id_for, parse_public_key};
use crate::serve::{self, SERVER_FILE, ServeOptions};

pub(crate) mod fsck;
pub(crate) mod migrate;
pub(crate) mod remote;

pub(crate) use remote::{all_events, describe};
use remote::{
    approval_request, approvals, fork, question_request, schedules, sessions, show, token, tools,
};

/// How long each request head may take by default, in milliseconds: a connection's first from
/// its opening, a later one from its first byte.
pub const HEADER_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Connections open at once by default, all HTTP workers together.
pub const CONNECTIONS_MAX_DEFAULT: u32 = 1024;

#[derive(Debug, Parser)]
#[command(name = "seed", version, about = "Seed: a durable agent runtime")]
pub struct Cli {
    /// The data dir: database, local key, and where a running service says where it listens.
    #[arg(
        long,
        env = "SEED_DATA_DIR",
        default_value = "./seed-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// The service to talk to (default: what the data dir's running service says).
    #[arg(long, env = "SEED_URL", global = true)]
    pub url: Option<String>,
    /// Sign with this key file instead of the data dir's local key.
    #[arg(long, env = "SEED_KEY", global = true)]
    pub key: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

// `serve`'s many settings make its variant large; a command line is parsed once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the service.
    Serve {
        /// Address and port to listen on (port 0: any free port).
        #[arg(long, env = "SEED_LISTEN", default_value = "127.0.0.1:4747")]
        listen: String,
        /// Logs as JSON lines.
        #[arg(long)]
        log_json: bool,
        /// Runs an account may have queued before messages are refused with 429.
        #[arg(long, default_value_t = 256)]
        queued_runs_max: i64,
        /// The largest request body in bytes (413 above).
        #[arg(long, default_value_t = 1024 * 1024)]
        body_bytes_max: usize,
        /// The largest file an attachment may be, in bytes (413 above; the one request body
        /// past --body-bytes-max).
        #[arg(long, env = "SEED_ATTACHMENT_BYTES_MAX", default_value_t = crate::api::ATTACHMENT_BYTES_MAX_DEFAULT)]
        attachment_bytes_max: usize,
        /// What all of an account's attachments may hold, in bytes (an upload past it is
        /// refused with 413).
        #[arg(
            long,
            env = "SEED_ACCOUNT_ATTACHMENTS_BYTES_MAX",
            default_value_t = crate::api::ACCOUNT_ATTACHMENTS_BYTES_MAX_DEFAULT,
            value_parser = clap::value_parser!(i64).range(0..)
        )]
        account_attachments_bytes_max: i64,
        /// Sessions an account may have: past it, creating one is refused with 429 until it
        /// deletes some. Every session counts, delegated children and successors too.
        #[arg(
            long,
            env = "SEED_ACCOUNT_SESSIONS_MAX",
            default_value_t = seed_store::Quotas::default().sessions_max
        )]
        account_sessions_max: u64,
        /// Memory files (`~/memory/…`) an account may keep: a memory call that would make
        /// another is answered with an error, and nothing is written.
        #[arg(
            long,
            env = "SEED_ACCOUNT_MEMORY_FILES_MAX",
            default_value_t = seed_store::Quotas::default().memory_files_max
        )]
        account_memory_files_max: u64,
        /// What all of an account's memory files may hold together, in bytes: a memory call
        /// that would grow them past it is answered with an error, and nothing is written.
        #[arg(
            long,
            env = "SEED_ACCOUNT_MEMORY_BYTES_MAX",
            default_value_t = seed_store::Quotas::default().memory_bytes_max
        )]
        account_memory_bytes_max: u64,
        /// HTTP worker threads.
        #[arg(long, default_value_t = 2)]
        http_workers: usize,
        /// Turns of messages (the interactive queue) in flight at once; more wait their turn
        /// in the queue. Raise it when the model serves many requests at once.
        #[arg(long, env = "SEED_INTERACTIVE_RUNS_MAX", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
        interactive_runs_max: u32,
        /// Turns of background work (delegated children, later passes) in flight at once.
        #[arg(long, env = "SEED_BACKGROUND_RUNS_MAX", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
        background_runs_max: u32,
        /// Turns of one account in flight at once, on both queues together: its share of the
        /// slots, so that one account's slow turns cannot hold them all while another's wait
        /// (its others wait in the queue). When slots free up, the account with the fewest
        /// turns in flight goes first. Default: a quarter of --interactive-runs-max, at least 1.
        #[arg(long, env = "SEED_ACCOUNT_RUNS_MAX", value_parser = clap::value_parser!(u32).range(1..))]
        account_runs_max: Option<u32>,
        /// Restarts that may cut off one turn: a run that the next boot finds cut off once
        /// more is failed rather than started again, so a turn that brings the service down
        /// each time it runs stops doing so.
        #[arg(
            long,
            env = "SEED_RUN_RESTARTS_MAX",
            default_value_t = seed_actors::RuntimeSettings::default().run_restarts_max,
            value_parser = clap::value_parser!(i64).range(0..)
        )]
        run_restarts_max: i64,
        /// How long a call that needs a person's approval waits for a decision, in seconds,
        /// before it is denied with "no answer in N" (the model reads that; the call never
        /// runs); an MCP server's question during a call waits as long, then is answered
        /// "cancel". 0: it waits as long as it takes (a question, as long as its call).
        #[arg(long, env = "SEED_APPROVAL_TIMEOUT_SECS", default_value_t = 0)]
        approval_timeout_secs: u64,
        /// Verbs whose calls wait for a person's approval besides those that ask for it
        /// themselves (an MCP tool marked destructive), by name, comma-separated or repeated:
        /// `--approval-required memory,py__write`. A name no verb has refuses the start.
        #[arg(
            long,
            env = "SEED_APPROVAL_REQUIRED",
            value_delimiter = ',',
            value_name = "VERB"
        )]
        approval_required: Vec<String>,
        /// How long the text of a response in flight waits, at most, before it is committed
        /// to the store and sent to subscribers (the web UI, `seed chat`), in milliseconds.
        /// Nothing is shown before it is committed, so a crash never takes back text a viewer
        /// saw; a shorter interval streams more smoothly and commits more often.
        #[arg(
            long,
            env = "SEED_LIVE_INTERVAL_MS",
            default_value_t = seed_actors::turn::LIVE_INTERVAL_DEFAULT.as_millis() as u64,
            value_parser = clap::value_parser!(u64).range(1..=10_000)
        )]
        live_interval_ms: u64,
        /// Tools from MCP servers: a JSON file in the format other agent hosts read,
        /// `{"mcpServers": {NAME: {"command", "args", "env", "cwd"} | {"url", "headers"}}}`,
        /// each server with an optional `"seed"` section (`enabled`, `timeout_ms`, and `tools`
        /// by name with `enabled`, `safe_to_repeat`, `timeout_ms`). Every tool becomes a verb
        /// `SERVER__TOOL`; one marked read-only or idempotent is safe to repeat, any other is
        /// never run twice across a crash. A server that cannot start stops the start.
        #[arg(long = "mcp", env = "SEED_MCP_CONFIG", value_name = "FILE")]
        mcp: Option<PathBuf>,
        /// Updates one WebSocket subscriber may have waiting to be sent: a client that falls
        /// this far behind (it stopped reading) is closed, its close frame saying so, and
        /// subscribes again.
        #[arg(long, env = "SEED_WS_QUEUE_MAX", default_value_t = crate::subscribers::WS_QUEUE_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        ws_queue_max: u32,
        /// WebSockets one account may hold open at once (one more is refused with 429).
        #[arg(long, env = "SEED_WS_PER_ACCOUNT_MAX", default_value_t = crate::subscribers::WS_PER_ACCOUNT_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        ws_per_account_max: u32,
        /// WebSockets one bearer token may hold open at once (one more is refused with 429).
        #[arg(long, env = "SEED_WS_PER_TOKEN_MAX", default_value_t = crate::subscribers::WS_PER_TOKEN_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        ws_per_token_max: u32,
        /// How often each WebSocket is pinged, in milliseconds; one whose client answered
        /// nothing for a whole interval is closed.
        #[arg(long, env = "SEED_WS_PING_INTERVAL_MS", default_value_t = crate::subscribers::WS_PING_INTERVAL_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(10..))]
        ws_ping_interval_ms: u64,
        /// How long the close frame of a WebSocket the service closes (fallen behind, token
        /// revoked, no answer to a ping) waits for room in the socket, in milliseconds: a client
        /// that reads nothing is given up without it after this.
        #[arg(long, env = "SEED_WS_CLOSE_WAIT_MS", default_value_t = crate::subscribers::WS_CLOSE_WAIT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
        ws_close_wait_ms: u64,
        /// How long each request head may take to arrive, in milliseconds: a connection's first
        /// from its opening (cut off with 408), a later one on a kept-alive connection from its
        /// first byte (the connection is closed).
        #[arg(long, env = "SEED_HEADER_TIMEOUT_MS", default_value_t = HEADER_TIMEOUT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
        header_timeout_ms: u64,
        /// How long a request body may take to arrive, in milliseconds, once the request's
        /// head is authenticated (a slow body is refused with 408). A request that is not
        /// signed, or carries no good token, is refused before its body is read.
        #[arg(long, env = "SEED_BODY_TIMEOUT_MS", default_value_t = crate::api::BODY_TIMEOUT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
        body_timeout_ms: u64,
        /// Connections open at once, all HTTP workers together (WebSockets included); past
        /// it, new connections wait to be accepted.
        #[arg(long, env = "SEED_CONNECTIONS_MAX", default_value_t = CONNECTIONS_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        connections_max: u32,
        /// How long a bearer token is good for, in milliseconds.
        #[arg(long, env = "SEED_TOKEN_TTL_MS", default_value_t = crate::auth::TOKEN_TTL_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1000..))]
        token_ttl_ms: u64,
        /// Bearer tokens one account may hold at once (one more is refused with 429); expired
        /// and signed-out tokens do not count.
        #[arg(long, env = "SEED_TOKENS_PER_ACCOUNT_MAX", default_value_t = crate::auth::TOKENS_PER_ACCOUNT_MAX_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
        tokens_per_account_max: u32,
        /// The URL clients reach the service at when it is not the listen address, as a
        /// reverse proxy that terminates TLS serves it (`https://seed.example.com`). A request
        /// must name this service as its Host: the listen address (on loopback, localhost or
        /// any loopback address too) or this URL's host; another is refused with 421, so a web
        /// page whose name resolves to this address cannot talk to it.
        #[arg(long, env = "SEED_PUBLIC_URL", value_name = "URL")]
        public_url: Option<crate::guard::PublicUrl>,
        /// How long the one-time login link printed at start works, in seconds; after that it
        /// is refused (restart for a new one, or use `seed token`). The link is printed to the
        /// terminal (stdout) alone, never to the log.
        #[arg(
            long,
            env = "SEED_LOGIN_CODE_TTL_SECS",
            default_value_t = crate::auth::LOGIN_CODE_TTL_SECS_DEFAULT,
            value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600)
        )]
        login_code_ttl_secs: u64,
        /// The PostgreSQL database to keep the store in
        /// (postgres://user:password@host:port/database, or PostgreSQL's key=value form;
        /// connections are in plain text, no TLS), migrated at start; without it, the SQLite
        /// database in the data dir. The data dir still holds the local key, the lock and
        /// server.json; attachments' bytes go into the database. A URL that does not parse or
        /// a database that cannot be reached stops the start, naming the cause.
        #[arg(long, env = "SEED_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
        /// With --database, several nodes may share the database: how often this node renews
        /// its lease and sweeps for nodes whose lease lapsed (taking their runs over), in
        /// milliseconds.
        #[arg(long, env = "SEED_NODE_RENEW_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(10..))]
        node_renew_ms: u64,
        /// With --database: how long past its last renewal a node's lease holds, in
        /// milliseconds; a node silent for longer (killed, paused, cut off) has its runs taken
        /// over by another, and its own writes for them are refused from then on (it stops,
        /// to be started again as a new node). Must be longer than --node-renew-ms.
        #[arg(long, env = "SEED_NODE_EXPIRE_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(20..))]
        node_expire_ms: u64,
        /// With --database: the connections this node writes over, side by side (each commits
        /// its own groups of steps; a session's writes always go over the same one). SQLite has
        /// one writer, whatever this says.
        #[arg(long, env = "SEED_WRITER_LANES", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
        writer_lanes: u16,
        /// How durable a commit is, on SQLite (with --database, the PostgreSQL server's own
        /// settings decide): `normal` survives a crash of the process (a power loss may roll
        /// back the newest commits); `full` syncs the WAL at every commit, so a commit survives
        /// a power loss too, at the cost of one fsync per group of commits (see the README's
        /// "Configure the store" for the figures).
        #[arg(long, env = "SEED_SYNCHRONOUS", value_enum, default_value_t = SynchronousArg::Normal)]
        synchronous: SynchronousArg,
        /// The shortest interval the agent may schedule a repeating wake-up at (the schedule
        /// verb's every_seconds), in seconds; a shorter one is refused.
        #[arg(long, env = "SEED_SCHEDULE_INTERVAL_MIN_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        schedule_interval_min_secs: u64,
        /// Wake-ups one session may have still to fire at once; the schedule verb refuses one
        /// more.
        #[arg(long, env = "SEED_SCHEDULES_PER_SESSION_MAX", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
        schedules_per_session_max: u32,
        /// Delay between the scripted model's text deltas, in milliseconds (for tests).
        #[arg(long, default_value_t = 0, hide = true)]
        scripted_delay_ms: u64,
        /// Exports traces over OTLP/HTTP (protobuf) to this endpoint, its traces at
        /// `{URL}/v1/traces`: a span for each HTTP request (continuing a caller's
        /// `traceparent`), run, wait, model request and tool call, with OpenTelemetry's GenAI
        /// attributes. Unset: nothing is exported and nothing is spent on it.
        #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// The share of traces exported, from 0 to 1 (a caller's `traceparent` decides for its
        /// own trace).
        #[arg(
            long,
            env = "SEED_OTLP_SAMPLE",
            value_name = "RATIO",
            default_value_t = 1.0
        )]
        otlp_sample: f64,
        /// Exports the messages' text with the model request spans (sent and answered); without
        /// it, spans carry counts, names and ids alone.
        #[arg(long, env = "SEED_OTLP_CONTENT")]
        otlp_content: bool,
        /// How long spans wait to be sent in a batch, in milliseconds.
        #[arg(long, env = "OTEL_BSP_SCHEDULE_DELAY", default_value_t = crate::traces::BATCH_DELAY_DEFAULT.as_millis() as u64, hide = true)]
        otlp_batch_delay_ms: u64,
        /// Aborts the process the first time a turn reaches this named crash point, as a
        /// crash would (for crash tests of the service).
        #[arg(
            long,
            env = "SEED_CRASH_AT",
            hide = true,
            value_parser = clap::builder::PossibleValuesParser::new(seed_actors::crash::points::ALL)
        )]
        crash_at: Option<String>,
    },
    /// Talks with an agent in a session (a new one unless given), streaming its answers.
    /// `/attach PATH` uploads a file, and the next message carries it.
    Chat { session: Option<String> },
    /// Lists your sessions.
    Sessions {
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// Prints a session's transcript, with its continuation links.
    Show { session: String },
    /// Branches a session at an earlier message: a new session whose conversation is the
    /// session's up to SEQ (the seq of a user or assistant message, as `seed show` prints
    /// them). Prints the new session's id.
    Fork {
        session: String,
        seq: i64,
        /// The fork's title (else the session's).
        #[arg(long)]
        title: Option<String>,
    },
    /// Lists the wake-ups a session's agent scheduled for itself, or cancels one
    /// (`--cancel ID`).
    Schedules {
        session: String,
        /// Cancels this wake-up: it never fires again.
        #[arg(long, value_name = "SCHEDULE_ID")]
        cancel: Option<String>,
    },
    /// Lists a session's calls that wait for a person's approval (and those decided), or
    /// decides one: `--approve CALL_ID` (with `--arguments JSON` to run it with edited
    /// arguments) or `--deny CALL_ID` (with `--reason`, which the model reads). A question an
    /// MCP server asks during a call is listed too, with the fields it asks for, and answered
    /// at the call's id: `--accept CALL_ID --content JSON`, `--decline CALL_ID` or
    /// `--cancel CALL_ID`.
    Approvals {
        session: String,
        /// Approves this call: it runs once.
        #[arg(long, value_name = "CALL_ID", conflicts_with = "deny")]
        approve: Option<String>,
        /// Denies this call: it never runs.
        #[arg(long, value_name = "CALL_ID")]
        deny: Option<String>,
        /// Why the call is denied.
        #[arg(long, requires = "deny")]
        reason: Option<String>,
        /// The arguments the approved call runs with instead of the model's, as a JSON object.
        #[arg(long, value_name = "JSON", requires = "approve")]
        arguments: Option<String>,
        /// Answers the question this call's MCP server asks with `--content`.
        #[arg(
            long,
            value_name = "CALL_ID",
            requires = "content",
            conflicts_with_all = ["approve", "deny", "decline", "cancel"]
        )]
        accept: Option<String>,
        /// The answer's content, a JSON object with the fields the question asks for.
        #[arg(long, value_name = "JSON", requires = "accept")]
        content: Option<String>,
        /// Declines the question this call's MCP server asks.
        #[arg(long, value_name = "CALL_ID", conflicts_with_all = ["approve", "deny", "cancel"])]
        decline: Option<String>,
        /// Cancels the question this call's MCP server asks.
        #[arg(long, value_name = "CALL_ID", conflicts_with_all = ["approve", "deny"])]
        cancel: Option<String>,
    },
    /// Lists the tools sessions are offered, built in and from MCP servers, each with its
    /// class: whether a call cut off by a crash runs again.
    Tools,
    /// Mints a bearer token for a browser (a signed `POST /v1/tokens`): paste it into the web
    /// UI's sign-in form. Prints the token alone, so scripts can take it.
    Token,
    /// Shows the local key (creating it if there is none), or writes a new key to a file.
    Key {
        /// Writes a new key here instead, for another account.
        #[arg(long)]
        new: Option<PathBuf>,
    },
    /// Manages the accounts of this data dir.
    Account {
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Runs the actor simulation over many seeds (crashes injected) and checks the invariants;
    /// exits 1 when one is broken.
    Sim(crate::sim::SimArgs),
    /// Brings the schema up to date and says which versions it applied: of the PostgreSQL
    /// database `--database` names, else of the data dir's SQLite database (made if missing).
    /// `seed serve` migrates its SQLite database by itself at start; this is for an operator
    /// who migrates first.
    Migrate {
        /// The PostgreSQL database (postgres://user:password@host:port/database, or
        /// PostgreSQL's key=value form); connections are in plain text (no TLS).
        #[arg(long, env = "SEED_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
        /// Prints the SQL that makes a new database at the newest version (with the record of
        /// its version) instead, and touches no database.
        #[arg(long)]
        print: bool,
    },
    /// Checks every session of the database, read-only (safe beside a running service): the
    /// log and the store agree, seqs are gapless, every continuation edge has its successor,
    /// every manifest decodes and every excerpt of a projection is byte for byte the events it
    /// cites, every attachment's bytes are there, and SQLite's integrity check. Prints each
    /// finding with its session and a summary; exits 1 on any finding.
    Fsck {
        /// The PostgreSQL database the service keeps its store in (as `seed serve
        /// --database`); without it, the data dir's SQLite database.
        #[arg(long, env = "SEED_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
    },
}

/// `--synchronous`: SQLite's `synchronous` for the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SynchronousArg {
    Normal,
    Full,
}

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Registers another account by its public key (base64, as `seed key` prints it).
    Add {
        public_key: String,
        /// The PostgreSQL database the service keeps its store in (as `seed serve
        /// --database`); without it, the data dir's SQLite database.
        #[arg(long, env = "SEED_DATABASE_URL", value_name = "URL")]
        database: Option<String>,
    },
}

/// Runs the command line.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Serve {
            listen,
            log_json,
            queued_runs_max,
            body_bytes_max,
            attachment_bytes_max,
            account_attachments_bytes_max,
            account_sessions_max,
            account_memory_files_max,
            account_memory_bytes_max,
            http_workers,
            interactive_runs_max,
            background_runs_max,
            account_runs_max,
            run_restarts_max,
            approval_timeout_secs,
            approval_required,
            live_interval_ms,
            mcp,
            ws_queue_max,
            ws_per_account_max,
            ws_per_token_max,
            ws_ping_interval_ms,
            ws_close_wait_ms,
            header_timeout_ms,
            body_timeout_ms,
            connections_max,
            public_url,
            login_code_ttl_secs,
            database,
            node_renew_ms,
            node_expire_ms,
            writer_lanes,
            synchronous,
            token_ttl_ms,
            tokens_per_account_max,
            schedule_interval_min_secs,
            schedules_per_session_max,
            scripted_delay_ms,
            crash_at,
            otlp_endpoint,
            otlp_sample,
            otlp_content,
            otlp_batch_delay_ms,
        } => {
            let exporter = crate::traces::init(
                *log_json,
                &crate::traces::TraceOptions {
                    endpoint: otlp_endpoint.clone().filter(|url| !url.is_empty()),
                    sample_ratio: *otlp_sample,
                    content: *otlp_content,
                    batch_delay: Duration::from_millis(*otlp_batch_delay_ms),
                },
            )?;
            let served = serve::serve(ServeOptions {
                data_dir: cli.data_dir.clone(),
                listen: listen.clone(),
                limits: crate::api::Limits {
                    queued_runs_per_account_max: *queued_runs_max,
                    body_bytes_max: *body_bytes_max,
                    attachment_bytes_max: *attachment_bytes_max,
                    account_attachments_bytes_max: *account_attachments_bytes_max,
                    body_timeout: Duration::from_millis(*body_timeout_ms),
                    ..Default::default()
                },
                scripted_delta_delay: (*scripted_delay_ms > 0)
                    .then(|| Duration::from_millis(*scripted_delay_ms)),
                http_workers: *http_workers,
                runs_max: (
                    *interactive_runs_max as usize,
                    *background_runs_max as usize,
                ),
                account_runs_max: account_runs_max.map_or_else(
                    || seed_actors::account_runs_max_default(*interactive_runs_max as usize),
                    |runs_max| runs_max as usize,
                ),
                run_restarts_max: *run_restarts_max,
                approval_timeout: (*approval_timeout_secs > 0)
                    .then(|| Duration::from_secs(*approval_timeout_secs)),
                approval_required: approval_required.clone(),
                quotas: seed_store::Quotas {
                    sessions_max: *account_sessions_max,
                    memory_files_max: *account_memory_files_max,
                    memory_bytes_max: *account_memory_bytes_max,
                },
                live_interval: Duration::from_millis(*live_interval_ms),
                mcp_config: mcp.clone(),
                crash_at: crash_at.as_deref().and_then(|point| {
                    seed_actors::crash::points::ALL
                        .into_iter()
                        .find(|known| *known == point)
                }),
                subscriber_limits: crate::subscribers::SubscriberLimits {
                    queue_max: *ws_queue_max as usize,
                    per_account_max: *ws_per_account_max as usize,
                    per_token_max: *ws_per_token_max as usize,
                    ping_interval: Duration::from_millis(*ws_ping_interval_ms),
                    close_wait: Duration::from_millis(*ws_close_wait_ms),
                },
                token_ttl_ms: *token_ttl_ms,
                tokens_per_account_max: *tokens_per_account_max as usize,
                header_timeout: Duration::from_millis(*header_timeout_ms),
                connections_max: *connections_max as usize,
                public_url: public_url.clone(),
                login_code_ttl: Duration::from_secs(*login_code_ttl_secs),
                database: database.clone().map(seed_store::DatabaseUrl),
                node_renew: Duration::from_millis(*node_renew_ms),
                node_expire: Duration::from_millis(*node_expire_ms),
                writer_lanes: usize::from(*writer_lanes),
                synchronous: match synchronous {
                    SynchronousArg::Normal => seed_store::Synchronous::Normal,
                    SynchronousArg::Full => seed_store::Synchronous::Full,
                },
                schedule: seed_actors::verbs::schedule::Schedule {
                    interval_ms_min: i64::try_from(*schedule_interval_min_secs)
                        .unwrap_or(i64::MAX / 1000)
                        .saturating_mul(1000),
                    per_session_max: *schedules_per_session_max as usize,
                },
                traces: exporter
                    .as_ref()
                    .map(crate::traces::Exporter::traces)
                    .unwrap_or_default(),
            });
            // What the last requests and runs left is sent before the process ends.
            if let Some(exporter) = exporter {
                exporter.shutdown();
            }
            served
        }
        Command::Key { new } => key(&cli, new.as_deref()),
        Command::Account {
            command:
                AccountCommand::Add {
                    public_key,
                    database,
                },
        } => account_add(&cli, public_key, database.as_deref()),
        Command::Chat { session } => {
            with_client(&cli, |client| crate::chat::chat(client, session.clone()))
        }
        Command::Sessions { limit } => with_client(&cli, |client| sessions(client, *limit)),
        Command::Show { session } => with_client(&cli, |client| show(client, session.clone())),
        Command::Fork {
            session,
            seq,
            title,
        } => with_client(&cli, |client| {
            fork(client, session.clone(), *seq, title.clone())
        }),
        Command::Schedules { session, cancel } => with_client(&cli, |client| {
            schedules(client, session.clone(), cancel.clone())
        }),
        Command::Approvals {
            session,
            approve,
            deny,
            reason,
            arguments,
            accept,
            content,
            decline,
            cancel,
        } => {
            let decision = match approval_request(approve, deny, reason, arguments)? {
                Some(decision) => Some(decision),
                None => question_request(accept, content, decline, cancel)?,
            };
            with_client(&cli, |client| approvals(client, session.clone(), decision))
        }
        Command::Token => with_client(&cli, token),
        Command::Tools => with_client(&cli, tools),
        Command::Sim(args) => crate::sim::run(args),
        Command::Migrate { database, print } => {
            migrate::migrate(&cli.data_dir, database.as_deref(), *print)
        }
        Command::Fsck { database } => fsck::fsck(&cli.data_dir, database.as_deref()),
    }
}

fn signing_key(cli: &Cli) -> anyhow::Result<AccountKey> {
    let path = cli
        .key
        .clone()
        .unwrap_or_else(|| cli.data_dir.join(LOCAL_KEY_FILE));
    AccountKey::load(&path).with_context(|| {
        format!(
            "no key at {} (start `seed serve` once, or run `seed key`)",
            path.display()
        )
    })
}

fn service_url(cli: &Cli) -> anyhow::Result<String> {
    if let Some(url) = &cli.url {
        return Ok(url.clone());
    }
    let path = cli.data_dir.join(SERVER_FILE);
    if !serve::is_serving(&cli.data_dir) {
        // A service that was killed leaves its server.json behind: say so, not "connection
        // refused" at an old port.
        anyhow::bail!(
            "no service is running on {} (start `seed serve`, or pass --url)",
            cli.data_dir.display()
        );
    }
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no service is running on {} (start `seed serve`, or pass --url)",
            cli.data_dir.display()
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text)?;
    value["url"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("{} names no url", path.display()))
}

fn with_client<F, Fut>(cli: &Cli, run: F) -> anyhow::Result<()>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let client = Client::new(&service_url(cli)?, signing_key(cli)?)?;
    actix_web::rt::System::new().block_on(run(client))
}

fn key(cli: &Cli, new: Option<&std::path::Path>) -> anyhow::Result<()> {
    let key = match new {
        Some(path) => {
            let key = AccountKey::generate()?;
            key.save(path)?;
            println!("wrote a new key to {}", path.display());
            key
        }
        None => {
            let (key, created) = serve::local_key(&cli.data_dir)?;
            if created {
                println!("created the local key in {}", cli.data_dir.display());
            }
            key
        }
    };
    println!("account: {}", key.account_id);
    println!("public key: {}", key.public_key_base64());
    if new.is_some() {
        println!(
            "register it with: seed account add {}",
            key.public_key_base64()
        );
    }
    Ok(())
}

fn account_add(cli: &Cli, public_key: &str, database: Option<&str>) -> anyhow::Result<()> {
    let public_key = parse_public_key(public_key).map_err(|error| anyhow::anyhow!(error))?;
    let account_id = account_id_for(&public_key);
    let store = serve::open_store(
        &cli.data_dir,
        database
            .map(|url| seed_store::DatabaseUrl(url.to_owned()))
            .as_ref(),
        seed_store::Quotas::default(),
        seed_store::Synchronous::Normal,
        1,
    )?;
    let runtime = actix_web::rt::System::new();
    runtime.block_on(async {
        if store.get_account(account_id).await?.is_some() {
            println!("account {account_id} exists already");
        } else {
            store
                .create_account(account_id, public_key.to_vec(), serve::now_ms())
                .await?;
            println!("added account {account_id}");
        }
        anyhow::Ok(())
    })
}

#[cfg(test)]
pub(crate) mod tests;
