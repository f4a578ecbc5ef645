//! Asking the model: a request built from the store's context, its response streamed (the
//! `stream` submodule), and committed with its model task.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use seed_providers::{
    Message, Provider, ProviderError, ProviderErrorKind, Request, ToolResultMessage,
};

use super::stream::Streamed;
use super::{Harness, Result, TurnOutcome};
use crate::context::{conversation_cached, request_messages};
use crate::fs::DurableFs;
use crate::record::{
    EntryBody, LIVE_DOCUMENT, LiveDocument, LiveState, ModelTaskState, TURN_DOCUMENT, Task,
    TurnDocument, TurnState,
};
use crate::spans::{ModelOutcome, ModelRequest, TurnSpans};
use crate::state::Batch;
use crate::stop::StopSignal;

impl<F: DurableFs, P: Provider> Harness<F, P> {
    /// Streams one response and commits it. `Some` when the turn ended with it.
    pub(super) async fn ask_model(
        &mut self,
        doc: &TurnDocument,
        step: u32,
        request: Request,
        blocks: &[Arc<Message>],
        stop: &StopSignal,
    ) -> Result<Option<TurnOutcome>> {
        let model_task = |state| Task::Model {
            request_id: doc.request_id.clone(),
            step,
            state,
        };
        let traced = self
            .spans
            .clone()
            .map(|spans| Traced::before(spans, &request, self.config.trace_content));
        let mut first_chunk_after = None;
        let streamed = self
            .stream(doc, step, request, stop, &mut first_chunk_after)
            .await;
        if let Some(traced) = traced {
            self.export_span(traced, doc, step, first_chunk_after, &streamed);
        }
        let streamed = streamed?;
        match streamed {
            Streamed::Done(mut message) => {
                if message.usage.prompt_tokens() == 0 {
                    // The server counted nothing (many local servers send no usage): the
                    // request, built again as it was sent, is measured instead.
                    let sent = self.request(doc, blocks);
                    message.usage = seed_providers::estimate::usage(&sent, &message);
                }
                let mut batch = Batch::new(&self.state);
                let entry_id = batch.entry(EntryBody::Assistant {
                    request_id: doc.request_id.clone(),
                    message: message.clone(),
                });
                // Every model request has its task (the spec: one per model request), closed
                // here with the entry that records the response; `pi.live` is cleared when
                // streaming opened it.
                batch.task(model_task(ModelTaskState::Completed { entry_id }));
                if self.state.live().is_some() {
                    batch.document::<LiveDocument>(LIVE_DOCUMENT, None);
                }
                let outcome = if !message.is_complete() {
                    let error = ProviderError::new(
                        ProviderErrorKind::Refused,
                        message
                            .error_message
                            .clone()
                            .unwrap_or_else(|| format!("response {:?}", message.stop_reason)),
                    );
                    let settled = TurnDocument {
                        state: TurnState::Failed,
                        reason: Some(error.to_string()),
                        ..doc.clone()
                    };
                    batch.document(TURN_DOCUMENT, Some(&settled));
                    Some(TurnOutcome::Failed {
                        error,
                        partial_text: message.text(),
                    })
                } else if message.tool_calls().is_empty() {
                    let settled = TurnDocument {
                        state: TurnState::Answered,
                        answer_entry_id: Some(entry_id),
                        ..doc.clone()
                    };
                    batch.document(TURN_DOCUMENT, Some(&settled));
                    Some(TurnOutcome::Answered { entry_id, message })
                } else {
                    None
                };
                self.commit(batch).await?;
                Ok(outcome)
            }
            Streamed::Stopped(partial) => {
                let mut batch = Batch::new(&self.state);
                batch.document(
                    LIVE_DOCUMENT,
                    Some(&partial.live(doc, LiveState::Stopped, None)),
                );
                batch.task(model_task(ModelTaskState::Aborted));
                let settled = TurnDocument {
                    state: TurnState::Stopped,
                    ..doc.clone()
                };
                batch.document(TURN_DOCUMENT, Some(&settled));
                self.commit(batch).await?;
                Ok(Some(TurnOutcome::Stopped {
                    partial_text: partial.text,
                }))
            }
            Streamed::Failed { error, partial } => {
                let mut batch = Batch::new(&self.state);
                let failed = partial.live(doc, LiveState::Failed, Some(error.to_string()));
                batch.document(LIVE_DOCUMENT, Some(&failed));
                batch.task(model_task(ModelTaskState::Aborted));
                let settled = TurnDocument {
                    state: TurnState::Failed,
                    reason: Some(error.to_string()),
                    ..doc.clone()
                };
                batch.document(TURN_DOCUMENT, Some(&settled));
                self.commit(batch).await?;
                Ok(Some(TurnOutcome::Failed {
                    error,
                    partial_text: partial.text,
                }))
            }
        }
    }

    pub(super) fn request(&mut self, doc: &TurnDocument, blocks: &[Arc<Message>]) -> Request {
        let context = conversation_cached(&self.state.entries, &mut self.message_cache);
        Request {
            model: self.config.model.clone(),
            reasoning: self.config.reasoning,
            system_prompt: self.config.system_prompt.clone(),
            messages: without_images_unless(
                || self.provider.takes_images(&self.config.model),
                request_messages(context, doc.input_entry_id, blocks),
            ),
            tools: Arc::clone(&self.tool_specs),
            session_id: self.config.session_id.clone(),
        }
    }
}

/// `messages` with the images of tool results left out when the model takes none (their text
/// names each one). The model is asked only when a message holds images, so a request without
/// any costs a look at each message; a message with images is copied, the others stay shared.
fn without_images_unless(
    takes_images: impl FnOnce() -> bool,
    mut messages: Vec<Arc<Message>>,
) -> Vec<Arc<Message>> {
    let has_images = |message: &Arc<Message>| matches!(message.as_ref(), Message::ToolResult(result) if !result.images.is_empty());
    if !messages.iter().any(has_images) || takes_images() {
        return messages;
    }
    for message in messages.iter_mut().filter(|message| has_images(message)) {
        if let Message::ToolResult(result) = message.as_ref() {
            *message = Arc::new(Message::ToolResult(ToolResultMessage {
                images: Vec::new(),
                ..result.clone()
            }));
        }
    }
    messages
}

/// What a model request's span needs from before the request is sent, and where it goes.
struct Traced {
    spans: Arc<dyn TurnSpans>,
    started_at: SystemTime,
    model: String,
    input_messages: Option<String>,
    /// Whether message text is exported.
    content: bool,
}

impl Traced {
    fn before(spans: Arc<dyn TurnSpans>, request: &Request, content: bool) -> Traced {
        Traced {
            spans,
            started_at: SystemTime::now(),
            model: request.model.clone(),
            input_messages: content
                .then(|| serde_json::to_string(&request.messages).unwrap_or_default()),
            content,
        }
    }
}

impl<F: DurableFs, P: Provider> Harness<F, P> {
    /// Hands a model request that ended, as `streamed` says, to the turn's [`TurnSpans`].
    fn export_span(
        &self,
        traced: Traced,
        doc: &TurnDocument,
        step: u32,
        first_chunk_after: Option<Duration>,
        streamed: &Result<Streamed>,
    ) {
        let error_kind;
        let outcome = match streamed {
            Ok(Streamed::Done(message)) => ModelOutcome::Response(message),
            Ok(Streamed::Stopped(_)) => ModelOutcome::Failed("cancelled"),
            Ok(Streamed::Failed { error, .. }) => {
                error_kind = error.kind.to_string();
                ModelOutcome::Failed(&error_kind)
            }
            Err(_) => ModelOutcome::Failed("store"),
        };
        traced.spans.model_request(&ModelRequest {
            system: &self.config.system,
            model: &traced.model,
            request_id: &doc.request_id,
            step,
            started_at: traced.started_at,
            ended_at: SystemTime::now(),
            first_chunk_after,
            input_messages: traced.input_messages,
            output_messages: match streamed {
                Ok(Streamed::Done(message)) if traced.content => Some(message.text()),
                _ => None,
            },
            outcome,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that takes no images is sent a tool's text alone; one that does gets the images,
    /// and messages without images are shared, not copied.
    #[test]
    fn a_results_images_go_to_a_model_that_takes_images() {
        let pictured = Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: "c1".to_owned(),
            tool_name: "shot".to_owned(),
            content: "[image/png, 8 bytes: attachment:c1-1]".to_owned(),
            is_error: false,
            images: vec![seed_providers::ResultImage {
                media_type: "image/png".to_owned(),
                data: "iVBORw0KGgo=".to_owned(),
                attachment_id: Some("c1-1".to_owned()),
            }],
        }));
        let said = Arc::new(Message::User(seed_providers::UserMessage::new("look")));
        let messages = || vec![Arc::clone(&said), Arc::clone(&pictured)];

        let shown = without_images_unless(|| true, messages());
        assert!(Arc::ptr_eq(&shown[1], &pictured));

        let told = without_images_unless(|| false, messages());
        assert!(Arc::ptr_eq(&told[0], &said));
        let Message::ToolResult(result) = told[1].as_ref() else {
            panic!("a tool result: {:?}", told[1]);
        };
        assert!(result.images.is_empty());
        assert_eq!(result.content, "[image/png, 8 bytes: attachment:c1-1]");
    }
}
