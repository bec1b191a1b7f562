"""A shortcut taken for throughput (round 3) gives the results of the general code it skips:
``LoopDetection`` counts calls whose arguments are dicts of scalars by a (key, type, value)
identity instead of canonical JSON: the same counts and texts.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

from otel_agent_eval.assembly.dialects.base import canonical_json
from otel_agent_eval.evaluators.trajectory import LoopDetection
from otel_agent_eval.model import AgentStep, AgentTrace, ToolCall


def reference_loops(trace: AgentTrace, threshold_calls: int) -> dict[str, int]:
    """Round 2's counting: canonical JSON of every call."""
    counts = Counter((call.name, canonical_json(call.arguments)) for call in trace.tool_calls)
    return {f"{name}({args})": n for (name, args), n in counts.items() if n >= threshold_calls}


def test_loop_detection_counts_like_canonical_json() -> None:
    values: list[Any] = [
        {"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": None}, {"a": 0}, {"a": False}, {"b": 1, "a": 2},
        {"a": 2, "b": 1}, '{"a": 1}', '{"a":2,"b":1}', "not json", {"a": [1]}, {"a": {"b": 1}}, None, [1], {1: "x"},
        {"1": "x"}, {"a": float("nan")}, {"a": -0.0}, {"a": 0.0}, 1, "1", True,
    ]
    rng = random.Random(3)
    evaluators = [LoopDetection(threshold_calls=2), LoopDetection(threshold_calls=3)]
    cases = [list(pair) * 2 for pair in itertools.combinations_with_replacement(values, 2)]
    cases += [[rng.choice(values) for _ in range(rng.randint(0, 9))] for _ in range(400)]
    for arguments in cases:
        calls = [ToolCall(name=rng.choice("xy") if len(arguments) > 6 else "x", arguments=a) for a in arguments]
        trace = AgentTrace(trace_id="t", steps=[AgentStep(index=0, tool_calls=calls)])
        for evaluator in evaluators:
            (result,) = evaluator.evaluate(trace)
            expected = reference_loops(trace, evaluator.threshold_calls)
            assert result.details.get("repeated_calls", {}) == expected, arguments
            assert list(result.details.get("repeated_calls", {})) == list(expected), arguments
            assert result.label == ("fail" if expected else "pass")
