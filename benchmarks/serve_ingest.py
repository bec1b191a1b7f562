#!/usr/bin/env python
"""``otel-agent-eval serve`` ingest benchmark: spans/s over OTLP/HTTP and OTLP/gRPC, memory per buffered trace.

The server runs as a subprocess pinned to one core (``os.sched_setaffinity``, when the
platform has it); the client runs here, pinned to another core when there is one, and
sends pre-encoded ``ExportTraceServiceRequest``s (512 spans each, built once by the real
SDK running the scripted agents, so the client costs little) from 4 concurrent senders.

- *ingest*: spans accepted per second (HTTP 200 / gRPC OK, partial success subtracted),
  measured from the first request to the moment the collector thread has drained the
  intake (``agent_eval_server_intake_spans`` back to 0), so the buffering work is in the
  figure, not only the request handling. Refused requests (429 / RESOURCE_EXHAUSTED:
  backpressure) are retried after 5 ms and counted.
- *memory*: a fresh server with settle delay and idle timeout of 10 minutes, so every
  trace stays buffered; RSS delta (``/proc/<pid>/status`` VmRSS) / buffered traces.

Evaluation runs too, capped by the default token bucket (50 traces/s), as in production.

Usage:  python benchmarks/serve_ingest.py [--requests 60] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from otel_agent_eval.demo import SCENARIOS

SPANS_PER_REQUEST = 512
SENDERS = 4


def build_requests(count: int) -> tuple[list[bytes], int, int]:
    """``count`` requests of ~512 spans of whole agent traces (HTTP span + agent run); (requests, spans, traces)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench-app")
    requests, spans, traces = [], 0, 0
    for _ in range(count):
        exporter.clear()
        i = 0
        while len(exporter.get_finished_spans()) < SPANS_PER_REQUEST - 16:
            scenario = SCENARIOS[i % len(SCENARIOS)]
            i += 1
            with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER):
                scenario.agent.run(tracer, scenario.task, scenario.turns)
            traces += 1
        batch = exporter.get_finished_spans()
        spans += len(batch)
        requests.append(encode_spans(batch).SerializeToString())
    provider.shutdown()
    return requests, spans, traces


class Server:
    def __init__(self, cpu: int | None, env: dict[str, str]) -> None:
        self.out = tempfile.NamedTemporaryFile("w+", suffix=".out", delete=False)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        full_env.update(PYTHONUNBUFFERED="1", OTEL_AGENT_EVAL_MAX_BUFFERED_TRACES="200000",
                        OTEL_AGENT_EVAL_MAX_INTAKE_SPANS="50000", **env)

        def pin() -> None:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "otel_agent_eval", "serve", "--host", "127.0.0.1", "--http-port", "0",
             "--grpc-port", "0", "--admin-port", "0"],
            stdout=self.out, stderr=subprocess.DEVNULL, env=full_env, preexec_fn=pin,
        )
        deadline = time.monotonic() + 30
        while True:
            text = Path(self.out.name).read_text()
            if text.strip():
                self.ports = json.loads(text.splitlines()[0])
                break
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("server did not start")
            time.sleep(0.05)

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.ports['admin']}/metrics", timeout=10).read().decode()
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.out.name)


def send_all(send, requests: list[bytes]) -> tuple[int, int]:
    """Send every request from SENDERS threads; returns (rejected spans, refused attempts)."""
    lock = threading.Lock()
    queue = list(requests)
    totals = [0, 0]

    def sender() -> None:
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            while True:
                outcome = send(body)
                if outcome is None:  # refused: backpressure
                    with lock:
                        totals[1] += 1
                    time.sleep(0.005)
                    continue
                with lock:
                    totals[0] += outcome
                break

    threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return totals[0], totals[1]


def http_sender(port: int):
    import requests as http
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    local = threading.local()

    def send(body: bytes) -> int | None:
        if not hasattr(local, "session"):
            local.session = http.Session()
        r = local.session.post(f"http://127.0.0.1:{port}/v1/traces", data=body,
                               headers={"Content-Type": "application/x-protobuf"}, timeout=30)
        if r.status_code in (429, 503):
            return None
        r.raise_for_status()
        return ExportTraceServiceResponse.FromString(r.content).partial_success.rejected_spans

    return send


def grpc_sender(port: int):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)

    def send(body: bytes) -> int | None:
        try:
            return stub.Export(ExportTraceServiceRequest.FromString(body), timeout=30).partial_success.rejected_spans
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
                return None
            raise

    return send


def measure_ingest(kind: str, requests: list[bytes], spans: int, cpus: tuple[int | None, int | None]) -> dict:
    server = Server(cpus[0], {})
    try:
        send = http_sender(server.ports["http"]) if kind == "http" else grpc_sender(server.ports["grpc"])
        send(requests[0])  # warm up (connection, first imports)
        time.sleep(0.5)
        started = time.perf_counter()
        rejected, refused = send_all(send, requests[1:])
        sent_done = time.perf_counter()
        while server.metric("agent_eval_server_intake_spans") > 0:
            time.sleep(0.01)
        drained = time.perf_counter()
        accepted = spans - spans // len(requests) - rejected
        return {"transport": kind, "spans": accepted, "requests_s": round(sent_done - started, 3),
                "spans_per_s": round(accepted / (drained - started)), "refused_attempts": refused, "rejected_spans": rejected}
    finally:
        server.stop()


def measure_memory(requests: list[bytes], traces: int, cpus: tuple[int | None, int | None]) -> dict:
    server = Server(cpus[0], {"OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "600", "OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "600",
                              "OTEL_AGENT_EVAL_MAX_TRACE_AGE_SECONDS": "600"})
    try:
        send = http_sender(server.ports["http"])
        time.sleep(1.0)
        before = server.rss_bytes()
        send_all(send, requests)
        deadline = time.monotonic() + 60
        while server.metric("agent_eval_buffered_traces") < traces and time.monotonic() < deadline:
            time.sleep(0.05)
        buffered = server.metric("agent_eval_buffered_traces")
        after = server.rss_bytes()
        return {"buffered_traces": int(buffered), "rss_delta_mib": round((after - before) / 2**20, 1),
                "bytes_per_trace": round((after - before) / max(buffered, 1))}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=60, help="requests of 512 spans per transport (default 60)")
    parser.add_argument("--quick", action="store_true", help="20 requests")
    args = parser.parse_args()
    count = 20 if args.quick else args.requests
    cpus: tuple[int | None, int | None] = (None, None)
    if hasattr(os, "sched_getaffinity"):
        available = sorted(os.sched_getaffinity(0))
        cpus = (available[0], available[1] if len(available) > 1 else None)
        if cpus[1] is not None:
            os.sched_setaffinity(0, {cpus[1]})
    print(f"building {count} requests of ~{SPANS_PER_REQUEST} spans ...", flush=True)
    requests, spans, traces = build_requests(count)
    print(f"  {spans} spans in {traces} traces ({spans / traces:.1f} spans/trace, "
          f"{sum(map(len, requests)) / spans:.0f} bytes/span encoded); server on CPU {cpus[0]}, client on CPU {cpus[1]}")
    for kind in ("http", "grpc"):
        result = measure_ingest(kind, requests, spans, cpus)
        print(f"OTLP/{kind:<4}  {result['spans_per_s']:>8} spans/s ingested on one core "
              f"({result['spans']} spans; refused attempts {result['refused_attempts']}, rejected spans {result['rejected_spans']})",
              flush=True)
    memory = measure_memory(requests, traces, cpus)
    print(f"memory     {memory['bytes_per_trace'] / 1024:>8.1f} KiB per buffered trace "
          f"({memory['buffered_traces']} traces, RSS +{memory['rss_delta_mib']} MiB, {spans / traces:.1f} spans/trace)")


if __name__ == "__main__":
    main()
