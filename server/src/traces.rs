//! Traces over OTLP/HTTP: the exporter `seed serve --otlp-endpoint` sets up, the bridge from
//! `tracing` spans to OpenTelemetry, the span of each HTTP request (continuing a caller's
//! `traceparent`), and [`SpanContexts`] for the runtime, whose crates know nothing of
//! OpenTelemetry (docs/design/traces.md).
//!
//! Off by default: with no endpoint there is no exporter and no OpenTelemetry layer, and the
//! spans of [`TRACE_TARGET`] are disabled at their callsites (the log's filter leaves that
//! target out), so they cost what a disabled `tracing` span costs.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use anyhow::Context as _;
use opentelemetry::KeyValue;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt as _, Tracer as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use seed_actors::traces::{RunPass, SpanContexts, UnderRun, Wait};
use seed_durable::TRACE_TARGET;
use seed_durable::spans::{ModelOutcome, ModelRequest, ToolSpan, TurnSpans, count, finish_reason};
use seed_providers::{StopReason, ToolCall};
use seed_store::RunRow;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The OTLP/HTTP path of traces under an endpoint, as the OpenTelemetry specification has it
/// for `OTEL_EXPORTER_OTLP_ENDPOINT`.
pub const TRACES_PATH: &str = "v1/traces";

/// How long the exporter waits, by default, before it sends the spans it gathered.
pub const BATCH_DELAY_DEFAULT: Duration = Duration::from_secs(5);

/// How long one export may take before it is given up.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The niceness of the exporter's thread (Linux): export is background work, so it runs in
/// the time turns leave, without starving (at 19 it would get next to nothing on a busy host,
/// and its queue would fill and drop spans).
pub const EXPORTER_NICE: i32 = 10;

/// What `seed serve` is told about traces.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceOptions {
    /// The OTLP/HTTP endpoint (its base: traces go to `{endpoint}/v1/traces`); `None`: off.
    pub endpoint: Option<String>,
    /// The share of traces sampled, 0 to 1 (a caller's sampled `traceparent` decides for its
    /// own trace).
    pub sample_ratio: f64,
    /// Whether model request spans carry the messages' text.
    pub content: bool,
    /// How long spans wait to be sent in a batch.
    pub batch_delay: Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            endpoint: None,
            sample_ratio: 1.0,
            content: false,
            batch_delay: BATCH_DELAY_DEFAULT,
        }
    }
}

/// Why traces cannot be set up.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("--otlp-sample must be between 0 and 1, not {0}")]
    SampleRatio(f64),
    #[error("--otlp-endpoint must be an http:// or https:// URL, not {0:?}")]
    Endpoint(String),
}

/// The URL traces are posted to, for an endpoint as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it: the
/// endpoint with `v1/traces` after it, unless it names that path already.
pub fn traces_url(endpoint: &str) -> Result<String, Error> {
    let endpoint = endpoint.trim();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(Error::Endpoint(endpoint.to_owned()));
    }
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        return Ok(base.to_owned());
    }
    Ok(format!("{base}/{TRACES_PATH}"))
}

/// Checks a sampling ratio.
pub fn sample_ratio(ratio: f64) -> Result<f64, Error> {
    if (0.0..=1.0).contains(&ratio) {
        Ok(ratio)
    } else {
        Err(Error::SampleRatio(ratio))
    }
}

/// The exporter while traces are on: flushed and shut down by [`Exporter::shutdown`].
#[derive(Debug)]
pub struct Exporter {
    tracer: SdkTracer,
    content: bool,
}

impl Exporter {
    /// What the runtime uses to keep and link spans' ids, and to export its waits.
    pub fn traces(&self) -> seed_actors::traces::Traces {
        seed_actors::traces::Traces::new(
            Arc::new(Contexts {
                tracer: self.tracer.clone(),
            }),
            self.content,
        )
    }

    /// Sends what is left and stops the exporter (see [`shutdown`]).
    pub fn shutdown(self) {
        shutdown();
    }
}

/// The exporter of this process, for [`shutdown`]: the service ends its process itself once
/// drained, so the exporter is reached from there.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Sends the spans still waiting for their batch and stops the exporter, waiting for it (the
/// export runs on the exporter's own thread). Nothing when traces are off, or once done.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.shutdown()
    {
        tracing::debug!(%error, "the trace exporter was shut down already");
    }
}

/// Sets up the log (to stderr, as text or JSON lines) and, with an endpoint, the trace
/// exporter. The log's filter (`RUST_LOG`, default `info`) never takes the trace spans; the
/// exporter takes them alone.
pub fn init(log_json: bool, options: &TraceOptions) -> anyhow::Result<Option<Exporter>> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
        .add_directive(format!("{TRACE_TARGET}=off").parse()?);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = if log_json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let exporter = options
        .endpoint
        .as_deref()
        .map(|endpoint| exporter(endpoint, options))
        .transpose()?;
    let otel = exporter.as_ref().map(|exporter| {
        let targets = tracing_subscriber::filter::Targets::new()
            .with_target(TRACE_TARGET, tracing::Level::TRACE);
        tracing_opentelemetry::layer()
            .with_tracer(exporter.tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            // Nothing inside the runtime reads OpenTelemetry's current context: attaching it
            // at every enter of a span (each poll of an instrumented future) is pure cost.
            .with_context_activation(false)
            .with_filter(targets)
    });
    tracing_subscriber::registry().with(log).with(otel).init();
    Ok(exporter)
}

fn exporter(endpoint: &str, options: &TraceOptions) -> anyhow::Result<Exporter> {
    let url = traces_url(endpoint)?;
    let ratio = sample_ratio(options.sample_ratio)?;
    // An https endpoint needs the process's TLS crypto (reqwest is built without its own).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let span_exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .with_context(|| format!("cannot set up the trace exporter for {url}"))?;
    let processor = BatchSpanProcessor::builder(Yielding(span_exporter))
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(options.batch_delay)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("seed")
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "seed");
    let _ = PROVIDER.set(provider);
    tracing::info!(%url, ratio, content = options.content, "exporting traces");
    Ok(Exporter {
        tracer,
        content: options.content,
    })
}

/// An exporter whose thread yields to the service's: the batch processor calls `export` on a
/// thread of its own, which the first call lowers to [`EXPORTER_NICE`] (on Linux a thread's
/// niceness is its own). Converting spans to protobuf and encoding them, the exporter's work,
/// then takes the CPU that turns leave rather than the writer's or the actors'.
#[derive(Debug)]
struct Yielding<E>(E);

thread_local! {
    static LOWERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lowers the calling thread's scheduling priority to [`EXPORTER_NICE`], once: the batch
/// processor's own thread alone (by its name), never a thread of the service's that an SDK might
/// export from.
fn lower_this_thread() {
    if LOWERED.with(|lowered| lowered.replace(true)) {
        return;
    }
    let current = std::thread::current();
    if !current
        .name()
        .is_some_and(|name| name.starts_with("OpenTelemetry"))
    {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let thread = Some(rustix::thread::gettid());
        // Lowered only: a process started nicer than that stays so.
        let lowered = rustix::process::getpriority_process(thread).and_then(|niceness| {
            if niceness < EXPORTER_NICE {
                rustix::process::setpriority_process(thread, EXPORTER_NICE)
            } else {
                Ok(())
            }
        });
        if let Err(error) = lowered {
            tracing::debug!(%error, "the exporter's thread keeps its priority");
        }
    }
}

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for Yielding<E>
{
    fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        lower_this_thread();
        self.0.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}

/// The one header the W3C propagator reads and writes here, `traceparent`, without a map.
#[derive(Default)]
struct Traceparent(Option<String>);

impl opentelemetry::propagation::Injector for Traceparent {
    fn set(&mut self, key: &str, value: String) {
        if key == "traceparent" {
            self.0 = Some(value);
        }
    }
}

impl opentelemetry::propagation::Extractor for Traceparent {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent")
            .then_some(self.0.as_deref())
            .flatten()
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// The context `traceparent` names, read with the W3C propagator (an empty one when it does not
/// parse).
fn extract(traceparent: &str) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&Traceparent(Some(traceparent.to_owned())))
}

/// `context`'s `traceparent`, written with the W3C propagator.
fn inject(context: &opentelemetry::Context) -> Option<String> {
    let mut carrier = Traceparent::default();
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    carrier.0
}

/// [`SpanContexts`] over the exporter's tracer.
#[derive(Debug)]
struct Contexts {
    tracer: SdkTracer,
}

/// The span of one pass of a run, and what is made under it ([`UnderRun`]): its context (the
/// run's span in it) is the parent of each.
#[derive(Debug)]
struct UnderRunSpan {
    tracer: SdkTracer,
    context: opentelemetry::Context,
}

/// A tool call's span: the context it is the span of, under the run's.
#[derive(Debug)]
struct ToolCallSpan {
    context: opentelemetry::Context,
}

impl ToolSpan for ToolCallSpan {
    fn traceparent(&self) -> Option<String> {
        inject(&self.context)
    }

    fn set_attribute(&self, key: &'static str, value: String) {
        self.context.span().set_attribute(KeyValue::new(key, value));
    }

    fn end(&self, is_error: bool) {
        let span = self.context.span();
        if is_error {
            span.set_attribute(KeyValue::new("error.type", "tool_error"));
            span.set_status(opentelemetry::trace::Status::error(""));
        }
        span.end();
    }
}

impl TurnSpans for UnderRunSpan {
    fn tool_call(&self, call: &ToolCall, safe_to_repeat: bool) -> Arc<dyn ToolSpan> {
        let span = self
            .tracer
            .span_builder(format!("execute_tool {}", call.name))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", call.name.clone()),
                KeyValue::new("gen_ai.tool.call.id", call.id.clone()),
                KeyValue::new("seed.tool.safe_to_repeat", safe_to_repeat),
            ])
            .start_with_context(&self.tracer, &self.context);
        Arc::new(ToolCallSpan {
            context: self.context.with_span(span),
        })
    }

    fn model_request(&self, request: &ModelRequest<'_>) {
        let mut span = self
            .tracer
            .span_builder(format!("chat {}", request.model))
            .with_kind(SpanKind::Client)
            .with_start_time(request.started_at)
            .with_attributes(model_request_attributes(request))
            .start_with_context(&self.tracer, &self.context);
        let failed = match request.outcome {
            ModelOutcome::Response(message) => message.stop_reason == StopReason::Error,
            ModelOutcome::Failed(_) => true,
        };
        if failed {
            span.set_status(opentelemetry::trace::Status::error(""));
        }
        span.end_with_timestamp(request.ended_at);
    }
}

impl UnderRun for UnderRunSpan {
    fn traceparent(&self) -> Option<String> {
        inject(&self.context)
    }

    fn end(&self, outcome: Option<seed_events::RunStatus>) {
        let span = self.context.span();
        match outcome {
            Some(status) => {
                span.set_attribute(KeyValue::new("seed.run.outcome", status.as_str()));
                if status == seed_events::RunStatus::Failed {
                    span.set_attribute(KeyValue::new("error.type", "run_failed"));
                    span.set_status(opentelemetry::trace::Status::error(""));
                }
            }
            None => {
                span.set_attributes([
                    KeyValue::new("seed.run.outcome", "panicked"),
                    KeyValue::new("error.type", "panic"),
                ]);
                span.set_status(opentelemetry::trace::Status::error(""));
            }
        }
        span.end();
    }

    fn wait_span(&self, wait: &Wait) {
        let at = |ms: i64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
        let mut span = self
            .tracer
            .span_builder(wait.kind.span_name())
            .with_kind(SpanKind::Internal)
            .with_start_time(at(wait.started_at_ms))
            .start_with_context(&self.tracer, &self.context);
        span.end_with_timestamp(at(wait.ended_at_ms.max(wait.started_at_ms)));
    }
}

/// The attributes of a model request's span, after the GenAI conventions.
fn model_request_attributes(request: &ModelRequest<'_>) -> Vec<KeyValue> {
    let mut attributes = Vec::with_capacity(16);
    attributes.extend([
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.system", request.system.to_owned()),
        KeyValue::new("gen_ai.request.model", request.model.to_owned()),
        KeyValue::new("seed.request_id", request.request_id.to_owned()),
        KeyValue::new("seed.step", i64::from(request.step)),
    ]);
    if let Some(messages) = &request.input_messages {
        attributes.push(KeyValue::new("gen_ai.input.messages", messages.clone()));
    }
    if let Some(text) = &request.output_messages {
        attributes.push(KeyValue::new("gen_ai.output.messages", text.clone()));
    }
    if let Some(after) = request.first_chunk_after {
        attributes.push(KeyValue::new(
            "gen_ai.server.time_to_first_token",
            after.as_secs_f64(),
        ));
    }
    match request.outcome {
        ModelOutcome::Response(message) => {
            let usage = &message.usage;
            attributes.extend([
                KeyValue::new("gen_ai.response.model", message.model.clone()),
                KeyValue::new("gen_ai.usage.input_tokens", count(usage.input)),
                KeyValue::new("gen_ai.usage.output_tokens", count(usage.output)),
                KeyValue::new(
                    "gen_ai.usage.cache_read.input_tokens",
                    count(usage.cache_read),
                ),
                KeyValue::new(
                    "gen_ai.usage.cache_creation.input_tokens",
                    count(usage.cache_write),
                ),
                KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    finish_reason(message.stop_reason),
                ),
            ]);
            if message.stop_reason == StopReason::Error {
                attributes.push(KeyValue::new("error.type", "provider_error"));
            }
        }
        ModelOutcome::Failed(error_type) => {
            attributes.push(KeyValue::new("error.type", error_type.to_owned()));
        }
    }
    attributes
}

impl SpanContexts for Contexts {
    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        if span.is_disabled() {
            return None;
        }
        inject(&span.context())
    }

    fn set_parent(&self, span: &tracing::Span, traceparent: &str) {
        let parent = extract(traceparent);
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent);
        }
    }

    fn start_run(&self, run: &RunRow, pass: &RunPass<'_>) -> Arc<dyn UnderRun> {
        let parent = pass.parent.map(extract).unwrap_or_default();
        let mut builder = self
            .tracer
            .span_builder("invoke_agent seed")
            .with_kind(SpanKind::Internal)
            .with_attributes(run_attributes(run, pass));
        if let Some(earlier) = pass.earlier {
            let linked = extract(earlier).span().span_context().clone();
            if linked.is_valid() {
                builder =
                    builder.with_links(vec![opentelemetry::trace::Link::with_context(linked)]);
            }
        }
        // A parent that does not parse leaves the span a trace of its own.
        let span = builder.start_with_context(&self.tracer, &parent);
        Arc::new(UnderRunSpan {
            tracer: self.tracer.clone(),
            context: parent.with_span(span),
        })
    }
}

/// The attributes a run's span starts with, after the GenAI conventions where they name one.
fn run_attributes(run: &RunRow, pass: &RunPass<'_>) -> Vec<KeyValue> {
    let session_id = run.session_id.to_string();
    let mut attributes = Vec::with_capacity(10);
    attributes.extend([
        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
        KeyValue::new("gen_ai.agent.name", "seed"),
        KeyValue::new("gen_ai.conversation.id", session_id.clone()),
        KeyValue::new("seed.session_id", session_id),
        KeyValue::new("seed.run_id", run.id.to_string()),
        KeyValue::new("seed.run.queue", run.queue.as_str()),
        KeyValue::new("seed.run.pass", run.pass),
        KeyValue::new("seed.run.attempt", run.attempts),
    ]);
    if pass.earlier.is_some() {
        attributes.push(KeyValue::new("seed.run.adopted", pass.adopted));
    }
    attributes
}

/// The span of one HTTP request (`{METHOD} {route}`, a server span), under the caller's trace
/// when the request carries a `traceparent`. With traces off the span is disabled and the
/// header is not read.
pub async fn http_span(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "http.request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %request.method(),
        http.route = tracing::field::Empty,
        url.path = request.path(),
        http.response.status_code = tracing::field::Empty,
    );
    // The route and the caller's context are read only for a span that is exported.
    if !span.is_disabled() {
        let route = request.match_pattern();
        let path = route.as_deref().unwrap_or(request.path());
        span.record(
            "otel.name",
            tracing::field::display(format_args!("{} {path}", request.method())),
        );
        if let Some(route) = &route {
            span.record("http.route", route.as_str());
        }
        if let Some(traceparent) = request
            .headers()
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
        {
            let parent = extract(traceparent);
            if parent.span().span_context().is_valid() {
                let _ = span.set_parent(parent);
            }
        }
    }
    let response = next.call(request).instrument(span.clone()).await;
    if !span.is_disabled() {
        let status = match &response {
            Ok(response) => response.status(),
            Err(error) => error.as_response_error().status_code(),
        };
        span.record("http.response.status_code", i64::from(status.as_u16()));
        if status.is_server_error() {
            span.record("otel.status_code", "ERROR");
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attributes of a model request's span: its request and response after the GenAI
    /// conventions, an error the provider sent or a failure as `error.type`, and message text
    /// only when the harness gave it (with the content switch).
    #[test]
    fn a_model_requests_span_carries_its_request_its_response_and_its_error() {
        let names = |attributes: &[KeyValue]| -> Vec<String> {
            attributes.iter().map(|kv| kv.key.to_string()).collect()
        };
        let value = |attributes: &[KeyValue], name: &str| {
            attributes
                .iter()
                .find(|kv| kv.key.as_str() == name)
                .map(|kv| kv.value.to_string())
        };
        let mut answer = seed_providers::text_response("the answer");
        answer.usage.input = 120;
        answer.usage.cache_read = 80;
        let request = |outcome| ModelRequest {
            system: "openai",
            model: "gpt-test",
            request_id: "r1",
            step: 2,
            started_at: SystemTime::UNIX_EPOCH,
            ended_at: SystemTime::UNIX_EPOCH,
            first_chunk_after: Some(Duration::from_millis(250)),
            input_messages: None,
            output_messages: None,
            outcome,
        };
        let answered = model_request_attributes(&request(ModelOutcome::Response(&answer)));
        assert_eq!(
            names(&answered),
            [
                "gen_ai.operation.name",
                "gen_ai.system",
                "gen_ai.request.model",
                "seed.request_id",
                "seed.step",
                "gen_ai.server.time_to_first_token",
                "gen_ai.response.model",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.cache_read.input_tokens",
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.response.finish_reasons",
            ]
        );
        assert_eq!(value(&answered, "gen_ai.system").as_deref(), Some("openai"));
        assert_eq!(value(&answered, "seed.step").as_deref(), Some("2"));
        assert_eq!(
            value(&answered, "gen_ai.usage.input_tokens").as_deref(),
            Some("120")
        );
        assert_eq!(
            value(&answered, "gen_ai.usage.cache_read.input_tokens").as_deref(),
            Some("80")
        );
        assert_eq!(
            value(&answered, "gen_ai.server.time_to_first_token").as_deref(),
            Some("0.25")
        );
        assert_eq!(
            value(&answered, "gen_ai.response.finish_reasons").as_deref(),
            Some("stop")
        );

        let with_text = model_request_attributes(&ModelRequest {
            input_messages: Some("[{\"role\":\"user\"}]".to_owned()),
            output_messages: Some("the answer".to_owned()),
            ..request(ModelOutcome::Response(&answer))
        });
        assert_eq!(
            value(&with_text, "gen_ai.output.messages").as_deref(),
            Some("the answer")
        );
        assert!(value(&with_text, "gen_ai.input.messages").is_some());

        let mut refused = answer.clone();
        refused.stop_reason = StopReason::Error;
        let refused = model_request_attributes(&request(ModelOutcome::Response(&refused)));
        assert_eq!(
            value(&refused, "error.type").as_deref(),
            Some("provider_error")
        );
        let failed = model_request_attributes(&request(ModelOutcome::Failed("timeout")));
        assert_eq!(value(&failed, "error.type").as_deref(), Some("timeout"));
        assert_eq!(value(&failed, "gen_ai.response.model"), None);
    }

    #[test]
    fn the_traces_path_goes_after_the_endpoint_once() {
        let table = [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            (
                "https://otel.example/otlp",
                "https://otel.example/otlp/v1/traces",
            ),
            ("http://collector/v1/traces", "http://collector/v1/traces"),
        ];
        for (endpoint, url) in table {
            assert_eq!(traces_url(endpoint).as_deref(), Ok(url), "{endpoint}");
        }
        assert_eq!(
            traces_url("collector:4318"),
            Err(Error::Endpoint("collector:4318".to_owned()))
        );
    }

    /// The batch processor's thread (named as the SDK names it) yields to the service's; any
    /// other thread keeps its priority.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_exporters_thread_alone_is_lowered() {
        let niceness = |name: &str| {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(|| {
                    let before =
                        rustix::process::getpriority_process(Some(rustix::thread::gettid()))
                            .expect("its priority");
                    lower_this_thread();
                    lower_this_thread();
                    let after =
                        rustix::process::getpriority_process(Some(rustix::thread::gettid()))
                            .expect("its priority");
                    (before, after)
                })
                .expect("a thread")
                .join()
                .expect("it ran")
        };
        let (before, after) = niceness("OpenTelemetry.Traces.BatchProcessor");
        assert_eq!(after, before.max(EXPORTER_NICE));
        let (before, after) = niceness("seed-actors");
        assert_eq!(after, before);
    }

    #[test]
    fn a_sampling_ratio_is_a_share() {
        assert_eq!(sample_ratio(0.0), Ok(0.0));
        assert_eq!(sample_ratio(0.25), Ok(0.25));
        assert_eq!(sample_ratio(1.0), Ok(1.0));
        assert_eq!(sample_ratio(1.5), Err(Error::SampleRatio(1.5)));
        assert_eq!(sample_ratio(-0.1), Err(Error::SampleRatio(-0.1)));
    }

    #[test]
    fn a_traceparent_round_trips_through_the_propagator() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = extract(traceparent);
        let span_context = context.span().span_context().clone();
        assert!(span_context.is_valid());
        assert_eq!(
            span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(
            !extract("not a traceparent")
                .span()
                .span_context()
                .is_valid()
        );
    }
}
