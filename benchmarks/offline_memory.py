#!/usr/bin/env python
"""Peak memory of ``otel-agent-eval evaluate``'s reading against file size (issue 17, item 2).

Input: the scripted-agent export of ``benchmarks/offline.py`` (``--base``, generated when
missing), made k times larger (k in ``--scales``) with fresh trace ids, and **interleaved**:
each OTLP/JSON line holds the second half of one run's spans and the first half of the
next run's, so no line holds a whole trace and every trace must be put together across
lines. Each measurement is a fresh subprocess that reports its own peak RSS
(``ru_maxrss``):

* ``read+assemble``: ``cli.evaluate.read_traces`` (streamed reading, grouping by trace id, spill
  beyond the bound) and ``assemble`` of each trace, runs discarded: the reading path alone;
* ``evaluate``: the whole command, ``evaluate FILE --evaluators tool_call_accuracy
  --format text > /dev/null``, whose report keeps every assembled run.

Both with the default bound (50,000 records) and with ``--max-buffered-records`` 5,000.

    python benchmarks/offline_memory.py                       # scales 1 2 4 of 5,000 runs
    python benchmarks/offline_memory.py --scales 1 4 --base /tmp/off-export.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

READ_SCRIPT = r'''
import resource, sys
from otel_agent_eval.assembly import assemble
from otel_agent_eval.cli.evaluate import TraceGroups, read_traces
groups = TraceGroups(int(sys.argv[2]))
traces = runs = 0
for records in read_traces([sys.argv[1]], groups):
    traces += 1
    runs += len(assemble(records))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, traces, runs, groups.stats.spilled_records)
'''

EVALUATE_SCRIPT = r'''
import os, resource, sys
from otel_agent_eval import cli
sys.stdout = open(os.devnull, "w")
code = cli.main(["evaluate", sys.argv[1], "--evaluators", "tool_call_accuracy", "--max-buffered-records", sys.argv[2]])
sys.stdout = sys.__stdout__
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code)
'''


def interleave(base: Path, out: Path, scale: int) -> int:
    """``scale`` copies of ``base`` with fresh trace ids, each run's spans split over two lines."""
    runs = 0
    pending: list[dict] = []
    with out.open("w") as f:
        for copy in range(scale):
            with base.open() as lines:
                for line in lines:
                    doc = json.loads(line)
                    spans = [s for r in doc["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
                    for span in spans:  # a fresh trace id per copy: the top 4 hex digits
                        span["traceId"] = f"{copy:04x}" + span["traceId"][4:]
                    half = len(spans) // 2
                    scope = doc["resourceSpans"][0]
                    scope["scopeSpans"] = [{"scope": scope["scopeSpans"][0].get("scope", {}), "spans": spans[:half] + pending}]
                    doc["resourceSpans"] = [scope]
                    f.write(json.dumps(doc, separators=(",", ":")) + "\n")
                    pending = spans[half:]
                    runs += 1
        if pending:
            f.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": pending}]}]}, separators=(",", ":")) + "\n")
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="/tmp/off-export.jsonl", help="export of benchmarks/offline.py (generated when missing)")
    parser.add_argument("--traces", type=int, default=5_000, help="runs in the base export when it is generated")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--bounds", type=int, nargs="+", default=[50_000, 5_000])
    args = parser.parse_args(argv)
    base = Path(args.base)
    if not base.exists():
        sys.path.insert(0, str(Path(__file__).parent))
        from offline import generate

        generate(base, args.traces)
    workdir = Path(tempfile.mkdtemp(prefix="offline-memory-"))
    print(f"{'file':>10} {'runs':>7} {'bound':>8} {'read+assemble RSS':>18} {'spilled':>8} {'evaluate RSS':>13}")
    for scale in args.scales:
        path = workdir / f"x{scale}.jsonl"
        runs = interleave(base, path, scale)
        size = path.stat().st_size / 2**20
        for bound in args.bounds:
            read = subprocess.run([sys.executable, "-c", READ_SCRIPT, str(path), str(bound)],
                                  capture_output=True, text=True, check=False)
            if read.returncode:
                raise SystemExit(read.stderr[-2000:])
            rss, traces, assembled, spilled = map(int, read.stdout.split())
            assert traces == assembled == runs, (traces, assembled, runs)  # every run whole: one run per trace
            full = subprocess.run([sys.executable, "-c", EVALUATE_SCRIPT, str(path), str(bound)],
                                  capture_output=True, text=True, check=False)
            if full.returncode:
                raise SystemExit(full.stderr[-2000:])
            full_rss = int(full.stdout.split()[0])
            print(f"{size:>7.0f} MiB {runs:>7,} {bound:>8,} {rss / 1024:>14.0f} MiB {spilled:>8,} {full_rss / 1024:>9.0f} MiB")
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
