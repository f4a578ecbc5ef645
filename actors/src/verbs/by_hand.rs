//! Verbs a person runs by hand (the command palette): the verb runs as it would for the model,
//! outside any turn, and the action and its result go to the log as one `action` event, which
//! the model reads with its next turn.

use seed_events::{AccountId, EventRole, NewEvent, RunId, SessionId};

use crate::runtime::{Error, Runtime};
use crate::verb::{Availability, Invoke, VerbContext, VerbOutput};
use crate::verbs::VerbSet;

impl VerbSet {
    /// The verbs a person may run by hand: those offered in every run that do not end a turn
    /// (a delegation or a continuation belongs to a turn).
    pub fn by_hand_names(&self) -> Vec<&'static str> {
        self.verbs
            .iter()
            .filter(|(verb, _)| {
                verb.availability() == Availability::Everywhere && !verb.ends_turn()
            })
            .map(|(verb, _)| verb.name())
            .collect()
    }

    /// The argument schema of the verb `name`, when a person may run it by hand.
    pub fn parameters_by_hand(&self, name: &str) -> Option<serde_json::Value> {
        if !self.by_hand_names().contains(&name) {
            return None;
        }
        self.verbs
            .iter()
            .find(|(verb, _)| verb.name() == name)
            .map(|(verb, _)| verb.parameters())
    }

    /// What the verb `name` does, in its own words, when a person may run it by hand.
    pub fn description_by_hand(&self, name: &str) -> Option<&'static str> {
        if !self.by_hand_names().contains(&name) {
            return None;
        }
        self.verbs
            .iter()
            .find(|(verb, _)| verb.name() == name)
            .map(|(verb, _)| verb.description())
    }

    /// Checks `arguments` against the schema of the verb `name`, as a person's action must fit
    /// before anything of it is written. A verb not run by hand has nothing to check (the
    /// action is refused as such).
    pub fn check_by_hand(
        &self,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<(), crate::verbs::read::ArgumentProblem> {
        match self.parameters_by_hand(name) {
            Some(schema) => crate::verbs::read::check_arguments(&schema, arguments),
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
        if !self.by_hand_names().contains(&name) {
            return None;
        }
        let (verb, actor) = self.verbs.iter().find(|(verb, _)| verb.name() == name)?;
        let output = actor
            .send(Invoke { context, arguments })
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
    NewEvent {
        kind: "action".to_owned(),
        role: Some(EventRole::User),
        actor: Some("user".to_owned()),
        content: serde_json::json!({
            "text": text,
            "verb": verb,
            "arguments": arguments,
            "result": output.content,
            "is_error": output.is_error,
        }),
        meta: serde_json::json!({}),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: now_ms,
    }
}

impl Runtime {
    /// The verbs a person may run by hand.
    pub fn verbs_by_hand(&self) -> Vec<&'static str> {
        self.env.verbs.by_hand_names()
    }

    /// What `verb` does, when a person may run it by hand.
    pub fn verb_description_by_hand(&self, verb: &str) -> Option<&'static str> {
        self.env.verbs.description_by_hand(verb)
    }

    /// The schema of the arguments of `verb`, when a person may run it by hand.
    pub fn verb_parameters_by_hand(&self, verb: &str) -> Option<serde_json::Value> {
        self.env.verbs.parameters_by_hand(verb)
    }

    /// Checks a person's arguments for `verb` against its schema: an action that does not fit
    /// is refused with the field named before anything is written.
    pub fn check_verb_arguments(
        &self,
        verb: &str,
        arguments: &serde_json::Value,
    ) -> Result<(), crate::verbs::read::ArgumentProblem> {
        self.env.verbs.check_by_hand(verb, arguments)
    }

    /// Runs `verb` by hand in the account's session and returns its output; the caller writes
    /// [`action_event`] to the log. `None`: no such verb may be run by hand.
    pub async fn run_verb_by_hand(
        &self,
        account_id: AccountId,
        session_id: SessionId,
        verb: &str,
        arguments: serde_json::Value,
    ) -> Result<Option<VerbOutput>, Error> {
        // Outside any turn: a run id of its own, never queued.
        let run_id = RunId::new_v7();
        let context = self
            .verb_context(session_id, run_id, &format!("by-hand-{run_id}"))
            .await?;
        if context.account_id != account_id {
            return Err(Error::SessionNotFound(session_id));
        }
        Ok(self.env.verbs.run_by_hand(verb, context, arguments).await)
    }
}
