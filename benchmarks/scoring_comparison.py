#!/usr/bin/env python
"""Side by side, on the same inputs: our tool_call_accuracy, multivon-eval's ToolCallAccuracy
and the Langfuse agent-evaluation guide's trajectory check. Prints the table of docs/scoring.md.

multivon-eval runs in an environment of its own (it pins its own dependencies):

    python3 -m venv /tmp/multivon && /tmp/multivon/bin/pip install 'multivon-eval==0.20.*'
    python benchmarks/scoring_comparison.py --multivon-python /tmp/multivon/bin/python

Without ``--multivon-python`` (or when it cannot run), that column says ``not run``.

- Ours: ``ToolCallAccuracy`` with its default threshold (1.0), on an ``AgentTrace`` with one
  step per call and a final answer (no step at all for the "no LLM turn" row). Each row's
  expected result is written here and checked by ``tests/evaluators/test_scoring_comparison.py``.
- multivon-eval 0.20: ``ToolCallAccuracy(require_order=..., penalize_unexpected=...)`` with
  its default threshold (0.7), on an ``EvalCase`` whose ``agent_trace`` has the same steps
  (``[]`` for the "no LLM turn" row: an observed empty trace) and ``expected_tool_calls``
  the expected names (``None``: no expectation).
- Langfuse guide ("Agent Evaluation Guide", Pydantic AI cookbook): its trajectory judge is
  told to score 1 when the expected and the called lists "contain exactly the same items.
  The order does not matter", else 0; read here as equal sets of names. It has no order,
  strict or "no expectation" modes, so it is the same check on every row.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from otel_agent_eval import AgentStep, AgentTrace, ToolCall, ToolCallAccuracy


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    expected: list[str] | None
    calls: list[str]
    require_order: bool = False
    penalize_unexpected: bool = False
    turns: bool = True
    """False: no LLM turn recorded at all (our ``no_steps``; multivon's observed empty trace)."""
    ours: tuple[str, float | None] = ("pass", 1.0)
    """Our (label, score): checked by the tests."""
    why: str = ""
    """Why we differ from a seed, when we do."""


CASES: tuple[Case, ...] = (
    Case("none", "no expectation (None)", None, ["a"], ours=("skipped", None)),
    Case("empty-ok", "expected [] (no tool), none called", [], []),
    Case("empty-called", "expected [], one called", [], ["a"], ours=("fail", 0.0)),
    Case("all", "both expected, called", ["lookup", "refund"], ["lookup", "refund"]),
    Case("half", "one of two expected called (Langfuse's own example)", ["search_web", "visit_website"], ["search_web"],
         ours=("fail", 0.5), why="labels agree; partial credit stays in the score (0/1 in the guide's check)"),
    Case("three-of-four", "three of four expected called", ["a", "b", "c", "d"], ["a", "b", "c"], ours=("fail", 0.75),
         why="multivon passes any share above its 0.7 threshold; ours passes only a met expectation"),
    Case("reordered", "require_order, called in reverse", ["lookup", "refund"], ["refund", "lookup"], require_order=True,
         ours=("fail", 0.5), why="the guide's check ignores order; under require_order the order is the expectation"),
    Case("order-missing", "require_order, only the second called", ["lookup", "refund"], ["refund"], require_order=True,
         ours=("fail", 0.5), why="labels agree; multivon matches greedily from the first expected call, so a missing "
         "first call zeroes its score; ours is the longest common subsequence (credit for what was done in order)"),
    Case("order-extra", "require_order, an extra call in between", ["a", "b"], ["a", "x", "b"], require_order=True,
         why="the guide's check always fails extra calls; ours and multivon's only under penalize_unexpected"),
    Case("any-order", "three expected, any order", ["draw", "visit", "speak"], ["visit", "speak", "draw"]),
    Case("extra", "an extra call, not strict", ["get_news"], ["get_news", "watch_tv"],
         why="the guide's check always fails extra calls; ours and multivon's only under penalize_unexpected"),
    Case("extra-strict", "an extra call, strict", ["get_news"], ["get_news", "watch_tv"], penalize_unexpected=True,
         ours=("fail", 0.5), why="labels agree; partial credit stays in the score"),
    Case("order-extra-strict", "require_order + strict, an extra call in between", ["a", "b"], ["a", "x", "b"],
         require_order=True, penalize_unexpected=True, ours=("fail", 2 / 3), why="labels agree; partial credit stays in the score"),
    Case("repeat-strict", "strict, the expected tool called twice (a retry)", ["book"], ["book", "book"],
         penalize_unexpected=True, ours=("fail", 0.5),
         why="we count calls, not names: under strict mode a second call is an unexpected one"),
    Case("duplicate-expected", "the same tool expected twice, called once", ["search", "search"], ["search"],
         ours=("fail", 0.5), why="expected calls are a multiset: two searches expected means two"),
    Case("no-call", "LLM turns, none of the expected calls", ["a"], [], ours=("fail", 0.0)),
    Case("no-turn", "no LLM turn recorded at all", ["a"], [], turns=False, ours=("skipped", None),
         why="nothing observable (instrumentation gap, content off) is not an agent failure: skipped, reason no_steps"),
)


def agent_trace(case: Case) -> AgentTrace:
    steps = [AgentStep(index=i, tool_calls=[ToolCall(name=name)]) for i, name in enumerate(case.calls)]
    if case.turns:
        steps.append(AgentStep(index=len(steps), output="done"))
    return AgentTrace(trace_id="0" * 31 + "1", agent_span_id="0" * 15 + "2", agent_name="agent", input="task", steps=steps)


def ours(case: Case) -> tuple[str, float | None]:
    """Our label and score on this case (the default threshold)."""
    evaluator = ToolCallAccuracy(case.expected, require_order=case.require_order, penalize_unexpected=case.penalize_unexpected)
    (result,) = evaluator.evaluate(agent_trace(case))
    return result.label, result.score


def as_documented(case: Case) -> bool:
    """Our result equals the one written in ``case.ours``."""
    label, score = ours(case)
    want_label, want_score = case.ours
    if label != want_label or (score is None) != (want_score is None):
        return False
    return score is None or abs(score - want_score) < 1e-9  # type: ignore[operator]


def langfuse(case: Case) -> tuple[str, float | None]:
    """The guide's trajectory check: the same set of tool names, order ignored."""
    if case.expected is None:
        return "n/a", None
    same = set(case.expected) == set(case.calls)
    return ("pass" if same else "fail"), (1.0 if same else 0.0)


MULTIVON_PROGRAM = """
import json, sys
from multivon_eval.case import AgentStep, EvalCase, ToolCall
from multivon_eval.evaluators.agent import ToolCallAccuracy
out = []
for c in json.load(sys.stdin):
    steps = [AgentStep(tool_calls=[ToolCall(name=n)]) for n in c["calls"]]
    if c["turns"]:
        steps.append(AgentStep(output="done"))
    case = EvalCase(input="task", agent_trace=steps, expected_tool_calls=c["expected"])
    r = ToolCallAccuracy(require_order=c["require_order"], penalize_unexpected=c["penalize_unexpected"]).evaluate(case, "done")
    skipped = bool(r.metadata.get("skipped"))
    out.append(["skipped" if skipped else ("pass" if r.passed else "fail"), None if skipped else r.score])
import multivon_eval
print(json.dumps({"version": getattr(multivon_eval, "__version__", "?"), "results": out}))
"""


def multivon(python: str | None) -> tuple[str, list[tuple[str, float | None]]]:
    """multivon-eval's (label, score) per case, run by its own interpreter."""
    if not python:
        return "not run", [("not run", None)] * len(CASES)
    payload = [
        {"expected": c.expected, "calls": c.calls, "require_order": c.require_order,
         "penalize_unexpected": c.penalize_unexpected, "turns": c.turns}
        for c in CASES
    ]
    run = subprocess.run([python, "-c", MULTIVON_PROGRAM], input=json.dumps(payload), capture_output=True, text=True,
                         timeout=120, check=False)
    if run.returncode != 0:
        print(f"multivon-eval did not run: {run.stderr.strip()[-500:]}", file=sys.stderr)
        return "not run", [("not run", None)] * len(CASES)
    data = json.loads(run.stdout)
    return data["version"], [tuple(r) for r in data["results"]]  # type: ignore[misc]


def cell(label: str, score: float | None) -> str:
    return label if score is None else f"{label} {score:.2f}"


def table(multivon_python: str | None) -> str:
    version, theirs = multivon(multivon_python)
    rows = [
        (f"| Case | Expected | Called | Mode | This project (threshold 1.0) | multivon-eval {version} (threshold 0.7) "
         "| Langfuse guide | Why we differ |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case, other in zip(CASES, theirs):
        mode = ", ".join(m for m, on in (("order", case.require_order), ("strict", case.penalize_unexpected)) if on) or "-"
        called = ", ".join(case.calls) if case.calls else ("(no LLM turn)" if not case.turns else "(none)")
        expected = "None" if case.expected is None else (", ".join(case.expected) or "[]")
        rows.append(
            f"| {case.what} | {expected} | {called} | {mode} | {cell(*ours(case))} | {cell(*other)} "
            f"| {cell(*langfuse(case))} | {case.why} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multivon-python", default=None, help="interpreter of a virtualenv with multivon-eval 0.20")
    args = parser.parse_args(argv)
    mismatches = [c.id for c in CASES if not as_documented(c)]
    print(table(args.multivon_python))
    if mismatches:
        print(f"\nour results differ from the documented ones: {', '.join(mismatches)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
