"""Every built-in deterministic evaluator over every run of the assembly corpus, compared with a baseline.

ASSEMBLY_CORPUS=DIR python scripts/equivalence/check_evaluators.py --write   # once, on the starting commit
ASSEMBLY_CORPUS=DIR python scripts/equivalence/check_evaluators.py           # after a change: 0 differ
"""

import glob
import os
import pickle
import sys
import time

sys.path.insert(0, os.getcwd())  # the checkout under test first

from otel_agent_eval.config import Settings
from otel_agent_eval.evaluators import BUILTIN_EVALUATORS, ToolExpectation, build_evaluators
from otel_agent_eval.evaluators.base import evaluate_run
from otel_agent_eval.model import AgentTrace

CORPUS = os.environ.get("ASSEMBLY_CORPUS", "/tmp/assembly-corpus")
BASELINE = os.path.join(CORPUS, "evaluators-baseline.pickle")
runs = []
for path in sorted(glob.glob(os.path.join(CORPUS, "*.pkl"))):
    with open(path, "rb") as f:
        for key, (_, outputs) in sorted(pickle.load(f).items()):
            runs.extend((key, i, AgentTrace.model_validate_json(o)) for i, o in enumerate(outputs))


def flat(trace):
    yield trace
    for child in trace.children:
        yield from flat(child)


settings = Settings(evaluators=list(BUILTIN_EVALUATORS))
configs = {
    "no expectations": build_evaluators(settings),
    "expectations": build_evaluators(settings, [
        ToolExpectation(agent="*", expected_tools=["lookup_order", "check_stock", "get_weather"], require_order=True)]),
}
got = {}
started = time.perf_counter()
for name, evaluators in configs.items():
    for key, i, trace in runs:
        for j, run in enumerate(flat(trace)):
            got[(name, key, i, j)] = [r.model_dump_json() for r in evaluate_run(evaluators, run)]
print(f"{len(got)} run evaluations in {time.perf_counter() - started:.1f}s")
if "--write" in sys.argv:
    with open(BASELINE, "wb") as f:
        pickle.dump(got, f)
    sys.exit(0)
with open(BASELINE, "rb") as f:
    expected = pickle.load(f)
bad = [k for k in expected if expected[k] != got.get(k)]
for k in bad[:5]:
    print("DIFFERS", k, "\n  expected", expected[k], "\n  got     ", got.get(k))
print(f"{len(expected)} compared, {len(bad)} differ")
sys.exit(1 if bad else 0)
