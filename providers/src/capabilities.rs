//! What each model can do: one table of context windows, used by the context meter and the
//! per-turn `<context_usage>` block, and one of the models that take images.

/// Context windows in tokens, by provider and model-name prefix; the first row that matches
/// wins, so a longer prefix comes before a shorter one. An empty prefix matches every model of
/// its provider. Local models are served through the OpenAI-compatible wire, so they sit under
/// `openai`, by the names llama.cpp, vLLM and Ollama give them; a model missing here takes the
/// configured override (`ProviderConfig::context_window`).
const CONTEXT_WINDOWS: &[(&str, &str, u64)] = &[
    ("scripted", "", 200_000),
    ("anthropic", "claude-", 200_000),
    ("openai", "gpt-5", 400_000),
    ("openai", "gpt-4.1", 1_047_576),
    ("openai", "gpt-4o", 128_000),
    ("openai", "gpt-4-turbo", 128_000),
    ("openai", "o1-mini", 128_000),
    ("openai", "o1", 200_000),
    ("openai", "o3", 200_000),
    ("openai", "o4", 200_000),
    ("openai", "gpt-oss", 131_072),
    ("openai", "llama3.1", 131_072),
    ("openai", "llama3.2", 131_072),
    ("openai", "llama3.3", 131_072),
    ("openai", "llama-3.1", 131_072),
    ("openai", "llama-3.2", 131_072),
    ("openai", "llama-3.3", 131_072),
    ("openai", "llama3", 8_192),
    ("openai", "qwen3", 40_960),
    ("openai", "qwen2.5", 32_768),
    ("openai", "mistral-small", 131_072),
    ("openai", "mistral", 32_768),
    ("openai", "gemma3", 131_072),
    ("openai", "deepseek-r1", 131_072),
    ("openai", "deepseek-v3", 131_072),
    ("openai", "phi4", 16_384),
];

/// Whether a model takes images as input, by provider and model-name prefix, read as
/// [`CONTEXT_WINDOWS`] is (the first matching row wins). A model missing here takes none,
/// unless the provider configuration says it does (`ProviderConfig::image_models`). The
/// scripted model takes them, so that tests see what an image becomes.
const IMAGE_MODELS: &[(&str, &str, bool)] = &[
    ("scripted", "", true),
    ("anthropic", "claude-2", false),
    ("anthropic", "claude-instant", false),
    ("anthropic", "claude-", true),
    ("openai", "gpt-5", true),
    ("openai", "gpt-4.1", true),
    ("openai", "gpt-4o", true),
    ("openai", "gpt-4-turbo", true),
    ("openai", "o1-mini", false),
    ("openai", "o1", true),
    ("openai", "o3-mini", false),
    ("openai", "o3", true),
    ("openai", "o4", true),
    ("openai", "llama3.2-vision", true),
    ("openai", "llava", true),
    ("openai", "gemma3", true),
    ("openai", "qwen2.5vl", true),
    ("openai", "qwen2.5-vl", true),
];

/// Whether a provider's model takes images as input; `None` for a model the table does not
/// know (the caller treats it as taking none unless configured).
pub fn model_takes_images(provider: &str, model: &str) -> Option<bool> {
    IMAGE_MODELS
        .iter()
        .find(|(row_provider, prefix, _)| *row_provider == provider && model.starts_with(prefix))
        .map(|(_, _, takes)| *takes)
}

/// Which of a provider's models take images: the configured overrides over the built-in table;
/// a model neither knows takes none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageModels {
    /// The provider's name in the table (`openai`, `anthropic`, `scripted`).
    pub provider: &'static str,
    /// By model name, over the table (`ProviderConfig::image_models`).
    pub overrides: std::collections::BTreeMap<String, bool>,
}

impl ImageModels {
    /// Whether `model` takes images.
    pub fn takes(&self, model: &str) -> bool {
        self.overrides
            .get(model)
            .copied()
            .or_else(|| model_takes_images(self.provider, model))
            .unwrap_or(false)
    }
}

/// The context window, in tokens, of a provider's model; one table, used by the context meter
/// and `<context_usage>`. `None` for a model the table does not know.
pub fn model_context_window(provider: &str, model: &str) -> Option<u64> {
    CONTEXT_WINDOWS
        .iter()
        .find(|(row_provider, prefix, _)| *row_provider == provider && model.starts_with(prefix))
        .map(|(_, _, tokens)| *tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        for (provider, model, expected) in [
            ("scripted", "anything", Some(200_000)),
            ("scripted", "", Some(200_000)),
            ("anthropic", "claude-sonnet-4-5", Some(200_000)),
            ("anthropic", "gpt-4o", None),
            ("openai", "gpt-4o", Some(128_000)),
            ("openai", "gpt-4o-mini", Some(128_000)),
            ("openai", "gpt-4.1-nano", Some(1_047_576)),
            ("openai", "o3-mini", Some(200_000)),
            ("openai", "o4-mini", Some(200_000)),
            ("openai", "gpt-3.5-turbo", None),
            ("openai", "gpt-5", Some(400_000)),
            ("openai", "gpt-5-mini", Some(400_000)),
            ("openai", "o1-mini", Some(128_000)),
            ("openai", "o1", Some(200_000)),
            ("openai", "llama3.1:8b", Some(131_072)),
            ("openai", "llama3:8b", Some(8_192)),
            ("openai", "qwen2.5-coder:7b", Some(32_768)),
            ("openai", "gpt-oss-20b", Some(131_072)),
            ("anthropic", "claude-opus-4-1", Some(200_000)),
            ("openai", "claude-sonnet-4-5", None),
            ("ollama", "llama3", None),
        ] {
            assert_eq!(
                model_context_window(provider, model),
                expected,
                "{provider} {model}"
            );
        }
    }

    #[test]
    fn the_image_table() {
        for (provider, model, expected) in [
            ("scripted", "anything", Some(true)),
            ("anthropic", "claude-sonnet-4-5", Some(true)),
            ("anthropic", "claude-2.1", Some(false)),
            ("openai", "gpt-4o-mini", Some(true)),
            ("openai", "gpt-4.1-nano", Some(true)),
            ("openai", "o3-mini", Some(false)),
            ("openai", "o3", Some(true)),
            ("openai", "llama3.2-vision:11b", Some(true)),
            ("openai", "llama3.2:3b", None),
            ("openai", "gpt-3.5-turbo", None),
            ("openai", "claude-sonnet-4-5", None),
        ] {
            assert_eq!(
                model_takes_images(provider, model),
                expected,
                "{provider} {model}"
            );
        }
    }
}
