//! A server's connection, kept up: the supervisor that connects and reconnects
//! ([`supervise`]), the handshake over stdio or streamable HTTP, publishing the tools a
//! connection lists, and the handler of what the server sends (a changed list of tools, a
//! question for the person).

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, QuitReason, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ConnectError, InFlight, Server, ServerState, Shared, chain, lock};
use crate::config::Transport;
use crate::elicitation::{Question, Reply};
use crate::limits::{
    RESTART_BACKOFF_FIRST, RESTART_BACKOFF_MAX, START_TIMEOUT, STDERR_LINE_CHARS_MAX,
    STDERR_LINES_KEPT,
};
use crate::tools::ListedTool;

/// Keeps one server connected until `token` is cancelled. The first attempt's outcome goes to
/// `first`; when it fails, the supervisor ends (the start is refused).
pub(super) async fn supervise(
    shared: Arc<Shared>,
    server: Arc<Server>,
    token: CancellationToken,
    first: oneshot::Sender<Result<(), ConnectError>>,
) {
    let name = server.config.name.clone();
    let mut first = Some(first);
    let mut backoff = RESTART_BACKOFF_FIRST;
    let mut attempt = 0;
    loop {
        let connected = tokio::select! {
            () = token.cancelled() => break,
            result = tokio::time::timeout(START_TIMEOUT, connect(&server, token.child_token())) =>
                result.unwrap_or(Err(ConnectError::Timeout(START_TIMEOUT))),
        };
        let error = match connected {
            Ok(connection) => {
                publish(&shared, &server, &connection);
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(()));
                }
                attempt = 0;
                let connected_at = Instant::now();
                let reason = serve(&shared, &server, connection).await;
                if token.is_cancelled() {
                    break;
                }
                if connected_at.elapsed() >= RESTART_BACKOFF_MAX {
                    backoff = RESTART_BACKOFF_FIRST;
                }
                tracing::warn!(server = %name, %reason, "mcp server connection ended; restarting");
                reason
            }
            Err(error) => {
                if let Some(first) = first.take() {
                    let _ = first.send(Err(error));
                    break;
                }
                tracing::warn!(server = %name, %error, attempt, "mcp server did not restart");
                error.to_string()
            }
        };
        attempt += 1;
        server.set_state(ServerState::Restarting { attempt, error });
        tokio::select! {
            () = token.cancelled() => break,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RESTART_BACKOFF_MAX);
    }
    server.peer.send_replace(None);
    server.set_state(ServerState::Stopped);
}

/// A connection made: initialized, its tools listed.
struct Connection {
    running: RunningService<RoleClient, Handler>,
    list_changed: mpsc::UnboundedReceiver<()>,
    implementation: Option<Implementation>,
    tools: Vec<ListedTool>,
}

async fn connect(server: &Server, token: CancellationToken) -> Result<Connection, ConnectError> {
    let (list_changed_sender, list_changed) = mpsc::unbounded_channel();
    let handler = Handler {
        list_changed: list_changed_sender,
        server: server.config.name.clone(),
        in_flight: server.in_flight.clone(),
    };
    let running = match &server.config.transport {
        Transport::Stdio(stdio) => {
            let mut command = tokio::process::Command::new(&stdio.command);
            command
                .args(&stdio.args)
                .envs(&stdio.env)
                .kill_on_drop(true);
            if let Some(cwd) = &stdio.cwd {
                command.current_dir(cwd);
            }
            let (transport, stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    command: stdio.command.clone(),
                    source,
                })?;
            lock(&server.stderr_tail).clear();
            let stderr_task = stderr.map(|stderr| {
                tokio::spawn(keep_stderr(
                    server.config.name.clone(),
                    stderr,
                    server.stderr_tail.clone(),
                ))
            });
            match handler.serve_with_ct(transport, token).await {
                Ok(running) => running,
                Err(error) => {
                    // The child's stderr ends when it exits: wait for its last lines, briefly.
                    if let Some(task) = stderr_task {
                        let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
                    }
                    return Err(ConnectError::Initialize {
                        message: chain(&error),
                        stderr: server.stderr_text(),
                    });
                }
            }
        }
        Transport::Http(http) => {
            let mut headers = HashMap::new();
            for (header, value) in &http.headers {
                // Checked by the configuration; a header that still does not convert is left
                // out rather than failing the server.
                match (
                    reqwest::header::HeaderName::from_bytes(header.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    (Ok(header), Ok(value)) => {
                        headers.insert(header, value);
                    }
                    _ => tracing::warn!(server = %server.config.name, %header, "header left out"),
                }
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(headers),
            );
            handler
                .serve_with_ct(transport, token)
                .await
                .map_err(|error| ConnectError::Initialize {
                    message: chain(&error),
                    stderr: String::new(),
                })?
        }
    };
    let implementation = running
        .peer()
        .peer_info()
        .and_then(|info| info.server_info.clone());
    let tools = running
        .peer()
        .list_all_tools()
        .await
        .map_err(|error| ConnectError::ListTools(chain(&error)))?;
    Ok(Connection {
        running,
        list_changed,
        implementation,
        tools: tools.iter().map(ListedTool::from).collect(),
    })
}

/// Offers a new connection's tools and the connection itself to calls.
fn publish(shared: &Shared, server: &Server, connection: &Connection) {
    let name = &server.config.name;
    let implementation = connection.implementation.clone();
    let listed: Vec<&str> = connection
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    for configured in server.config.tools.keys() {
        if !listed.contains(&configured.as_str()) {
            tracing::warn!(server = %name, tool = %configured, "seed.tools names a tool the server does not list");
        }
    }
    tracing::info!(
        server = %name,
        server_name = implementation.as_ref().map_or("", |info| info.name.as_str()),
        server_version = implementation.as_ref().map_or("", |info| info.version.as_str()),
        n_tools = listed.len(),
        "mcp server connected"
    );
    {
        let mut status = lock(&server.status);
        status.implementation = implementation;
        status.tools = connection.tools.clone();
        status.state = ServerState::Connected;
    }
    shared.republish();
    server
        .peer
        .send_replace(Some(connection.running.peer().clone()));
}

/// Serves a published connection until it ends; returns why it ended.
async fn serve(shared: &Shared, server: &Server, connection: Connection) -> String {
    let Connection {
        running,
        mut list_changed,
        ..
    } = connection;
    let name = &server.config.name;
    let peer = running.peer().clone();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let reason = loop {
        tokio::select! {
            quit = &mut waiting => break match quit {
                Ok(QuitReason::Closed) => "the connection closed".to_owned(),
                Ok(QuitReason::Cancelled) => "the connection was cancelled".to_owned(),
                Ok(QuitReason::JoinError(error)) | Err(error) =>
                    format!("the connection's task failed: {error}"),
                Ok(other) => format!("the connection ended: {other:?}"),
            },
            Some(()) = list_changed.recv() => {
                // Several notifications in a row need one listing.
                while list_changed.try_recv().is_ok() {}
                match peer.list_all_tools().await {
                    Ok(tools) => {
                        let n_tools = tools.len();
                        lock(&server.status).tools = tools.iter().map(ListedTool::from).collect();
                        shared.republish();
                        tracing::info!(server = %name, n_tools, "mcp server's tools changed");
                    }
                    Err(error) => tracing::warn!(
                        server = %name, error = %chain(&error), "mcp server's tools could not be listed again"
                    ),
                }
            }
        }
    };
    server.peer.send_replace(None);
    reason
}

/// Logs a stdio server's stderr (debug) and keeps its last lines.
async fn keep_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, line = %line, "mcp server stderr");
        let line: String = line.chars().take(STDERR_LINE_CHARS_MAX).collect();
        let mut tail = lock(&tail);
        if tail.len() == STDERR_LINES_KEPT {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// The client side of a connection: Seed's name, a note when the tools change, and the
/// server's questions (elicitations) put to the person behind the call in flight.
struct Handler {
    list_changed: mpsc::UnboundedSender<()>,
    /// The server's name in the configuration, for the logs.
    server: String,
    in_flight: Arc<InFlight>,
}

impl Handler {
    /// Puts a form question to the person behind the call in flight, and answers the server
    /// with their reply. One that cannot be tied to a call, or that asks for a URL to be
    /// opened, is refused with the reason.
    async fn elicit(
        &self,
        request: ElicitRequestParams,
        withdrawn: CancellationToken,
    ) -> Result<ElicitResult, ErrorData> {
        let refuse = |reason: String| {
            tracing::warn!(server = %self.server, %reason, "an mcp server's question was refused");
            ErrorData::invalid_request(format!("seed declines the elicitation: {reason}"), None)
        };
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Err(refuse("seed answers form elicitations only".to_owned()));
        };
        let requested_schema = serde_json::to_value(&requested_schema)
            .map_err(|error| refuse(format!("its schema does not serialize: {error}")))?;
        let (asker, call_ended) = self.in_flight.asker().map_err(refuse)?;
        let ended = call_ended.child_token();
        let ask = asker.ask(
            Question {
                message,
                requested_schema,
            },
            ended.clone(),
        );
        tokio::pin!(ask);
        // The server withdrawing its question (notifications/cancelled) closes it like the
        // call's end does.
        let reply = loop {
            tokio::select! {
                reply = &mut ask => break reply,
                () = withdrawn.cancelled(), if !ended.is_cancelled() => ended.cancel(),
            }
        };
        Ok(match reply.map_err(refuse)? {
            Reply::Accept { content } => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            Reply::Decline => ElicitResult::new(ElicitationAction::Decline),
            Reply::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.list_changed.send(());
        std::future::ready(())
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        self.elicit(request, context.ct)
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        ClientConfig::new(
            capabilities,
            Implementation::new("seed", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Installs ring as the process's TLS crypto provider, once (unless one is installed already):
/// the workspace's reqwest has TLS without a provider of its own.
pub(super) fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer leaves theirs, which serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}
