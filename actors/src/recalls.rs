//! Recall telemetry, the shell: a `read thread:` call's recall of what a continuation's
//! projection left out recorded against its edge, and the ranges a continuing predecessor
//! recalled repeatedly read back for its successor's projection. What counts, against which
//! edge, and what is carried on, is decided in `seed_projections::continuation::recall`.

use seed_events::{SessionContinuationManifest, SessionId};
use seed_projections::continuation::EXCERPT_EVENTS_MAX;
use seed_projections::continuation::recall::{
    LineageEdge, RecallRow, RecalledExcerpt, recall_of_read, repeated_recalls,
};
use seed_store::{NewRecall, Store};

/// A thread read, as `read thread:` returned it.
#[derive(Debug, Clone)]
pub struct ThreadRead<'a> {
    pub reader: SessionId,
    /// The read's call, the key that makes a replayed read count once.
    pub tool_call_id: &'a str,
    pub thread: SessionId,
    /// The first and last seq of the events the read returned.
    pub from_seq: i64,
    pub to_seq: i64,
    pub now_ms: i64,
}

/// Records what `read` recalled of what a projection on the reader's lineage left out; how
/// many recalls were new (none for a replayed call, a thread that is no ancestor of the reader,
/// or a read of only what the projections carried).
pub async fn record_read(store: &Store, read: &ThreadRead<'_>) -> Result<usize, seed_store::Error> {
    if read.thread == read.reader || read.from_seq > read.to_seq {
        return Ok(0);
    }
    let edges = store.lineage_edges(read.reader).await?;
    let mut manifests = Vec::with_capacity(edges.len());
    for edge in &edges {
        // A manifest that does not decode counts nothing (fsck names it); the read goes on.
        match SessionContinuationManifest::from_cbor(&edge.manifest_cbor) {
            Ok(manifest) => manifests.push((edge.id, manifest)),
            Err(error) => {
                tracing::warn!(continuation_id = %edge.id, %error, "a recall skipped an edge");
            }
        }
    }
    let lineage: Vec<LineageEdge<'_>> = manifests
        .iter()
        .map(|(continuation_id, manifest)| LineageEdge {
            continuation_id: *continuation_id,
            manifest,
        })
        .collect();
    let Some(recall) = recall_of_read(&lineage, read.thread, read.from_seq, read.to_seq) else {
        return Ok(0);
    };
    let recalls = recall
        .ranges
        .iter()
        .map(|&(from_seq, to_seq)| NewRecall {
            continuation_id: recall.continuation_id,
            reader_session_id: read.reader,
            tool_call_id: read.tool_call_id.to_owned(),
            from_seq,
            to_seq,
            created_at_ms: read.now_ms,
        })
        .collect();
    store.record_recalls(recalls).await
}

/// The ranges `predecessor` recalled in two or more read calls, each with its events read by
/// index (at most [`EXCERPT_EVENTS_MAX`]), for its successor's projection. The recall rows are
/// read first and the events after: a thread's events up to a seq never change once written,
/// so the two reads agree without a shared snapshot.
pub async fn recalled_excerpts(
    store: &Store,
    predecessor: SessionId,
) -> Result<Vec<RecalledExcerpt>, seed_store::Error> {
    let rows: Vec<RecallRow> = store
        .recalls_by_reader(predecessor)
        .await?
        .into_iter()
        .map(|row| RecallRow {
            thread: row.thread,
            tool_call_id: row.tool_call_id,
            from_seq: row.from_seq,
            to_seq: row.to_seq,
        })
        .collect();
    let mut excerpts = Vec::new();
    for recall in repeated_recalls(&rows) {
        let range = recall.range;
        let events = store
            .read_events(
                range.thread,
                range.from_seq,
                range.to_seq,
                EXCERPT_EVENTS_MAX,
            )
            .await?;
        excerpts.push(RecalledExcerpt { recall, events });
    }
    Ok(excerpts)
}
