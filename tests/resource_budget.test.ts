/** The run-wide resource budget (`--resources`) against tasks' per-worker `requires`. */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InputError } from "../lib/errors.ts";
import { parseResources, ResourceBudget } from "../lib/schedule/resource_budget.ts";

describe("ResourceBudget", () => {
  it("limits only the resources the budget names: --resources gpu=1 leaves cpu unlimited", () => {
    const budget = new ResourceBudget(parseResources("gpu=1"));
    assert.equal(budget.limitOf("cpu"), null);
    assert.equal(budget.limitOf("gpu"), 1);
    budget.checkFits("extract", { cpu: 4 });
    for (let i = 0; i < 50; i++) {
      assert.ok(budget.canAdmit({ cpu: 4 }), `worker ${i}`);
      budget.acquire({ cpu: 4 });
    }
    assert.equal(budget.inUse("cpu"), 200);
    // gpu stays limited, also for a task that requires both.
    assert.ok(budget.canAdmit({ cpu: 1, gpu: 1 }));
    budget.acquire({ cpu: 1, gpu: 1 });
    assert.ok(!budget.canAdmit({ cpu: 1, gpu: 1 }));
    assert.ok(budget.canAdmit({ cpu: 1 }));
    budget.release({ cpu: 1, gpu: 1 });
    assert.ok(budget.canAdmit({ cpu: 1, gpu: 1 }));
  });

  it("a named resource at 0 admits no worker that needs it", () => {
    const budget = new ResourceBudget({ gpu: 0 });
    assert.ok(!budget.canAdmit({ gpu: 1 }));
    assert.ok(budget.canAdmit({ gpu: 0, cpu: 3 }));
    assert.throws(() => budget.checkFits("train", { gpu: 1 }), /gpu=1.*gpu=0/);
  });

  it("refuses a task that needs more than the budget, naming both and the fix", () => {
    const budget = new ResourceBudget({ cpu: 8, gpu: 1 });
    assert.throws(
      () => budget.checkFits("train", { cpu: 2, gpu: 2 }),
      (error: unknown) => {
        assert.ok(error instanceof InputError);
        assert.equal(
          error.message,
          'Task "train" requires gpu=2 per worker but the resource budget has gpu=1; raise it with --resources gpu=2 or lower the task\'s requires.gpu',
        );
        return true;
      },
    );
  });

  it("without a budget nothing is limited", () => {
    const budget = new ResourceBudget(null);
    budget.checkFits("any", { gpu: 100 });
    assert.ok(budget.canAdmit({ gpu: 100 }));
  });
});

describe("parseResources", () => {
  it("reads name=count pairs", () => {
    assert.deepEqual(parseResources("cpu=8, gpu=1,"), { cpu: 8, gpu: 1 });
    assert.deepEqual(parseResources("constructor=2"), { constructor: 2 });
  });

  it("refuses malformed and repeated entries", () => {
    assert.throws(() => parseResources("cpu=lots"), /Invalid resource "cpu=lots"/);
    assert.throws(() => parseResources("cpu=1,cpu=2"), /"cpu" is given twice/);
  });
});
