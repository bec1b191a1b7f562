#!/usr/bin/env python
"""OTLP decoding cost against the floor: the standard library's ``json.loads`` of the same bytes.

The workload is ``benchmarks/offline.py``'s export: N runs of the scripted agent (GenAI semconv
spans with message content, through the real SDK and its OTLP encoder), one
``ExportTraceServiceRequest`` per run, as OTLP/JSON lines and as protobuf. Measured side by
side, alternating, in one process, best of ``--rounds``:

- ``json.loads`` of every line (the floor the target is stated against);
- ``otel_agent_eval.formats.otlp.decode_traces_json`` of every line (the direct OTLP/JSON reader:
  parse + records), and the target, at most 2x the floor;
- the previous path for comparison: hex ids rewritten to base64, then protobuf's
  ``json_format.ParseDict`` and the protobuf mapping;
- ``decode_traces_protobuf`` of the same requests as protobuf (the C decoder when it is built), and the
  same through the upb runtime alone (what it falls back to, and what an install without a compiler runs).

``--shape serve``: instead, ``serve``'s request bodies as ``benchmarks/serve_ingest.py`` makes
them (``--batches`` bodies of ~512 spans of whole demo-scenario runs under an HTTP root span,
one resource per body). The cyclic garbage collector runs at its default thresholds, as in
``serve``, and each round starts from a full collection: ``--gc off`` disables it for
the timed loops, to tell its share of a swing from the decoder's.

    python benchmarks/otlp_decode.py --traces 2000 --rounds 5
    python benchmarks/otlp_decode.py --shape serve --batches 40 --rounds 9
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.offline import generate

_IDS = {"traceId", "spanId", "parentSpanId"}


def _hex_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in _IDS and isinstance(v, str) else _hex_to_base64(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_to_base64(v) for v in node]
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=("file", "serve"), default="file",
                        help="file: one request per run, as offline.py exports; serve: serve_ingest.py's 512-span bodies")
    parser.add_argument("--batches", type=int, default=40, help="--shape serve: bodies of ~512 spans")
    parser.add_argument("--gc", choices=("on", "off"), default="on", help="the cyclic collector during the timed loops")
    args = parser.parse_args(argv)

    from google.protobuf import json_format
    from google.protobuf.internal import api_implementation
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from otel_agent_eval.formats import otlp, otlp_json
    from otel_agent_eval.formats.otlp import (
        _parse_protobuf,
        decode_traces_json,
        decode_traces_protobuf,
        spans_from_request,
    )

    if args.shape == "serve":
        from benchmarks.serve_ingest import build_batches
        from benchmarks.serve_ingest import otlp_json as serve_body

        lines = [serve_body(batch) for batch in build_batches(args.batches)[0]]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "runs.jsonl"
            generate(path, args.traces)
            lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    protobufs = []
    for line in lines:
        req = ExportTraceServiceRequest()
        json_format.ParseDict(_hex_to_base64(json.loads(line)), req)
        protobufs.append(req.SerializeToString())
    spans = sum(len(decode_traces_json(line)) for line in lines)

    def upb_only(body: bytes) -> Any:
        return spans_from_request(_parse_protobuf(body, "traces", "ExportTraceServiceRequest"))

    def old_json(line: bytes) -> Any:
        req = ExportTraceServiceRequest()
        json_format.ParseDict(_hex_to_base64(json.loads(line)), req, ignore_unknown_fields=True)
        return spans_from_request(req)

    cases: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
        "json.loads (floor)": (json.loads, lines),
        "decode_traces_json": (decode_traces_json, lines),
        "decode_traces_protobuf": (decode_traces_protobuf, protobufs),
        "decode_traces_protobuf, upb only": (upb_only, protobufs),
        "previous JSON path (json_format)": (old_json, lines),
    }
    best = {name: float("inf") for name in cases}
    ratios = []
    for r in range(args.rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        this: dict[str, float] = {}
        for name in order:
            fn, inputs = cases[name]
            if name.startswith("previous") and r >= 2:
                continue  # 30x slower: two rounds say enough
            gc.collect()
            if args.gc == "off":
                gc.disable()
            started = time.process_time()
            for item in inputs:
                fn(item)
            this[name] = time.process_time() - started
            gc.enable()
            best[name] = min(best[name], this[name])
        ratios.append(this["decode_traces_json"] / this["json.loads (floor)"])
    floor = best["json.loads (floor)"]
    print(f"python {sys.version.split()[0]}, protobuf runtime {api_implementation.Type()}, C decoder "
          f"{'built' if otlp._NATIVE is not None else 'not built or off'}, JSON parser "
          f"{otlp_json._loads.__module__}; shape {args.shape}: {len(lines)} requests, {spans} spans, "
          f"{sum(map(len, lines)) / 1e6:.1f} MB of JSON; gc {args.gc}; CPU time, best of {args.rounds}")
    for name, seconds in best.items():
        print(f"  {name:<34} {seconds * 1e3:8.1f} ms  {spans / seconds:>10,.0f} spans/s  {seconds / floor:5.2f}x json.loads")
    ratio = best["decode_traces_json"] / floor
    print(f"decode_traces_json / json.loads per round (same round, side by side): "
          f"{', '.join(f'{x:.2f}' for x in ratios)}; median {sorted(ratios)[len(ratios) // 2]:.2f}")
    print(f"target: decode_traces_json <= 2x json.loads: {ratio:.2f}x -> {'met' if ratio <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
