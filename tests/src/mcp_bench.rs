//! The workload of the `mcp` bench suite: turns that call one tool through the whole runtime,
//! the tool an MCP server's (`@modelcontextprotocol/server-everything`'s `echo`, over stdio)
//! or a verb of the process that answers the same at once, so that the two compare.
//!
//! A turn is a user message, a response with one call of `everything__echo`, its result and
//! an answer: four steps, each committed before the next. Every call is timed where the runtime
//! makes it (the verb's actor asked, the answer back), so a call's figure is the MCP round trip
//! and what the verb layer adds, not the turn around it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::future::BoxFuture;
use seed_actors::{Runtime, Verb, VerbContext, VerbOutput};
use seed_events::RunStatus;
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::Config;

use crate::runtime_bench::{clock, session, settings, store_with_sessions, user_message};

/// Records of a turn: the input, the response with its call, the result, the answer.
pub const STEPS_PER_TURN: usize = 4;

/// The verb every turn calls.
pub const ECHO: &str = "everything__echo";

/// The longest a workload may take before the bench calls it a hang.
const HANG_GUARD: Duration = Duration::from_secs(300);

/// Where scripts/mcp-servers.sh installs the servers, under the workspace's target dir.
fn installed() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("mcp-servers")
}

/// The reference server's binary, installed by scripts/mcp-servers.sh when missing.
pub fn everything_server() -> anyhow::Result<PathBuf> {
    let binary = installed().join("node/node_modules/.bin/mcp-server-everything");
    if !binary.exists() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("tests/ has a parent")?;
        let status = Command::new(workspace.join("scripts/mcp-servers.sh"))
            .status()
            .context("running scripts/mcp-servers.sh")?;
        if !status.success() {
            bail!("scripts/mcp-servers.sh failed: {status}");
        }
    }
    Ok(binary)
}

/// Which tool the turns call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchTool {
    /// server-everything's `echo`, over stdio.
    Mcp,
    /// A verb of this process with the same name, schema and answer, answering at once.
    Scripted,
}

/// The verb standing in for the MCP tool.
struct LocalEcho;

impl Verb for LocalEcho {
    fn name(&self) -> &str {
        ECHO
    }
    fn description(&self) -> &str {
        "Echoes back the input."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        })
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, arguments: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let message = arguments["message"].as_str().unwrap_or_default().to_owned();
        Box::pin(async move { VerbOutput::ok(format!("Echo: {message}")) })
    }
}

/// A verb that times each call of the one it wraps.
struct Timed {
    inner: Arc<dyn Verb>,
    calls: Arc<Mutex<Vec<Duration>>>,
}

impl Verb for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> serde_json::Value {
        self.inner.parameters()
    }
    fn safe_to_repeat(&self) -> bool {
        self.inner.safe_to_repeat()
    }
    fn call(
        &self,
        context: VerbContext,
        arguments: serde_json::Value,
    ) -> BoxFuture<'static, VerbOutput> {
        let call = self.inner.call(context, arguments);
        let calls = Arc::clone(&self.calls);
        Box::pin(async move {
            let started = Instant::now();
            let output = call.await;
            calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(started.elapsed());
            output
        })
    }
}

/// The model: a turn's first request gets one call of [`ECHO`], the request after its result
/// the answer.
fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        if matches!(
            request.messages.last().map(|message| message.as_ref()),
            Some(Message::ToolResult(_))
        ) {
            return ScriptedStep::Respond(text_response("The tool echoed it back."));
        }
        let n_responses = request
            .messages
            .iter()
            .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
            .count();
        ScriptedStep::Respond(tool_response(
            "",
            vec![ToolCall {
                id: format!("call-{n_responses}"),
                name: ECHO.to_owned(),
                arguments: serde_json::json!({"message": "a few words to echo back"}),
            }],
        ))
    })
    .without_recording()
}

/// What one run of [`tool_loop`] saw.
#[derive(Debug, Clone)]
pub struct ToolLoopMeasurement {
    pub n_steps: usize,
    pub elapsed: Duration,
    /// Each call's time, as the runtime's verb layer saw it, sorted.
    pub calls: Vec<Duration>,
}

impl ToolLoopMeasurement {
    pub fn steps_rate(&self) -> f64 {
        self.n_steps as f64 / self.elapsed.as_secs_f64()
    }

    pub fn calls_rate(&self) -> f64 {
        self.calls.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The call time at `quantile` (0.5: the median), in ms.
    pub fn call_ms(&self, quantile: f64) -> f64 {
        if self.calls.is_empty() {
            return f64::NAN;
        }
        let idx = ((self.calls.len() - 1) as f64 * quantile).round() as usize;
        self.calls[idx].as_secs_f64() * 1e3
    }
}

/// `n_lanes` sessions each take `turns` turns calling [`ECHO`] (the MCP server's, or the
/// process's own), concurrently, in a fresh store at `config.path` (the caller removed any old
/// one). Every run must succeed and every call must be answered by its tool.
pub fn tool_loop(
    config: &Config,
    n_lanes: usize,
    turns: usize,
    tool: BenchTool,
) -> anyhow::Result<ToolLoopMeasurement> {
    actix::System::new().block_on(async {
        let store = store_with_sessions(config, n_lanes, false).await?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (inner, servers): (Arc<dyn Verb>, _) = match tool {
            BenchTool::Scripted => (Arc::new(LocalEcho), None),
            BenchTool::Mcp => {
                let binary = everything_server()?;
                let config = seed_mcp::McpConfig::parse(
                    &serde_json::json!({"mcpServers": {"everything": {"command": binary}}})
                        .to_string(),
                )?;
                let servers = seed_mcp::McpServers::start(config).await?;
                let tool = servers
                    .tool(ECHO)
                    .with_context(|| format!("server-everything lists no {ECHO}"))?;
                let verb = seed_mcp::verb::McpVerb::new(servers.clone(), tool);
                (Arc::new(verb), Some(servers))
            }
        };
        let timed: Arc<dyn Verb> = Arc::new(Timed {
            inner,
            calls: Arc::clone(&calls),
        });
        let (runtime, _) = Runtime::start(
            store.clone(),
            Arc::new(provider()),
            vec![timed],
            settings(n_lanes),
            "bench".to_owned(),
            clock(),
        )
        .await?;
        let started = Instant::now();
        let lanes = (0..n_lanes).map(|lane| {
            let runtime = runtime.clone();
            let store = store.clone();
            async move {
                for turn in 0..turns {
                    let (_, watch) = runtime
                        .send_message_watched(session(lane), &user_message(turn))
                        .await?;
                    let run = watch.ended().await?;
                    if run.status != RunStatus::Succeeded {
                        bail!("run {} of lane {lane} ended {run:?}", run.id);
                    }
                }
                // Every call was answered by the tool, not with an error.
                let log = store
                    .read_events(session(lane), 1, i64::MAX, usize::MAX)
                    .await?;
                for event in log.iter().filter(|event| event.kind == "tool_result") {
                    let content = &event.content;
                    if content["is_error"].as_bool() == Some(true)
                        || !content["content"]
                            .as_str()
                            .is_some_and(|text| text.starts_with("Echo: "))
                    {
                        bail!("lane {lane}: a call was not echoed: {content}");
                    }
                }
                anyhow::Ok(turns)
            }
        });
        let outcomes = actix::clock::timeout(HANG_GUARD, futures::future::join_all(lanes))
            .await
            .map_err(|_| anyhow::anyhow!("{n_lanes} lanes did not finish within {HANG_GUARD:?}"))?;
        let elapsed = started.elapsed();
        let mut n_turns = 0;
        for outcome in outcomes {
            n_turns += outcome?;
        }
        if let Some(servers) = servers {
            servers.shutdown().await;
        }
        let mut calls = std::mem::take(
            &mut *calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        calls.sort();
        if calls.len() != n_turns {
            bail!("{n_turns} turns and {} calls timed", calls.len());
        }
        Ok(ToolLoopMeasurement {
            n_steps: STEPS_PER_TURN * n_turns,
            elapsed,
            calls,
        })
    })
}
