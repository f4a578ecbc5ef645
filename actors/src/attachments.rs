//! The shell of attachments in a turn: reads, from the session's own attachments, what the
//! model is shown of the files the turn's messages name. What to read of each file, and what it
//! becomes, is `seed_projections::attachments`' decision; this only does the IO it asks for.

use std::collections::BTreeSet;

use seed_events::{SessionEvent, SessionId, message_attachments};
use seed_projections::attachments::{
    ATTACHMENT_READ_BYTES_MAX, AttachedContent, AttachedFile, NotShown, Reading,
    attachment_read_text, reading,
};
use seed_projections::import::AttachedFiles;
use seed_store::Store;

use crate::verb::{VerbContext, VerbOutput};

/// The files `events` name, read for a model that does or does not take images. A file the
/// session does not hold is left out (the import names it as missing); one whose bytes cannot
/// be read is named as missing too, and the turn goes on.
pub async fn read_attached(
    store: &Store,
    session_id: SessionId,
    events: &[SessionEvent],
    takes_images: bool,
) -> Result<AttachedFiles, seed_store::Error> {
    let ids: BTreeSet<String> = events
        .iter()
        .flat_map(|event| message_attachments(&event.content))
        .map(|named| named.id)
        .collect();
    let mut files = AttachedFiles::new();
    for id in ids {
        let Some(row) = store.get_attachment(session_id, &id).await? else {
            continue;
        };
        let size_bytes = row.size_bytes.max(0) as u64;
        let (bytes_max, is_image) = match reading(&row.media_type, size_bytes, takes_images) {
            Reading::Image => (size_bytes as usize, true),
            Reading::Text { bytes_max } => (bytes_max, false),
            Reading::Nothing(why) => {
                files.insert(id, file(row, AttachedContent::NotShown(why)));
                continue;
            }
        };
        let content = match store.read_attachment_bytes(&row, 0, bytes_max).await {
            Ok(bytes) if is_image => AttachedContent::Image(bytes),
            Ok(bytes) => AttachedContent::Text(bytes),
            Err(error) => {
                tracing::warn!(%session_id, attachment_id = %id, %error, "an attachment's file cannot be read");
                AttachedContent::NotShown(NotShown::Missing)
            }
        };
        files.insert(id, file(row, content));
    }
    Ok(files)
}

fn file(row: seed_store::AttachmentRow, content: AttachedContent) -> AttachedFile {
    AttachedFile {
        id: row.id,
        name: row.name,
        media_type: row.media_type,
        size_bytes: row.size_bytes.max(0) as u64,
        content,
    }
}

/// `read attachment:<id>`: the text of an attachment of the caller's account (its own session's
/// first), from `from_byte` on; another account's is not found.
pub(crate) async fn read_attachment(context: &VerbContext, id: &str, from_byte: u64) -> VerbOutput {
    let failed = |error: seed_store::Error| VerbOutput::error(format!("read failed: {error}"));
    let row = match context
        .store
        .find_account_attachment(context.account_id, context.session_id, id)
        .await
    {
        Ok(Some(row)) => row,
        Ok(None) => return VerbOutput::error(format!("attachment not found: {id}")),
        Err(error) => return failed(error),
    };
    let bytes = match context
        .store
        .read_attachment_bytes(&row, from_byte, ATTACHMENT_READ_BYTES_MAX + 3)
        .await
    {
        Ok(bytes) => bytes,
        Err(error) => return failed(error),
    };
    match attachment_read_text(
        &file(row, AttachedContent::Text(Vec::new())),
        from_byte,
        &bytes,
    ) {
        Ok(text) => VerbOutput::ok(text),
        Err(problem) => VerbOutput::error(problem),
    }
}
