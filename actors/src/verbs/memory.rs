//! The `memory` verb: writes, appends to or deletes one of the account's memory files under
//! `~/memory/` (read them with the `read` verb).

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use seed_store::{CallEffect, MemoryChange};

use crate::schema::parse_checked;
use crate::verb::{Verb, VerbContext, VerbOutput};

/// Changes a memory file. Not safe to repeat: an append run twice appends twice.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Action {
    Write,
    Append,
    Delete,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryArgs {
    action: Action,
    path: String,
    content: Option<String>,
}

impl Verb for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn description(&self) -> &'static str {
        "Changes your memory files: notes under ~/memory/ that outlast this session and that \
         every session of yours can read (with the read verb). action \"write\" creates the file \
         at path or replaces its whole content with content; \"append\" adds content to the end \
         of the file exactly as given (add your own newline) and creates it if missing; \
         \"delete\" removes the file (no content). path is ~/memory/ followed by plain names \
         separated by / (no empty, . or .. parts), for example ~/memory/people/ana.md. Use it \
         for what is worth knowing later — preferences, facts, decisions — not for the work of \
         this session (use plan for that). Returns what was done, for example \"wrote \
         ~/memory/notes.md (12 bytes)\"."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["write", "append", "delete"],
                    "description": "write (replace the content), append, or delete"
                },
                "path": {
                    "type": "string",
                    "description": "The file, ~/memory/<name>[/<name>...]"
                },
                "content": {
                    "type": "string",
                    "description": "For write and append: the text to write or append"
                }
            },
            "required": ["action", "path"],
            "additionalProperties": false
        })
    }

    /// An append run twice appends twice: a call cut off by a crash is not run again. Each
    /// change records its call's effect with it, so such a call is answered with what it did
    /// when it took effect ([`Verb::reconcile`]), and as interrupted when it did not.
    fn safe_to_repeat(&self) -> bool {
        false
    }

    fn reconcile(&self, context: VerbContext, _: Value) -> BoxFuture<'static, Option<VerbOutput>> {
        Box::pin(async move {
            match context
                .store
                .call_effect(context.session_id, &context.tool_call_id)
                .await
            {
                Ok(effect) => effect.map(|effect| VerbOutput::ok(effect.result)),
                Err(error) => {
                    tracing::warn!(%error, "cannot look up a cut-off memory call");
                    None
                }
            }
        })
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<MemoryArgs>(self.name(), &self.parameters(), arguments);
        Box::pin(async move {
            match parsed {
                Ok(args) => change(context, args).await,
                Err(error) => error,
            }
        })
    }
}

async fn change(context: VerbContext, args: MemoryArgs) -> VerbOutput {
    let MemoryArgs {
        action,
        path,
        content,
    } = args;
    let (change, done) = match (action, content) {
        (Action::Write | Action::Append, None) => {
            return VerbOutput::error(
                "invalid arguments for memory: content: required for write and append",
            );
        }
        (Action::Delete, Some(_)) => {
            return VerbOutput::error("invalid arguments for memory: content: not used by delete");
        }
        (Action::Write, Some(content)) => {
            let done = format!("wrote {path} ({} bytes)", content.len());
            (MemoryChange::Write { content }, done)
        }
        (Action::Append, Some(text)) => {
            let done = format!("appended {} bytes to {path}", text.len());
            (MemoryChange::Append { text }, done)
        }
        (Action::Delete, None) => (MemoryChange::Delete, format!("deleted {path}")),
    };
    // Recorded with the change, in its transaction: what a call cut off after it answers.
    let effect = CallEffect {
        session_id: context.session_id,
        tool_call_id: context.tool_call_id.clone(),
        verb: "memory".to_owned(),
        result: done.clone(),
    };
    let changed = context
        .store
        .change_memory(
            context.account_id,
            &path,
            change,
            context.now_ms,
            Some(effect),
        )
        .await;
    match changed {
        Ok(true) => VerbOutput::ok(done),
        Ok(false) => VerbOutput::error(format!("no such file: {path}")),
        Err(error @ seed_store::Error::InvalidPath { .. }) => VerbOutput::error(error.to_string()),
        Err(error @ seed_store::Error::OverQuota { .. }) => VerbOutput::error(format!(
            "memory is full: {error}; nothing was written (delete or shorten files first)"
        )),
        Err(error) => VerbOutput::error(format!("memory failed: {error}")),
    }
}
