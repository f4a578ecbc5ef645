//! The shipped verbs as a set: names, repeat safety, availability, and schemas that agree with
//! what the verbs accept.

use seed_actors::Availability;
use seed_actors::verbs::shipped;

#[test]
fn the_shipped_verbs_declare_themselves() {
    let verbs = shipped();
    let declared: Vec<(&str, bool, Availability)> = verbs
        .iter()
        .map(|verb| (verb.name(), verb.safe_to_repeat(), verb.availability()))
        .collect();
    assert_eq!(
        declared,
        [
            ("read", true, Availability::Everywhere),
            ("plan", true, Availability::Everywhere),
            ("status", true, Availability::Everywhere),
            ("memory", false, Availability::Everywhere),
            ("schedule", false, Availability::NotInChildren),
            ("unschedule", false, Availability::NotInChildren),
            ("delegate", false, Availability::NotInChildren),
            ("return_result", false, Availability::TypedChildrenOnly),
            ("continue_session", false, Availability::NotInChildren),
            ("preview_continuation", true, Availability::NotInChildren),
        ]
    );
    let ending: Vec<&str> = verbs
        .iter()
        .filter(|verb| verb.ends_turn())
        .map(|verb| verb.name())
        .collect();
    assert_eq!(ending, ["delegate", "return_result", "continue_session"]);
    for verb in verbs.iter().filter(|verb| !verb.ends_turn()) {
        assert!(verb.description().len() > 200, "{}", verb.name());
        let schema = verb.parameters();
        assert_eq!(schema["type"], "object", "{}", verb.name());
        assert_eq!(schema["additionalProperties"], false, "{}", verb.name());
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for required in schema["required"].as_array().cloned().unwrap_or_default() {
            let name = required.as_str().unwrap_or_default();
            assert!(properties.contains_key(name), "{}: {name}", verb.name());
        }
    }
}
