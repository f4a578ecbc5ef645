//! The verbs Seed ships, and the set a runtime offers.

pub mod by_hand;
pub mod continue_session;
pub mod delegate;
pub mod memory;
pub mod plan;
pub mod read;
pub mod status;

use std::sync::Arc;

use actix::prelude::*;

use crate::verb::{Availability, RunBinding, TurnEffect, Verb, VerbActor, VerbTool};

/// The registered verbs, each with its running actor.
#[derive(Clone, Default)]
pub struct VerbSet {
    verbs: Vec<(Arc<dyn Verb>, Addr<VerbActor>)>,
}

impl std::fmt::Debug for VerbSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbSet").finish_non_exhaustive()
    }
}

impl VerbSet {
    /// Starts an actor for each verb. Call inside a running actix system.
    pub fn start(verbs: Vec<Arc<dyn Verb>>) -> VerbSet {
        VerbSet {
            verbs: verbs
                .into_iter()
                .map(|verb| {
                    let actor = VerbActor::new(Arc::clone(&verb)).start();
                    (verb, actor)
                })
                .collect(),
        }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.verbs.iter().map(|(verb, _)| verb.name()).collect()
    }

    /// The names of the verbs whose calls have `effect` on the run of their turn.
    pub fn names_with(&self, effect: TurnEffect) -> Vec<&'static str> {
        self.verbs
            .iter()
            .filter(|(verb, _)| verb.turn_effect() == effect)
            .map(|(verb, _)| verb.name())
            .collect()
    }

    /// The verbs a run may call, as tools bound to the run `binding` names.
    pub fn tools(
        &self,
        binding: &RunBinding,
        in_child: bool,
        typed: bool,
        crash_points: &crate::crash::CrashPoints,
    ) -> seed_durable::ToolSet {
        self.verbs
            .iter()
            .filter(|(verb, _)| match verb.availability() {
                Availability::Everywhere => true,
                Availability::NotInChildren => !in_child,
                Availability::TypedChildrenOnly => typed,
            })
            .map(|(verb, actor)| {
                VerbTool::new(verb.as_ref(), actor.clone(), binding.clone())
                    .with_crash_points(crash_points.clone())
            })
            .fold(seed_durable::ToolSet::new(), |set, tool| {
                set.with(Arc::new(tool))
            })
    }
}

/// The verbs Seed ships: read, plan, status, memory, delegate, return_result and
/// continue_session.
pub fn shipped() -> Vec<std::sync::Arc<dyn crate::verb::Verb>> {
    vec![
        Arc::new(read::Read),
        Arc::new(plan::Plan),
        Arc::new(status::Status),
        Arc::new(memory::Memory),
        Arc::new(delegate::Delegate),
        Arc::new(delegate::ReturnResult),
        Arc::new(continue_session::ContinueSession),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_verbs_declare_what_they_do_to_the_turn() {
        let effects: Vec<_> = shipped()
            .iter()
            .map(|verb| (verb.name(), verb.turn_effect()))
            .collect();
        assert_eq!(
            effects,
            [
                ("read", TurnEffect::None),
                ("plan", TurnEffect::None),
                ("status", TurnEffect::None),
                ("memory", TurnEffect::None),
                ("delegate", TurnEffect::Delegates),
                ("return_result", TurnEffect::Returns),
                ("continue_session", TurnEffect::Continues),
            ]
        );
        let names_with = actix::System::new().block_on(async {
            let verbs = VerbSet::start(shipped());
            [
                TurnEffect::None,
                TurnEffect::Continues,
                TurnEffect::Delegates,
                TurnEffect::Returns,
            ]
            .map(|effect| verbs.names_with(effect))
        });
        assert_eq!(
            names_with,
            [
                vec!["read", "plan", "status", "memory"],
                vec!["continue_session"],
                vec!["delegate"],
                vec!["return_result"],
            ]
        );
        let none = actix::System::new().block_on(async {
            VerbSet::start(vec![Arc::new(read::Read)]).names_with(TurnEffect::Continues)
        });
        assert!(
            none.is_empty(),
            "a set without continue_session offers no continuing"
        );
    }
}
