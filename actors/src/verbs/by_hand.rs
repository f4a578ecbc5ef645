//! Verbs a person runs by hand (the command palette): the verb runs as it would for the model,
//! outside any turn, and the action and its result go to the log as one `action` event, which
//! the model reads with its next turn.

use seed_events::{ActionBody, EventRole, NewEvent};

use crate::verb::{Availability, Invoke, VerbContext, VerbOutput};
use crate::verbs::VerbSet;

impl VerbSet {
    /// The verbs a person may run by hand: those offered in every run that do not end a turn
    /// (a delegation or a continuation belongs to a turn).
    pub fn by_hand_names(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(verb, _)| {
                verb.availability() == Availability::Everywhere && !verb.ends_turn()
            })
            .map(|(verb, _)| verb.name().to_owned())
            .collect()
    }

    fn by_hand(&self, name: &str) -> bool {
        self.by_hand_names().iter().any(|by_hand| by_hand == name)
    }

    /// The argument schema of the verb `name`, when a person may run it by hand.
    pub fn parameters_by_hand(&self, name: &str) -> Option<serde_json::Value> {
        if !self.by_hand(name) {
            return None;
        }
        self.entries()
            .iter()
            .find(|(verb, _)| verb.name() == name)
            .map(|(verb, _)| verb.parameters())
    }

    /// What the verb `name` does, in its own words, when a person may run it by hand.
    pub fn description_by_hand(&self, name: &str) -> Option<String> {
        if !self.by_hand(name) {
            return None;
        }
        self.entries()
            .iter()
            .find(|(verb, _)| verb.name() == name)
            .map(|(verb, _)| verb.description().to_owned())
    }

    /// Checks `arguments` against the schema of the verb `name`, as a person's action must fit
    /// before anything of it is written. A verb not run by hand has nothing to check (the
    /// action is refused as such).
    pub fn check_by_hand(
        &self,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<(), crate::schema::ArgumentProblem> {
        match self.parameters_by_hand(name) {
            Some(schema) => crate::schema::check_arguments(&schema, arguments),
            None => Ok(()),
        }
    }

    /// Runs the verb `name` by hand; `None` when no such verb may be run by hand.
    pub async fn run_by_hand(
        &self,
        name: &str,
        context: VerbContext,
        arguments: serde_json::Value,
    ) -> Option<VerbOutput> {
        if !self.by_hand(name) {
            return None;
        }
        let entries = self.entries();
        let (verb, actor) = entries.iter().find(|(verb, _)| verb.name() == name)?;
        let output = actor
            .send(Invoke::new(context, arguments))
            .await
            .unwrap_or_else(|_| {
                VerbOutput::error(format!("the {} verb is not running", verb.name()))
            });
        Some(output)
    }
}

/// The log event of an action a person ran by hand, result included.
pub fn action_event(
    verb: &str,
    arguments: &serde_json::Value,
    output: &VerbOutput,
    now_ms: i64,
) -> NewEvent {
    let text = seed_projections::transcript::user_action_text(
        verb,
        arguments,
        &output.content,
        output.is_error,
    );
    let body = ActionBody {
        text,
        verb: verb.to_owned(),
        arguments: arguments.clone(),
        result: output.content.clone(),
        is_error: output.is_error,
        rest: serde_json::Map::new(),
    };
    NewEvent::new(body, EventRole::User, "user", now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_action_is_one_event_with_its_result() {
        let arguments = json!({ "description": "drafting" });
        let output = VerbOutput::ok("set");
        let event = action_event("status", &arguments, &output, 1_000);
        let text =
            seed_projections::transcript::user_action_text("status", &arguments, "set", false);
        assert_eq!(
            event,
            NewEvent {
                kind: "action".to_owned(),
                role: Some(EventRole::User),
                actor: Some("user".to_owned()),
                content: json!({
                    "text": text,
                    "verb": "status",
                    "arguments": { "description": "drafting" },
                    "result": "set",
                    "is_error": false,
                }),
                meta: json!({}),
                run_id: None,
                pi_entry_id: None,
                created_at_ms: 1_000,
            }
        );
    }
}
