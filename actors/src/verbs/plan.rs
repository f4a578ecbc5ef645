//! The `plan` verb: replaces the session's checklist (a JSON array of `{"step", "done"}`, the
//! shape the `<plan_state>` block reads); an empty list clears it.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::schema::parse_checked;
use crate::verb::{Verb, VerbContext, VerbOutput};

/// The most steps a plan may have.
pub const PLAN_STEPS_MAX: usize = 50;
/// The longest step, in characters.
pub const PLAN_STEP_CHARS_MAX: usize = 500;

/// What the model reads of the verb, its limits stated from their constants.
static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Sets your checklist for this session: the whole list of steps, each with whether it is \
         done. Every call replaces the previous list, so send all the steps each time, with \
         the ones finished marked done: true; an empty list clears the plan. Use it for work \
         of several steps, to keep track of what is left; you are shown the current checklist \
         every turn in <plan_state>. At most {PLAN_STEPS_MAX} steps of at most \
         {PLAN_STEP_CHARS_MAX} characters each. Returns the checklist as it now stands, one \
         `[x] step` (done) or `[ ] step` line per step, or \"plan cleared\"."
    )
});

/// Replaces the session's checklist. Safe to repeat: the same call sets the same plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanArgs {
    steps: Vec<PlanStep>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PlanStep {
    step: String,
    done: bool,
}

impl Verb for Plan {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn description(&self) -> &'static str {
        &DESCRIPTION
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "maxItems": PLAN_STEPS_MAX,
                    "description": "The whole checklist, in order; [] clears it",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": PLAN_STEP_CHARS_MAX,
                                "description": "What the step is, in one line"
                            },
                            "done": {
                                "type": "boolean",
                                "description": "Whether the step is finished"
                            }
                        },
                        "required": ["step", "done"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["steps"],
            "additionalProperties": false
        })
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<PlanArgs>(self.name(), &self.parameters(), arguments);
        Box::pin(async move {
            match parsed {
                Ok(args) => set_plan(context, args.steps).await,
                Err(error) => error,
            }
        })
    }
}

async fn set_plan(context: VerbContext, steps: Vec<PlanStep>) -> VerbOutput {
    let plan = if steps.is_empty() {
        None
    } else {
        match serde_json::to_value(&steps) {
            Ok(plan) => Some(plan),
            Err(error) => return VerbOutput::error(format!("plan failed: {error}")),
        }
    };
    match context
        .store
        .set_session_plan(context.session_id, plan, context.now_ms)
        .await
    {
        Ok(true) => {}
        Ok(false) => return VerbOutput::error("session not found"),
        Err(error) => return VerbOutput::error(format!("plan failed: {error}")),
    }
    if steps.is_empty() {
        return VerbOutput::ok("plan cleared");
    }
    let lines: Vec<String> = steps
        .iter()
        .map(|step| {
            let mark = if step.done { 'x' } else { ' ' };
            format!("[{mark}] {}", step.step)
        })
        .collect();
    VerbOutput::ok(lines.join("\n"))
}
