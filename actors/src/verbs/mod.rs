//! The verbs Seed ships, and the set a runtime offers.

pub mod by_hand;
pub mod continue_session;
pub mod delegate;
pub mod memory;
pub mod plan;
pub mod preview_continuation;
pub mod read;
pub mod schedule;
pub mod status;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use actix::prelude::*;

use crate::verb::{Availability, RunBinding, TurnEffect, Verb, VerbActor, VerbTool};

/// A verb as people see it listed (`GET /v1/tools`, `seed tools`).
#[derive(Debug, Clone, PartialEq)]
pub struct VerbInfo {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    pub safe_to_repeat: bool,
    pub ends_turn: bool,
    pub availability: Availability,
    /// Where it comes from: `None` for a verb compiled in, else its source (an MCP server).
    pub source: Option<String>,
}

/// The registered verbs, each with its running actor: those the runtime started with, and
/// groups that come and go while it runs (an MCP server's tools, refreshed when its list
/// changes). Clones share the set; a change is seen by the next run's tools, and the
/// generation says when to choose a kept harness's tools again.
#[derive(Clone, Default)]
pub struct VerbSet {
    inner: Arc<RwLock<Registered>>,
}

/// One verb with its actor.
type Entry = (Arc<dyn Verb>, Addr<VerbActor>);

#[derive(Default)]
struct Registered {
    /// Every verb, the runtime's own first, then each group's in the order of the group names.
    verbs: Arc<[Entry]>,
    /// The verbs the runtime started with.
    fixed: Vec<Entry>,
    /// Each group's verbs, by the group's name.
    groups: BTreeMap<String, Vec<Entry>>,
    /// Counts the changes since the start.
    generation: u64,
    /// Verbs whose calls wait for a person's approval though they do not declare it (the
    /// configuration names them).
    approval_required: std::collections::BTreeSet<String>,
}

impl std::fmt::Debug for VerbSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbSet").finish_non_exhaustive()
    }
}

/// A group's verb whose name another verb of the set has already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a verb named {name:?} is offered already{}", match .by { Some(group) => format!(" (by {group})"), None => " (built in)".to_owned() })]
pub struct VerbNameTaken {
    pub name: String,
    /// The group that has it, or `None` for a verb the runtime started with.
    pub by: Option<String>,
}

fn started(verbs: Vec<Arc<dyn Verb>>) -> Vec<Entry> {
    verbs
        .into_iter()
        .map(|verb| {
            let actor = VerbActor::new(Arc::clone(&verb)).start();
            (verb, actor)
        })
        .collect()
}

impl VerbSet {
    /// Starts an actor for each verb. Call inside a running actix system.
    pub fn start(verbs: Vec<Arc<dyn Verb>>) -> VerbSet {
        let fixed = started(verbs);
        VerbSet {
            inner: Arc::new(RwLock::new(Registered {
                verbs: fixed.clone().into(),
                fixed,
                groups: BTreeMap::new(),
                generation: 0,
                approval_required: std::collections::BTreeSet::new(),
            })),
        }
    }

    /// Offers `verbs` as the group `group`, in place of what the group offered before (none:
    /// the group is gone), from the next run on. Refused, changing nothing, when a name is
    /// taken by a verb outside the group or twice within it. Call inside a running actix system.
    pub fn set_group(&self, group: &str, verbs: Vec<Arc<dyn Verb>>) -> Result<(), VerbNameTaken> {
        let mut registered = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let mut names: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for (verb, _) in &registered.fixed {
            names.insert(verb.name(), None);
        }
        for (other, entries) in &registered.groups {
            if other != group {
                for (verb, _) in entries {
                    names.insert(verb.name(), Some(other.as_str()));
                }
            }
        }
        let mut own = std::collections::BTreeSet::new();
        for verb in &verbs {
            if let Some(by) = names.get(verb.name()) {
                return Err(VerbNameTaken {
                    name: verb.name().to_owned(),
                    by: by.map(str::to_owned),
                });
            }
            if !own.insert(verb.name()) {
                return Err(VerbNameTaken {
                    name: verb.name().to_owned(),
                    by: Some(group.to_owned()),
                });
            }
        }
        drop(own);
        drop(names);
        if verbs.is_empty() {
            registered.groups.remove(group);
        } else {
            registered.groups.insert(group.to_owned(), started(verbs));
        }
        let all: Vec<Entry> = registered
            .fixed
            .iter()
            .chain(registered.groups.values().flatten())
            .cloned()
            .collect();
        registered.verbs = all.into();
        registered.generation += 1;
        Ok(())
    }

    /// Calls of the verbs named in `names` wait for a person's approval from the next run on,
    /// besides those of verbs that declare it ([`Verb::needs_approval`]).
    pub fn require_approval(&self, names: impl IntoIterator<Item = String>) {
        let mut registered = self.inner.write().unwrap_or_else(|p| p.into_inner());
        registered.approval_required.extend(names);
        registered.generation += 1;
    }

    /// Counts the changes [`VerbSet::set_group`] made: tools chosen at one generation are
    /// chosen again at another.
    pub fn generation(&self) -> u64 {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .generation
    }

    /// Every verb now on offer, each with its actor.
    fn entries(&self) -> Arc<[Entry]> {
        Arc::clone(&self.inner.read().unwrap_or_else(|p| p.into_inner()).verbs)
    }

    pub fn names(&self) -> Vec<String> {
        self.entries()
            .iter()
            .map(|(verb, _)| verb.name().to_owned())
            .collect()
    }

    /// The names of the verbs whose calls have `effect` on the run of their turn.
    pub fn names_with(&self, effect: TurnEffect) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(verb, _)| verb.turn_effect() == effect)
            .map(|(verb, _)| verb.name().to_owned())
            .collect()
    }

    /// Every verb on offer as people see it listed.
    pub fn describe(&self) -> Vec<VerbInfo> {
        self.entries()
            .iter()
            .map(|(verb, _)| VerbInfo {
                name: verb.name().to_owned(),
                description: verb.description().to_owned(),
                parameters: verb.parameters(),
                safe_to_repeat: verb.safe_to_repeat(),
                ends_turn: verb.ends_turn(),
                availability: verb.availability(),
                source: verb.source().map(str::to_owned),
            })
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
        let approval_required = self
            .inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .approval_required
            .clone();
        self.entries()
            .iter()
            .filter(|(verb, _)| match verb.availability() {
                Availability::Everywhere => true,
                Availability::NotInChildren => !in_child,
                Availability::TypedChildrenOnly => typed,
            })
            .map(|(verb, actor)| {
                let tool = VerbTool::new(verb.as_ref(), actor.clone(), binding.clone())
                    .with_crash_points(crash_points.clone());
                if approval_required.contains(verb.name()) {
                    tool.requiring_approval()
                } else {
                    tool
                }
            })
            .fold(seed_durable::ToolSet::new(), |set, tool| {
                set.with(Arc::new(tool))
            })
    }
}

/// The verbs Seed ships: read, plan, status, memory, schedule, unschedule, delegate,
/// return_result, continue_session and preview_continuation.
pub fn shipped() -> Vec<std::sync::Arc<dyn crate::verb::Verb>> {
    shipped_with(schedule::Schedule::default())
}

/// [`shipped`], with `schedule`'s limits as given.
pub fn shipped_with(schedule: schedule::Schedule) -> Vec<std::sync::Arc<dyn crate::verb::Verb>> {
    vec![
        Arc::new(read::Read),
        Arc::new(plan::Plan),
        Arc::new(status::Status),
        Arc::new(memory::Memory),
        Arc::new(schedule),
        Arc::new(schedule::Unschedule),
        Arc::new(delegate::Delegate),
        Arc::new(delegate::ReturnResult),
        Arc::new(continue_session::ContinueSession),
        Arc::new(preview_continuation::PreviewContinuation),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_verbs_declare_what_they_do_to_the_turn() {
        let verbs = shipped();
        let effects: Vec<_> = verbs
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
                ("schedule", TurnEffect::None),
                ("unschedule", TurnEffect::None),
                ("delegate", TurnEffect::Delegates),
                ("return_result", TurnEffect::Returns),
                ("continue_session", TurnEffect::Continues),
                ("preview_continuation", TurnEffect::None),
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
                vec![
                    "read",
                    "plan",
                    "status",
                    "memory",
                    "schedule",
                    "unschedule",
                    "preview_continuation"
                ],
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

    /// A verb whose name is chosen at run time, as an MCP server's tool is.
    struct Named(String);

    impl Verb for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn description(&self) -> &str {
            "a verb of a group"
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn safe_to_repeat(&self) -> bool {
            true
        }
        fn source(&self) -> Option<&str> {
            Some("files")
        }
        fn call(
            &self,
            _: crate::verb::VerbContext,
            _: serde_json::Value,
        ) -> futures::future::BoxFuture<'static, crate::verb::VerbOutput> {
            Box::pin(async { crate::verb::VerbOutput::ok("") })
        }
    }

    fn named(names: &[&str]) -> Vec<Arc<dyn Verb>> {
        names
            .iter()
            .map(|name| Arc::new(Named((*name).to_owned())) as Arc<dyn Verb>)
            .collect()
    }

    #[test]
    fn a_group_of_verbs_comes_and_goes_and_takes_no_name_twice() {
        actix::System::new().block_on(async {
            let verbs = VerbSet::start(vec![Arc::new(read::Read)]);
            let seen_by_a_run = verbs.clone();
            assert_eq!(verbs.generation(), 0);

            verbs
                .set_group("mcp:files", named(&["files__read", "files__write"]))
                .expect("a free name is offered");
            assert_eq!(
                seen_by_a_run.names(),
                ["read", "files__read", "files__write"],
                "clones share the set"
            );
            assert_eq!(verbs.generation(), 1);
            let listed = verbs.describe();
            assert_eq!(listed[0].source, None);
            assert_eq!(listed[1].source.as_deref(), Some("files"));

            // Refusals change nothing.
            let before = (verbs.names(), verbs.generation());
            assert_eq!(
                verbs
                    .set_group("mcp:other", named(&["read"]))
                    .expect_err("a taken name is refused"),
                VerbNameTaken {
                    name: "read".to_owned(),
                    by: None
                }
            );
            assert_eq!(
                verbs
                    .set_group("mcp:other", named(&["files__read"]))
                    .expect_err("a taken name is refused")
                    .to_string(),
                "a verb named \"files__read\" is offered already (by mcp:files)"
            );
            assert!(
                verbs
                    .set_group("mcp:other", named(&["twice", "twice"]))
                    .is_err()
            );
            assert_eq!((verbs.names(), verbs.generation()), before);

            // A group's new list replaces its old one; an empty one removes it.
            verbs
                .set_group("mcp:files", named(&["files__list"]))
                .expect("a free name is offered");
            assert_eq!(verbs.names(), ["read", "files__list"]);
            verbs
                .set_group("mcp:files", Vec::new())
                .expect("a free name is offered");
            assert_eq!(verbs.names(), ["read"]);
            assert_eq!(verbs.generation(), 3);
        });
    }
}
