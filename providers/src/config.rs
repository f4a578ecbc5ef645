//! Which model Seed talks to: `ProviderConfig`, read from a TOML file and environment variables,
//! and [`ProviderConfig::build`], which makes the provider it describes (the scripted model when
//! nothing is configured).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::anthropic::AnthropicProvider;
use crate::capabilities::{ImageModels, model_context_window};
use crate::openai::OpenAiProvider;
use crate::provider::Provider;
use crate::scripted::{ScriptedProvider, ScriptedStep, text_response};

/// Errors reading a configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the provider config {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the provider config does not parse")]
    Parse(#[from] toml::de::Error),
    #[error("unknown provider {0:?} (expected openai, anthropic or scripted)")]
    UnknownProvider(String),
    #[error("{variable} is not a number: {value:?}")]
    NotANumber { variable: String, value: String },
    #[error("the {0} provider needs an api key")]
    MissingKey(ProviderKind),
    #[error(transparent)]
    Client(#[from] crate::provider::ProviderError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The kinds of provider Seed speaks to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions: OpenAI, or a local server (llama.cpp, vLLM, Ollama).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// The scripted model.
    #[default]
    Scripted,
}

impl ProviderKind {
    /// The name the context-window table and the settings use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Scripted => "scripted",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Self::Openai),
            "anthropic" => Ok(Self::Anthropic),
            "scripted" | "" => Ok(Self::Scripted),
            other => Err(Error::UnknownProvider(other.to_owned())),
        }
    }

    fn base_url_default(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Scripted => "",
        }
    }

    fn model_default(self) -> &'static str {
        match self {
            Self::Openai => "gpt-4.1-mini",
            Self::Anthropic => "claude-sonnet-4-5",
            Self::Scripted => "scripted",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An API key. Its `Debug` and `Display` never show it: configs are logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How often and how patiently a refused request (429, 5xx, no connection) is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts per request, the first included; at least 1.
    pub attempts_max: u32,
    /// The wait before the first retry when the server names none; doubles per retry.
    pub backoff_initial_ms: u64,
    /// The longest backoff wait.
    pub backoff_max_ms: u64,
    /// The longest wait a server's `retry-after` can ask for.
    pub retry_after_max_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            attempts_max: 4,
            backoff_initial_ms: 1_000,
            backoff_max_ms: 16_000,
            retry_after_max_ms: 60_000,
        }
    }
}

/// How long a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// To open the connection.
    pub connect_timeout_ms: u64,
    /// Between two reads: the answer's headers, or the next bytes of its stream.
    pub idle_timeout_ms: u64,
    /// For the whole request, stream included; none by default (a long answer streams for
    /// minutes, and the idle timeout catches a silent server).
    pub request_timeout_ms: Option<u64>,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            request_timeout_ms: None,
        }
    }
}

/// Which model Seed talks to, and how. Every field has a default: an empty config is the
/// scripted model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Which wire protocol.
    pub provider: ProviderKind,
    /// Where the provider listens: `https://api.openai.com/v1` or a local server's
    /// `http://127.0.0.1:8080/v1` (Chat Completions is `{base_url}/chat/completions`);
    /// `https://api.anthropic.com` (Messages is `{base_url}/v1/messages`).
    pub base_url: Option<String>,
    /// The key; never logged. Local servers usually need none.
    pub api_key: Option<ApiKey>,
    /// The model a request names when its session names none.
    pub model: Option<String>,
    /// Context windows in tokens by model name, for models the built-in table does not know
    /// (or knows wrong).
    pub context_windows: BTreeMap<String, u64>,
    /// The context window of a model neither the table nor `context_windows` knows.
    pub context_window_default: Option<u64>,
    /// Whether a model takes images, by model name, over the built-in table (a local vision
    /// model the table does not know, or a model to send no images to).
    pub image_models: BTreeMap<String, bool>,
    /// The longest answer, in tokens; Anthropic needs one (8192 when unset).
    pub max_output_tokens: Option<u64>,
    /// Anthropic extended thinking: the token budget, off when unset.
    pub thinking_budget_tokens: Option<u64>,
    pub retry: RetryConfig,
    pub timeouts: TimeoutConfig,
}

impl ProviderConfig {
    /// Reads a TOML config.
    pub fn from_toml(text: &str) -> Result<Self> {
        Ok(toml::from_str(text)?)
    }

    /// Reads the TOML config at `path`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// The config the process's environment describes: the file `SEED_PROVIDER_CONFIG` names,
    /// if any, then the variables on top (see [`ProviderConfig::with_env`]).
    pub fn from_process_env() -> Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let config = match var("SEED_PROVIDER_CONFIG") {
            Some(path) => Self::from_file(Path::new(&path))?,
            None => Self::default(),
        };
        config.with_env(var)
    }

    /// This config with environment variables on top, read through `var`:
    ///
    /// - `SEED_PROVIDER`: `openai`, `anthropic` or `scripted`. Unset, a config that names none
    ///   takes `openai` when `SEED_BASE_URL` or `OPENAI_API_KEY` is set, else `anthropic` when
    ///   `ANTHROPIC_API_KEY` is, else stays scripted.
    /// - `SEED_BASE_URL`, `SEED_MODEL`.
    /// - `SEED_API_KEY`, else the provider's own `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
    /// - `SEED_CONTEXT_WINDOW`: the window of a model the table does not know.
    pub fn with_env(mut self, var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        if let Some(name) = var("SEED_PROVIDER") {
            self.provider = ProviderKind::parse(&name)?;
        } else if self.provider == ProviderKind::Scripted {
            if var("SEED_BASE_URL").is_some() || var("OPENAI_API_KEY").is_some() {
                self.provider = ProviderKind::Openai;
            } else if var("ANTHROPIC_API_KEY").is_some() {
                self.provider = ProviderKind::Anthropic;
            }
        }
        if let Some(base_url) = var("SEED_BASE_URL") {
            self.base_url = Some(base_url);
        }
        if let Some(model) = var("SEED_MODEL") {
            self.model = Some(model);
        }
        let own_key = match self.provider {
            ProviderKind::Openai => var("OPENAI_API_KEY"),
            ProviderKind::Anthropic => var("ANTHROPIC_API_KEY"),
            ProviderKind::Scripted => None,
        };
        if let Some(key) = var("SEED_API_KEY").or(own_key) {
            self.api_key = Some(ApiKey::new(key));
        }
        if let Some(value) = var("SEED_CONTEXT_WINDOW") {
            let tokens = value.trim().parse().map_err(|_| Error::NotANumber {
                variable: "SEED_CONTEXT_WINDOW".to_owned(),
                value: value.clone(),
            })?;
            self.context_window_default = Some(tokens);
        }
        Ok(self)
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.base_url
            .as_deref()
            .unwrap_or(self.provider.base_url_default())
            .trim_end_matches('/')
    }

    /// The model a request names when its session names none.
    pub fn model(&self) -> &str {
        self.model
            .as_deref()
            .unwrap_or(self.provider.model_default())
    }

    /// The context window of `model` on this provider: this config's `context_windows`, else
    /// the built-in table, else `context_window_default`.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.context_windows
            .get(model)
            .copied()
            .or_else(|| model_context_window(self.provider.name(), model))
            .or(self.context_window_default)
    }

    /// Whether `model` on this provider takes images: this config's `image_models`, else the
    /// built-in table, else not.
    pub fn takes_images(&self, model: &str) -> bool {
        self.images().takes(model)
    }

    /// This provider's image table with the config's overrides.
    pub fn images(&self) -> ImageModels {
        ImageModels {
            provider: self.provider.name(),
            overrides: self.image_models.clone(),
        }
    }

    /// One line for the startup log; never shows the key.
    pub fn describe(&self) -> String {
        match self.provider {
            ProviderKind::Scripted => "scripted model (no provider configured)".to_owned(),
            kind => format!(
                "{kind} model {} at {}{}",
                self.model(),
                self.base_url(),
                if self.api_key.is_some() {
                    " (with an api key)"
                } else {
                    ""
                }
            ),
        }
    }

    /// The provider this config describes. Anthropic's cloud needs a key; an OpenAI-compatible
    /// server may not (a local one), so it is sent only when configured. The scripted model
    /// answers every request with a note saying no provider is configured.
    pub fn build(&self) -> Result<Arc<dyn Provider>> {
        Ok(match self.provider {
            ProviderKind::Openai => Arc::new(OpenAiProvider::new(self)?),
            ProviderKind::Anthropic => {
                if self.api_key.is_none() && self.base_url.is_none() {
                    return Err(Error::MissingKey(ProviderKind::Anthropic));
                }
                Arc::new(AnthropicProvider::new(self)?)
            }
            ProviderKind::Scripted => Arc::new(ScriptedProvider::from_fn(|_, _| {
                ScriptedStep::Respond(text_response(NO_PROVIDER_ANSWER))
            })),
        })
    }
}

/// What the scripted model says when it stands in for an unconfigured provider.
pub const NO_PROVIDER_ANSWER: &str = "No model provider is configured: set SEED_PROVIDER, \
     SEED_BASE_URL and SEED_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY), or a config file \
     named by SEED_PROVIDER_CONFIG.";

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn nothing_configured_is_the_scripted_model() {
        let config = ProviderConfig::default().with_env(env(&[])).expect("loads");
        assert_eq!(config.provider, ProviderKind::Scripted);
        assert_eq!(config.describe(), "scripted model (no provider configured)");
        let provider = config.build().expect("builds");
        let request = crate::message::Request {
            reasoning: None,
            model: String::new(),
            system_prompt: String::new(),
            messages: Vec::new(),
            tools: Arc::from(Vec::new()),
            session_id: None,
        };
        let events: Vec<_> = futures::executor::block_on(futures::StreamExt::collect::<Vec<_>>(
            provider.stream(request),
        ));
        let Some(crate::provider::StreamEvent::Done(message)) = events.last() else {
            panic!("no answer: {events:?}");
        };
        assert_eq!(message.text(), NO_PROVIDER_ANSWER);
    }

    #[test]
    fn environment_variables() {
        let config = ProviderConfig::default()
            .with_env(env(&[
                ("SEED_BASE_URL", "http://127.0.0.1:8080/v1/"),
                ("SEED_MODEL", "qwen3-8b"),
                ("SEED_CONTEXT_WINDOW", "40960"),
            ]))
            .expect("loads");
        assert_eq!(config.provider, ProviderKind::Openai);
        assert_eq!(config.base_url(), "http://127.0.0.1:8080/v1");
        assert_eq!(config.model(), "qwen3-8b");
        assert_eq!(config.api_key, None);
        assert_eq!(config.context_window("some-local-model"), Some(40_960));
        assert_eq!(
            config.describe(),
            "openai model qwen3-8b at http://127.0.0.1:8080/v1"
        );

        let config = ProviderConfig::default()
            .with_env(env(&[("ANTHROPIC_API_KEY", "sk-ant-secret")]))
            .expect("loads");
        assert_eq!(config.provider, ProviderKind::Anthropic);
        assert_eq!(config.api_key, Some(ApiKey::new("sk-ant-secret")));
        assert_eq!(config.base_url(), "https://api.anthropic.com");
        assert_eq!(config.model(), "claude-sonnet-4-5");
        assert_eq!(config.context_window(config.model()), Some(200_000));

        // SEED_API_KEY wins over the provider's own variable; the other provider's is ignored.
        let config = ProviderConfig::default()
            .with_env(env(&[
                ("SEED_PROVIDER", "OpenAI"),
                ("SEED_API_KEY", "seed-key"),
                ("OPENAI_API_KEY", "openai-key"),
                ("ANTHROPIC_API_KEY", "anthropic-key"),
            ]))
            .expect("loads");
        assert_eq!(config.provider, ProviderKind::Openai);
        assert_eq!(config.api_key, Some(ApiKey::new("seed-key")));

        let unknown = ProviderConfig::default().with_env(env(&[("SEED_PROVIDER", "gemini")]));
        assert!(
            matches!(unknown, Err(Error::UnknownProvider(ref name)) if name == "gemini"),
            "{unknown:?}"
        );
        let bad = ProviderConfig::default().with_env(env(&[("SEED_CONTEXT_WINDOW", "lots")]));
        assert!(matches!(bad, Err(Error::NotANumber { .. })), "{bad:?}");
        let keyless = ProviderConfig::default()
            .with_env(env(&[("SEED_PROVIDER", "anthropic")]))
            .expect("loads");
        assert!(matches!(
            keyless.build(),
            Err(Error::MissingKey(ProviderKind::Anthropic))
        ));
    }

    #[test]
    fn a_config_file_with_the_environment_on_top() {
        let text = r#"
            provider = "anthropic"
            api_key = "sk-ant-from-file"
            model = "claude-opus-4-1"
            max_output_tokens = 4096
            thinking_budget_tokens = 2048

            [context_windows]
            "my-finetune" = 32768

            [image_models]
            "my-finetune" = true
            "claude-opus-4-1" = false

            [retry]
            attempts_max = 2

            [timeouts]
            connect_timeout_ms = 500
            request_timeout_ms = 600000
        "#;
        let config = ProviderConfig::from_toml(text).expect("parses");
        assert_eq!(config.provider, ProviderKind::Anthropic);
        assert_eq!(config.model(), "claude-opus-4-1");
        assert_eq!(config.retry.attempts_max, 2);
        assert_eq!(
            config.retry.backoff_initial_ms,
            RetryConfig::default().backoff_initial_ms
        );
        assert_eq!(config.timeouts.connect_timeout_ms, 500);
        assert_eq!(config.timeouts.request_timeout_ms, Some(600_000));
        assert_eq!(config.context_window("my-finetune"), Some(32_768));
        assert_eq!(config.context_window("claude-opus-4-1"), Some(200_000));
        assert_eq!(config.context_window("unknown"), None);
        assert!(config.takes_images("my-finetune"));
        assert!(!config.takes_images("claude-opus-4-1"));
        assert!(config.takes_images("claude-haiku-4-5"));
        assert!(!config.takes_images("unknown"));

        let config = config
            .with_env(env(&[("SEED_MODEL", "claude-haiku-4-5")]))
            .expect("loads");
        assert_eq!(config.model(), "claude-haiku-4-5");
        assert_eq!(config.api_key, Some(ApiKey::new("sk-ant-from-file")));

        let typo = ProviderConfig::from_toml("modle = \"x\"");
        assert!(matches!(typo, Err(Error::Parse(_))), "{typo:?}");
    }

    #[test]
    fn keys_are_never_shown() {
        let config = ProviderConfig {
            provider: ProviderKind::Openai,
            api_key: Some(ApiKey::new("sk-very-secret")),
            ..ProviderConfig::default()
        };
        let shown = [
            format!("{config:?}"),
            format!("{config:#?}"),
            config.describe(),
            format!("{}", ApiKey::new("sk-very-secret")),
            format!("{:?}", OpenAiProvider::new(&config).expect("builds")),
            format!("{:?}", AnthropicProvider::new(&config).expect("builds")),
        ];
        for text in shown {
            assert!(!text.contains("very-secret"), "{text}");
        }
        assert!(format!("{config:?}").contains("ApiKey(<redacted>)"));
    }
}
