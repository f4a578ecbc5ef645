// Unit tests of the approval card's pure parts (approvals.js): the edited arguments read from
// the editor, the decision's request body, and which updates read the pending approvals again;
// and of a server's question (elicitation.js): the form's fields and the content it sends.
// Run by `node --test` with the other suites.

import assert from "node:assert/strict";
import { test } from "node:test";

import { changesApprovals, decisionBody, editedArguments } from "../../ui/approvals.js";
import { questionContent, questionFields } from "../../ui/elicitation.js";

test("edited arguments must be a JSON object", () => {
  assert.deepEqual(editedArguments('{"path": "/tmp/x"}'), { arguments: { path: "/tmp/x" } });
  assert.match(editedArguments("{nope").error, /^not JSON: /);
  for (const text of ["[1]", "null", "7", '"text"']) {
    assert.equal(editedArguments(text).error, "the arguments must be a JSON object", text);
  }
});

test("a decision's body: approve, approve edited, deny with or without a reason", () => {
  assert.deepEqual(decisionBody("approve"), { decision: "approve" });
  assert.deepEqual(decisionBody("approve", { args: { a: 1 } }), { decision: "approve", arguments: { a: 1 } });
  assert.deepEqual(decisionBody("deny", { reason: "  not that file " }), { decision: "deny", reason: "not that file" });
  assert.deepEqual(decisionBody("deny", { reason: "   " }), { decision: "deny" });
});

test("the pending approvals are read again when one comes, is decided or a run ends", () => {
  assert.ok(changesApprovals({ type: "approval-pending" }));
  assert.ok(changesApprovals({ type: "run-finished" }));
  assert.ok(changesApprovals({ type: "session-change", reason: "approval" }));
  assert.ok(!changesApprovals({ type: "session-change", reason: "events" }));
  assert.ok(!changesApprovals({ type: "text-delta" }));
});

test("a server's question: its schema's fields become the form's", () => {
  const fields = questionFields({
    type: "object",
    properties: {
      name: { type: "string", title: "Name" },
      check: { type: "boolean" },
      integer: { type: "integer", default: 42 },
      friend: { type: "string", enum: ["Monica", "Joey"] },
      pet: { type: "string", enum: ["pet-1"], enumNames: ["Cats"] },
      hero: { type: "string", oneOf: [{ const: "hero-1", title: "Superman" }] },
      fish: { type: "array", items: { anyOf: [{ const: "fish-1", title: "Tuna" }] } },
      nested: { type: "object" },
    },
    required: ["name"],
  });
  assert.deepEqual(
    fields.map((field) => [field.name, field.kind, field.required]),
    [
      ["name", "string", true],
      ["check", "boolean", false],
      ["integer", "integer", false],
      ["friend", "enum", false],
      ["pet", "enum", false],
      ["hero", "enum", false],
      ["fish", "multi", false],
    ],
  );
  assert.equal(fields[0].label, "Name");
  assert.deepEqual(fields[4].options, [{ value: "pet-1", label: "Cats" }]);
  assert.deepEqual(fields[5].options, [{ value: "hero-1", label: "Superman" }]);
});

test("a server's question: the form's values as the answer's content", () => {
  const fields = questionFields({
    properties: {
      name: { type: "string" },
      check: { type: "boolean" },
      integer: { type: "integer" },
      number: { type: "number" },
      friend: { type: "string", enum: ["Monica", "Joey"] },
      fish: { type: "array", items: { enum: ["fish-1", "fish-2"] } },
    },
    required: ["name"],
  });
  assert.deepEqual(questionContent(fields, { name: "Ada", check: true, integer: "7", number: "", friend: "Joey", fish: ["fish-2"] }), {
    content: { name: "Ada", check: true, integer: 7, friend: "Joey", fish: ["fish-2"] },
  });
  assert.equal(questionContent(fields, { name: "", check: false }).error, "name: required");
  assert.equal(questionContent(fields, { name: "A", integer: "1.5" }).error, "integer: not a whole number");
  assert.equal(questionContent(fields, { name: "A", number: "x" }).error, "number: not a number");
  assert.equal(questionContent(fields, { name: "A", friend: "Ross" }).error, "friend: not one of the choices");
});
