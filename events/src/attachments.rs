//! Files attached to a person's message, as the message names them: `content.attachments`, a
//! list whose items are an attachment id or `{"id": …, "name": …, "media_type": …,
//! "size_bytes": …}` (what the API recorded when the message was sent). The id is what
//! `attachment:<id>` names in the message's session.

use serde::{Deserialize, Serialize};

/// One attachment a message names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "AttachmentRefWire")]
pub struct AttachmentRef {
    /// The attachment's id in the message's session.
    pub id: String,
    /// The file's name, as uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its content type, as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AttachmentRefWire {
    Id(String),
    Described {
        id: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        media_type: Option<String>,
        #[serde(default)]
        size_bytes: Option<u64>,
    },
}

impl From<AttachmentRefWire> for AttachmentRef {
    fn from(wire: AttachmentRefWire) -> AttachmentRef {
        match wire {
            AttachmentRefWire::Id(id) => AttachmentRef {
                id,
                name: None,
                media_type: None,
                size_bytes: None,
            },
            AttachmentRefWire::Described {
                id,
                name,
                media_type,
                size_bytes,
            } => AttachmentRef {
                id,
                name,
                media_type,
                size_bytes,
            },
        }
    }
}

/// The attachments a message's content names, in order; an item that is neither an id nor an
/// object with one is passed over, and content without `attachments` names none.
pub fn message_attachments(content: &serde_json::Value) -> Vec<AttachmentRef> {
    let Some(items) = content
        .get("attachments")
        .and_then(serde_json::Value::as_array)
    else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| serde_json::from_value(item.clone()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_id_or_an_object_with_one() {
        let content = json!({"text": "see these", "attachments": [
            "att-1",
            {"id": "att-2", "name": "floorplan.png", "media_type": "image/png", "size_bytes": 68},
            {"id": "att-3"},
            {"name": "no id"},
            7,
        ]});
        let named = message_attachments(&content);
        assert_eq!(
            named
                .iter()
                .map(|item| item.id.as_str())
                .collect::<Vec<_>>(),
            ["att-1", "att-2", "att-3"]
        );
        assert_eq!(named[1].name.as_deref(), Some("floorplan.png"));
        assert_eq!(named[1].size_bytes, Some(68));
        assert_eq!(
            serde_json::to_value(&named[1]).expect("serializes"),
            content["attachments"][1]
        );
        assert_eq!(
            serde_json::to_value(&named[0]).expect("serializes"),
            json!({"id": "att-1"})
        );
        assert!(message_attachments(&json!({"text": "none"})).is_empty());
        assert!(message_attachments(&json!("plain")).is_empty());
    }
}
