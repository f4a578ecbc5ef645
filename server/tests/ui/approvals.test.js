// Unit tests of the approval card's pure parts (approvals.js): the edited arguments read from
// the editor, the decision's request body, and which updates read the pending approvals again.
// Run by `node --test` with the other suites.

import assert from "node:assert/strict";
import { test } from "node:test";

import { changesApprovals, decisionBody, editedArguments } from "../../ui/approvals.js";

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
