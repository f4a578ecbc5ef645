//! The shell: a connection to each configured MCP server, kept up, and calls through it.
//!
//! Each enabled server has a supervisor task (spawned on the runtime [`McpServers::start`] runs
//! on, so it outlives the caller's task) that connects (a stdio child or streamable HTTP),
//! initializes, lists the tools (all pages) and then waits: for the connection to end, or for
//! `notifications/tools/list_changed`, which lists the tools again. A connection that ends (the
//! child exited, its stdout closed) fails the calls in flight (rmcp drops their responders:
//! each gets an error result naming the server) and is made again after a backoff
//! ([`RESTART_BACKOFF_FIRST`] doubling to [`RESTART_BACKOFF_MAX`]; it starts over once a
//! connection has lived that long). A call made while its server restarts waits for it, within
//! the call's timeout, so a restart between calls fails none.
//!
//! A line on a stdio server's stdout that is not JSON is skipped (rmcp logs it): a server that
//! garbles an answer is answered at the call's timeout; one that garbles the handshake and
//! exits is refused at start.
//!
//! A call past its timeout, or dropped, or stopped ([`McpServers::call_until`]) sends
//! `notifications/cancelled` for its request: rmcp's `call_tool` does when its future is
//! dropped before the answer.
//!
//! Invariant: a server's tools stay on offer while it restarts (the last list it gave); they
//! change only when a new list differs, and each change bumps the generation in
//! [`McpServers::changes`].
//!
//! [`RESTART_BACKOFF_FIRST`]: crate::limits::RESTART_BACKOFF_FIRST
//! [`RESTART_BACKOFF_MAX`]: crate::limits::RESTART_BACKOFF_MAX

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::future::join_all;
use rmcp::model::{CallToolRequestParams, Implementation};
use rmcp::{Peer, RoleClient, ServiceError};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{McpConfig, ServerConfig, Transport};
use crate::elicitation::{Asker, People, attribute};
use crate::names::NameClash;
use crate::result::{CallOutput, render};
use crate::tools::{ListedTool, McpTool, catalogue};

mod connection;

use connection::{install_crypto_provider, supervise};

/// The running connections to the configured servers. Cheap to clone; the connections end
/// when the last clone is dropped (or at [`McpServers::shutdown`]).
#[derive(Clone)]
pub struct McpServers {
    shared: Arc<Shared>,
    stop: Arc<Stop>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpServers")
            .field("servers", &self.describe())
            .finish()
    }
}

/// A server as `seed tools` and the logs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The name in the configuration.
    pub name: String,
    /// The server's own name and version (its `serverInfo`), once it connected.
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// The tools it listed last, disabled ones included.
    pub n_tools: usize,
    pub state: ServerState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Connected,
    /// The connection ended or a restart failed; the next attempt comes after the backoff.
    Restarting {
        attempt: u32,
        error: String,
    },
    Stopped,
}

/// Why [`McpServers::start`] refused.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Servers that could not start at all.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Servers(Vec<ServerStartError>),
    #[error(transparent)]
    NameClash(#[from] NameClash),
}

#[derive(Debug, thiserror::Error)]
#[error("mcp server {server:?} did not start: {error}")]
pub struct ServerStartError {
    pub server: String,
    pub error: ConnectError,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot run {command:?}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    /// The handshake failed; for a stdio server, with the last lines of its stderr.
    #[error("initialize failed: {message}{stderr}")]
    Initialize { message: String, stderr: String },
    #[error("tools/list failed: {0}")]
    ListTools(String),
    #[error("no answer within {} s", .0.as_secs())]
    Timeout(Duration),
    #[error("its supervisor task ended")]
    Gone,
}

/// What the supervisors and the callers share.
struct Shared {
    servers: Vec<Arc<Server>>,
    /// Every connected server's tools by verb name: what [`McpServers::tools`] and calls read.
    tools: RwLock<BTreeMap<String, McpTool>>,
    /// The generation of `tools`: bumped on each change, so the adapter rebuilds its verbs.
    changes: watch::Sender<u64>,
    /// Set once `start` returned: clashes found after that are logged (before, they refuse the
    /// start).
    started: AtomicBool,
    /// Who answers the servers' questions (elicitations), and the questions waiting.
    people: Arc<People>,
}

/// One configured server.
struct Server {
    config: ServerConfig,
    /// The live connection: `None` while the server starts or restarts. Calls wait on it.
    peer: watch::Sender<Option<Peer<RoleClient>>>,
    status: Mutex<Status>,
    /// The last lines of a stdio server's stderr, for the error when it does not start.
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Seed's calls in flight to it: a question the server asks belongs to one of them.
    in_flight: Arc<InFlight>,
}

/// The calls in flight to one server, in the order they were made.
#[derive(Default)]
struct InFlight {
    next_id: AtomicU64,
    calls: Mutex<Vec<CallInFlight>>,
}

struct CallInFlight {
    id: u64,
    /// Who answers the server's questions during the call; `None` for a call made for no one
    /// (a reconciliation).
    asker: Option<Arc<dyn Asker>>,
    /// Cancelled when the call ends: a question still waiting is closed then.
    ended: CancellationToken,
}

/// A call's place in [`InFlight`], given up when the call ends (or its future is dropped).
struct InFlightGuard {
    in_flight: Arc<InFlight>,
    id: u64,
    ended: CancellationToken,
}

impl InFlight {
    fn enter(self: &Arc<Self>, asker: Option<Arc<dyn Asker>>) -> InFlightGuard {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let ended = CancellationToken::new();
        lock(&self.calls).push(CallInFlight {
            id,
            asker,
            ended: ended.clone(),
        });
        InFlightGuard {
            in_flight: Arc::clone(self),
            id,
            ended,
        }
    }

    /// Who answers a question the server asks now, and the token of that call's end; or why
    /// no call can be told.
    fn asker(&self) -> Result<(Arc<dyn Asker>, CancellationToken), String> {
        let calls = lock(&self.calls);
        let can_ask: Vec<bool> = calls.iter().map(|call| call.asker.is_some()).collect();
        let call = &calls[attribute(&can_ask)?];
        let asker = call
            .asker
            .clone()
            .expect("attribute picks a call that can ask");
        Ok((asker, call.ended.clone()))
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        lock(&self.in_flight.calls).retain(|call| call.id != self.id);
        self.ended.cancel();
    }
}

struct Status {
    implementation: Option<Implementation>,
    /// The tools the server listed last, kept while it restarts.
    tools: Vec<ListedTool>,
    state: ServerState,
}

/// Stops the supervisors when the last [`McpServers`] is dropped.
struct Stop {
    token: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl McpServers {
    /// Connects every enabled server, concurrently, each within [`START_TIMEOUT`]; a server
    /// that cannot start, or two tools that fit to one verb name, refuse the start. Runs on
    /// the current tokio runtime.
    ///
    /// [`START_TIMEOUT`]: crate::limits::START_TIMEOUT
    pub async fn start(config: McpConfig) -> Result<McpServers, StartError> {
        let servers: Vec<Arc<Server>> = config
            .enabled()
            .map(|server| {
                Arc::new(Server {
                    config: server.clone(),
                    peer: watch::Sender::new(None),
                    status: Mutex::new(Status {
                        implementation: None,
                        tools: Vec::new(),
                        state: ServerState::Starting,
                    }),
                    stderr_tail: Arc::default(),
                    in_flight: Arc::default(),
                })
            })
            .collect();
        if servers
            .iter()
            .any(|server| matches!(server.config.transport, Transport::Http(_)))
        {
            install_crypto_provider();
        }
        let shared = Arc::new(Shared {
            servers,
            tools: RwLock::default(),
            changes: watch::Sender::new(0),
            started: AtomicBool::new(false),
            people: Arc::default(),
        });
        let token = CancellationToken::new();
        let mut firsts = Vec::new();
        let mut tasks = Vec::new();
        for server in &shared.servers {
            let (first_sender, first) = oneshot::channel();
            tasks.push(tokio::spawn(supervise(
                shared.clone(),
                server.clone(),
                token.child_token(),
                first_sender,
            )));
            firsts.push(async move {
                let result = first.await.unwrap_or(Err(ConnectError::Gone));
                (server.config.name.clone(), result)
            });
        }
        let stop = Arc::new(Stop {
            token,
            tasks: Mutex::new(tasks),
        });
        let failures: Vec<ServerStartError> = join_all(firsts)
            .await
            .into_iter()
            .filter_map(|(server, result)| {
                result.err().map(|error| ServerStartError { server, error })
            })
            .collect();
        if !failures.is_empty() {
            return Err(StartError::Servers(failures));
        }
        if let Some(clash) = shared.republish().into_iter().next() {
            return Err(StartError::NameClash(clash));
        }
        shared.started.store(true, Ordering::SeqCst);
        Ok(McpServers { shared, stop })
    }

    /// Every tool on offer, by verb name.
    pub fn tools(&self) -> Vec<McpTool> {
        self.shared
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The tool named `verb_name`, if it is on offer.
    pub fn tool(&self, verb_name: &str) -> Option<McpTool> {
        self.shared
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(verb_name)
            .cloned()
    }

    /// Who answers the questions servers ask during calls: connect it to the runtime once it
    /// runs, and hand it the answers people record.
    pub fn people(&self) -> &Arc<People> {
        &self.shared.people
    }

    /// The tools' generation: it changes each time [`McpServers::tools`] does.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Each server's name, version, tool count and state.
    pub fn describe(&self) -> Vec<ServerInfo> {
        self.shared
            .servers
            .iter()
            .map(|server| {
                let status = lock(&server.status);
                ServerInfo {
                    name: server.config.name.clone(),
                    server_name: status.implementation.as_ref().map(|info| info.name.clone()),
                    server_version: status
                        .implementation
                        .as_ref()
                        .map(|info| info.version.clone()),
                    n_tools: status.tools.len(),
                    state: status.state.clone(),
                }
            })
            .collect()
    }

    /// Calls the tool named `verb_name` with `arguments` (a JSON object, or null for none).
    /// Every failure is an error result naming the server: none is an `Err`. Dropping the
    /// future cancels the call on the server; past the tool's timeout it is cancelled and
    /// answered "did not answer within N s".
    pub fn call(
        &self,
        verb_name: &str,
        arguments: serde_json::Value,
    ) -> impl Future<Output = CallOutput> + Send + 'static {
        self.call_for(verb_name, arguments, None)
    }

    /// [`McpServers::call`], in flight with `asker` to answer the server's questions.
    fn call_for(
        &self,
        verb_name: &str,
        arguments: serde_json::Value,
        asker: Option<Arc<dyn Asker>>,
    ) -> impl Future<Output = CallOutput> + Send + 'static {
        let tool = self.tool(verb_name);
        let server = tool.as_ref().and_then(|tool| {
            self.shared
                .servers
                .iter()
                .find(|server| server.config.name == tool.server)
                .cloned()
        });
        let verb_name = verb_name.to_owned();
        async move {
            let (Some(tool), Some(server)) = (tool, server) else {
                return CallOutput::error(format!("no MCP tool is named {verb_name:?}"));
            };
            let _in_flight = server.in_flight.enter(asker);
            call(&tool, &server, arguments).await
        }
    }

    /// [`McpServers::call`], stopped when `stop` completes first (a stopped turn): the call is
    /// cancelled on the server and answered with an error.
    pub fn call_until(
        &self,
        verb_name: &str,
        arguments: serde_json::Value,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = CallOutput> + Send + 'static {
        until(self.call(verb_name, arguments), stop)
    }

    /// [`McpServers::call_until`] for a call whose server may ask the person a question
    /// (`elicitation/create`): while it is in flight, `asker` answers them.
    pub fn call_asking(
        &self,
        verb_name: &str,
        arguments: serde_json::Value,
        stop: impl Future<Output = ()> + Send + 'static,
        asker: Arc<dyn Asker>,
    ) -> impl Future<Output = CallOutput> + Send + 'static {
        until(self.call_for(verb_name, arguments, Some(asker)), stop)
    }

    /// Stops every connection and waits for the supervisors to end (a stdio child is closed
    /// and waited for, then killed if it does not exit).
    pub async fn shutdown(&self) {
        self.stop.token.cancel();
        let tasks = std::mem::take(&mut *lock(&self.stop.tasks));
        join_all(tasks).await;
    }
}

/// `call`, stopped when `stop` completes first: dropping the call cancels it on the server.
async fn until(
    call: impl Future<Output = CallOutput>,
    stop: impl Future<Output = ()>,
) -> CallOutput {
    tokio::select! {
        biased;
        output = call => output,
        () = stop => CallOutput::error(
            "the call was stopped before it answered; the server was asked to cancel it",
        ),
    }
}

async fn call(tool: &McpTool, server: &Server, arguments: serde_json::Value) -> CallOutput {
    let name = &server.config.name;
    let arguments = match arguments {
        serde_json::Value::Object(arguments) => Some(arguments),
        serde_json::Value::Null => None,
        other => {
            return CallOutput::error(format!(
                "the arguments of {} must be a JSON object, not {other}",
                tool.verb_name
            ));
        }
    };
    let deadline = Instant::now() + tool.timeout;
    let mut connection = server.peer.subscribe();
    // A connection whose transport closed is on its way out: wait for the next one.
    let live = |peer: &Option<Peer<RoleClient>>| {
        peer.as_ref()
            .is_some_and(|peer| !peer.is_transport_closed())
    };
    let peer = match tokio::time::timeout_at(deadline, connection.wait_for(live)).await {
        Ok(Ok(peer)) => peer.clone().expect("wait_for returned a live connection"),
        Ok(Err(_)) | Err(_) => {
            let state = match &lock(&server.status).state {
                ServerState::Restarting { error, .. } => format!("restarting after: {error}"),
                other => format!("{other:?}").to_lowercase(),
            };
            return CallOutput::error(format!(
                "mcp server {name:?} is not running ({state}); {} was not called within {}",
                tool.tool,
                seconds(tool.timeout)
            ));
        }
    };
    let mut params = CallToolRequestParams::new(tool.tool.clone());
    if let Some(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    // Dropping `call_tool`'s future before its answer sends notifications/cancelled.
    match tokio::time::timeout_at(deadline, peer.call_tool(params)).await {
        Err(_) => CallOutput::error(format!(
            "mcp server {name:?}: {} did not answer within {}; the call was cancelled",
            tool.tool,
            seconds(tool.timeout)
        )),
        Ok(Ok(result)) => render(&result),
        Ok(Err(ServiceError::McpError(error))) => CallOutput::error(format!(
            "mcp server {name:?}: {} failed: {} (code {})",
            tool.tool, error.message, error.code.0
        )),
        Ok(Err(ServiceError::TransportClosed)) => CallOutput::error(format!(
            "mcp server {name:?} closed the connection during the call to {} (it exited or \
             its output broke off); it is being restarted",
            tool.tool
        )),
        Ok(Err(error)) => CallOutput::error(format!(
            "mcp server {name:?}: the call to {} failed: {}",
            tool.tool,
            chain(&error)
        )),
    }
}

/// `2 s`, `0.5 s`.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// An error and its sources, joined by ": ".
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text += &format!(": {cause_text}");
        }
        source = cause.source();
    }
    text
}

impl Shared {
    /// Rebuilds the tools from every server's last list; bumps the generation when they
    /// changed. Returns the clashes (their later tools are left out).
    fn republish(&self) -> Vec<NameClash> {
        let statuses: Vec<_> = self
            .servers
            .iter()
            .map(|server| (server, lock(&server.status).tools.clone()))
            .collect();
        let catalogue = catalogue(
            statuses
                .iter()
                .map(|(server, tools)| (&server.config, tools.as_slice())),
        );
        let mut tools = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        if *tools != catalogue.tools {
            *tools = catalogue.tools;
            self.changes.send_modify(|generation| *generation += 1);
        }
        if self.started.load(Ordering::SeqCst) {
            for clash in &catalogue.clashes {
                tracing::error!(%clash, "mcp tool left out");
            }
        }
        catalogue.clashes
    }
}

impl Server {
    fn set_state(&self, state: ServerState) {
        lock(&self.status).state = state;
    }

    fn stderr_text(&self) -> String {
        let tail = lock(&self.stderr_tail);
        if tail.is_empty() {
            return String::new();
        }
        format!(
            "; its stderr ended with: {}",
            tail.iter().cloned().collect::<Vec<_>>().join(" | ")
        )
    }
}
