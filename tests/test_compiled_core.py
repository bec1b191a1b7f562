"""The optional compiled core (mypyc, ``setup.py``) gives the pure core's outputs, byte for byte.

The suite runs the pure build. ``OTEL_AGENT_EVAL_COMPILED_TREE`` names a source tree in which the
compiled build was made (``OTEL_AGENT_EVAL_COMPILE=1 python setup.py build_ext --inplace``): the
benchmark's five workload shapes are then assembled and evaluated by both builds, each in a
subprocess, and their outputs compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agent_eval.compiled import compiled_modules

ROOT = Path(__file__).resolve().parents[1]
COMPILED_TREE = os.environ.get("OTEL_AGENT_EVAL_COMPILED_TREE")

OUTPUTS = f"""
import json, sys
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import pipeline as b
from otel_agent_eval.compiled import compiled_modules
evaluators = b.deterministic_evaluators()
out = {{"compiled": compiled_modules(), "runs": []}}
for shape in b.SHAPES:
    for definitions in (False, True):
        for records in b.dataset(12, 15, shape, tool_definitions=definitions):
            for trace in b.flatten(b.assemble(records)):
                results = b.evaluate_run(evaluators, trace)
                out["runs"].append([trace.model_dump_json(), *(r.model_dump_json() for r in results)])
print(json.dumps(out))
"""


def _outputs(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", OUTPUTS], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_pure_build_reports_no_compiled_module() -> None:
    if COMPILED_TREE is None:  # the suite's own build
        assert compiled_modules() == []


@pytest.mark.skipif(COMPILED_TREE is None, reason="no compiled build (OTEL_AGENT_EVAL_COMPILED_TREE)")
def test_compiled_and_pure_builds_give_identical_outputs() -> None:
    compiled = _outputs(Path(COMPILED_TREE))
    pure = _outputs(ROOT)
    assert compiled["compiled"] and not pure["compiled"]
    assert len(pure["runs"]) > 100
    assert compiled["runs"] == pure["runs"]
