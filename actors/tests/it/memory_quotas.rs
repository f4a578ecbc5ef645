//! The `memory` verb against the account's quotas of memory files and their bytes: a call
//! past either answers with an error that says which and what to do, and writes nothing.

use crate::common;

use crate::common::{account, session};
use seed_actors::verbs::memory::Memory;
use seed_actors::{Verb, VerbOutput};
use seed_store::{Config, NewSession, Quotas, Store};
use serde_json::{Value, json};

async fn memory(store: &Store, call: &str, arguments: Value) -> VerbOutput {
    let mut context = common::verb_context(store, session(0));
    context.tool_call_id = call.to_owned();
    Memory.call(context, arguments).await
}

#[actix::test]
async fn a_memory_call_past_the_accounts_quotas_is_an_error_and_writes_nothing()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config {
        quotas: Quotas {
            memory_files_max: 1,
            memory_bytes_max: 8,
            ..Quotas::default()
        },
        ..Config::new(dir.path().join("seed.db"))
    })?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    let output = memory(
        &store,
        "call-1",
        json!({"action": "write", "path": "~/memory/a.md", "content": "1234"}),
    )
    .await;
    assert_eq!(output, VerbOutput::ok("wrote ~/memory/a.md (4 bytes)"));
    let before = store.list_memory(account()).await?;

    let refusals = [
        (
            "call-2",
            json!({"action": "write", "path": "~/memory/b.md", "content": "x"}),
            "memory is full: the account's memory files would be 2, past the 1 an account may \
             have (memory_files_max); nothing was written (delete or shorten files first)",
        ),
        (
            "call-3",
            json!({"action": "append", "path": "~/memory/a.md", "content": "56789"}),
            "memory is full: the bytes of the account's memory files would be 9, past the 8 an \
             account may have (memory_bytes_max); nothing was written (delete or shorten files \
             first)",
        ),
    ];
    for (call, arguments, message) in refusals {
        assert_eq!(
            memory(&store, call, arguments).await,
            VerbOutput::error(message)
        );
        assert_eq!(store.call_effect(session(0), call).await?, None, "{call}");
    }
    assert_eq!(store.list_memory(account()).await?, before);
    assert_eq!(
        store
            .read_memory(account(), "~/memory/a.md")
            .await?
            .as_deref(),
        Some("1234")
    );
    Ok(())
}
