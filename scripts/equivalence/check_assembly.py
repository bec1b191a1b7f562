"""Compare the current assembly with the recorded corpus: every output byte-identical (see README.md).

ASSEMBLY_CORPUS=DIR python scripts/equivalence/check_assembly.py   (from the checkout under test)
"""

import glob
import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.getcwd())  # the checkout under test first
import proxy_pickle  # noqa: F401  (records hold read-only mappings)

from otel_agent_eval import assemble

CORPUS = os.environ.get("ASSEMBLY_CORPUS", "/tmp/assembly-corpus")


def first_difference(expected: str, got: str) -> int:
    return next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))


corpus = {}
for path in glob.glob(os.path.join(CORPUS, "*.pkl")):
    with open(path, "rb") as f:
        corpus.update(pickle.load(f))
bad = 0
started = time.perf_counter()
for key, (blob, expected) in corpus.items():
    records = pickle.loads(blob)
    try:
        got = [t.model_dump_json() for t in assemble(records.values())]
    except Exception as exc:  # noqa: BLE001
        got = [f"raised {exc!r}"]
    if got == expected:
        continue
    bad += 1
    if bad <= 5:
        print("DIFFERS", key)
        if len(got) != len(expected):
            print("  runs:", len(expected), "->", len(got))
        for a, b in zip(expected, got):
            if a != b:
                i = first_difference(a, b)
                print("  expected ...", a[max(0, i - 200):i + 200])
                print("  got      ...", b[max(0, i - 200):i + 200])
                break
print(f"{len(corpus)} traces, {bad} differ, {time.perf_counter() - started:.1f}s")
sys.exit(1 if bad else 0)
