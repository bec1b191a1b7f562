#!/usr/bin/env python
"""``otel-agent-eval serve``: spans per CPU-second with every trace admitted, assembled and
deterministically evaluated, results exported; memory per buffered trace.

What is measured, per transport (a fresh ``serve`` subprocess each):

- the server: admission off (``MAX_TRACES_PER_SECOND=0``), no evaluation rate cap, queues large
  enough that nothing is dropped (checked: the run fails if anything is), the four default
  deterministic evaluators, results exported over OTLP/HTTP (``--export-protocol grpc``: gRPC) to
  a receiver in this process (so the result export's CPU is in the figure);
- the clients: 4 threads of the real OpenTelemetry Python exporters, each ``export()``-ing
  512-span batches of ``ReadableSpan``s (whole agent runs under an HTTP root, made once by the
  real SDK running the demo's scripted agents): ``OTLPSpanExporter`` http/protobuf and gRPC.
  No Python exporter speaks OTLP/HTTP JSON, so for JSON the same batches are sent as pre-encoded
  OTLP/JSON bodies (hex ids, as the spec says) with ``requests``;
- the figure: spans / CPU-seconds of the serve process (``/proc/<pid>/stat`` utime + stime: all
  its threads) from just before the first batch to the moment every run is evaluated and every
  evaluation span and result record has reached the receiver (watched in this process; serve's
  ``/metrics`` is read once that is so, to confirm it: a scrape costs serve 1-3 ms of CPU, which at the 4 a
  second this used to poll was 1-2 % of the figure). Wall time is printed too, but on a shared machine
  it says little; CPU time depends less on what else runs (caches still do: compare side by side).
- the verdict: on the median of ``--repeat`` runs per transport (default 3, interleaved across the
  transports), printed with its range: one run of the same commit moves +-20 % on a shared VM;
- memory: a fresh server with settle delay and idle timeout of 10 minutes, admission off, so
  every trace stays buffered; RSS delta (``VmRSS``) / buffered traces, once all are buffered.

The server is pinned to one CPU and the clients to another when there are two, so that the clients'
work does not evict serve's caches; ``--no-pin`` lets both use every CPU, as an unpinned deployment does.

``--stages``: where the CPU goes, the same path on one thread without threads or HTTP
(decode -> buffer -> assemble -> 4 evaluators -> Prometheus sink -> OTel sink -> OTLP requests of
the results in 512-item batches), ``process_time`` per stage; the figure is the median round's total
(each stage's best of the rounds is printed for the split only: bests from different rounds sum to less
than any round took), with serve's cyclic-collector settings
(``server_collector``: what exists before the rounds is frozen, young passes every 50 000 objects). The OTel sink is serve's own: its
direct encoder (``sinks/otlp_direct.py``: each span and record encoded as it is emitted, the
request joined from those bytes) or, on trees without it, the SDK's span and log objects with
serve's resource, encoded by the SDK's OTLP encoders as its exporters do it.

``--base REF``: serve as of another commit measured too, alternating with this tree run by run (its dependencies
are this environment's; a base with the C decoder gets it compiled in place, as this checkout's editable
install has it), and this tree's figure over the base's printed, per transport: the ratio is what one run
of this benchmark can say on a machine whose absolute figures move with its neighbours.

Usage:  python benchmarks/serve_ingest.py [--requests 40] [--repeat 3] [--quick] [--stages] [--base REF]
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_agent_eval.cli.demo import SCENARIOS
from tests.serve.server_process import GrpcReceiver, Receiver

REPO = Path(__file__).resolve().parents[1]

SPANS_PER_REQUEST = 512
SENDERS = 4
GOALS = {"http/protobuf": 20_000, "grpc": 20_000, "http/json": 10_000}
EVALUATORS = 4
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def build_batches(count: int) -> tuple[list[list[ReadableSpan]], int, int]:
    """``count`` batches of ~512 spans of whole agent runs (HTTP span + agent run); (batches, spans, traces)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench-app")
    batches, spans, traces = [], 0, 0
    i = 0
    for _ in range(count):
        exporter.clear()
        while len(exporter.get_finished_spans()) < SPANS_PER_REQUEST - 16:
            scenario = SCENARIOS[i % len(SCENARIOS)]
            i += 1
            with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER):
                scenario.agent.run(tracer, scenario.task, scenario.turns)
            traces += 1
        batch = list(exporter.get_finished_spans())
        spans += len(batch)
        batches.append(batch)
    provider.shutdown()
    return batches, spans, traces


def otlp_json(batch: Sequence[ReadableSpan]) -> bytes:
    """OTLP/JSON of a batch: proto3 JSON with hex trace and span ids."""
    doc = json_format.MessageToDict(encode_spans(batch), use_integers_for_enums=True)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc, separators=(",", ":")).encode()


class Server:
    def __init__(self, cpu: int | None, env: dict[str, str], export_to: str | None,
                 export_protocol: str = "http/protobuf", tree: Path = REPO) -> None:
        self.out = tempfile.NamedTemporaryFile("w+", suffix=".out", delete=False)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        full_env.update(
            PYTHONUNBUFFERED="1", PYTHONPATH=str(tree),
            OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND="0", OTEL_AGENT_EVAL_MAX_EVALUATIONS_PER_SECOND="0",
            OTEL_AGENT_EVAL_MAX_BUFFERED_TRACES="200000", OTEL_AGENT_EVAL_MAX_INTAKE_SPANS="1000000",
            OTEL_AGENT_EVAL_MAX_BUFFERED_BYTES="0", OTEL_AGENT_EVAL_MAX_QUEUED_EVALUATIONS="100000",
            OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS="0.2",
            OTEL_AGENT_EVAL_EXPORT_MAX_QUEUED_SPANS="100000", OTEL_AGENT_EVAL_EXPORT_MAX_QUEUED_LOG_RECORDS="400000",
            OTEL_BSP_SCHEDULE_DELAY="200", OTEL_BLRP_SCHEDULE_DELAY="200",
        )
        full_env.update(env)
        if export_to:
            full_env.update(OTEL_EXPORTER_OTLP_ENDPOINT=export_to, OTEL_EXPORTER_OTLP_PROTOCOL=export_protocol)

        def pin() -> None:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "otel_agent_eval", "serve", "--host", "127.0.0.1", "--http-port", "0",
             "--grpc-port", "0", "--admin-port", "0"],
            stdout=self.out, stderr=subprocess.DEVNULL, env=full_env, preexec_fn=pin,
            cwd=tree,  # ``-m`` puts the working directory first on sys.path, ahead of PYTHONPATH
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

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.ports['admin']}/metrics", timeout=10).read().decode()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
        return out

    def cpu_seconds(self) -> float:
        """utime + stime of the server process, all threads (fields 14 and 15 of /proc/<pid>/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.out.name)


def send_all(make_sender: Callable[[], Callable[[Any], bool]], items: list[Any]) -> int:
    """Send every item from SENDERS threads, each with its own client; returns failed sends."""
    lock = threading.Lock()
    queue = list(items)
    failures = [0]

    def run() -> None:
        send = make_sender()
        while True:
            with lock:
                if not queue:
                    return
                item = queue.pop()
            if not send(item):
                with lock:
                    failures[0] += 1

    threads = [threading.Thread(target=run) for _ in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures[0]


def sender_factory(kind: str, server: Server) -> Callable[[], Callable[[Any], bool]]:
    if kind == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        def make() -> Callable[[Any], bool]:
            exporter = HttpExporter(endpoint=f"http://127.0.0.1:{server.ports['http']}/v1/traces", timeout=60)
            return lambda batch: exporter.export(batch) == SpanExportResult.SUCCESS
        return make
    if kind == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        def make() -> Callable[[Any], bool]:
            exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.ports['grpc']}", insecure=True, timeout=60)
            return lambda batch: exporter.export(batch) == SpanExportResult.SUCCESS
        return make
    import requests as http

    def make() -> Callable[[Any], bool]:
        session = http.Session()
        url = f"http://127.0.0.1:{server.ports['http']}/v1/traces"

        def send(body: bytes) -> bool:
            while True:
                r = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60)
                if r.status_code not in (429, 503):
                    return r.status_code == 200 and "rejectedSpans" not in r.text
                time.sleep(0.05)
        return send
    return make


def wait_for_receiver(receiver: Any, spans: int, quiet: float) -> None:
    """Until ``receiver`` holds ``spans`` evaluation spans and their results, or has had nothing new for ``quiet`` s."""
    seen, since = -1, time.monotonic()
    while True:
        count = len(receiver.evaluation_spans())
        if count >= spans and len(receiver.results()) >= EVALUATORS * spans:
            return
        if count != seen:
            seen, since = count, time.monotonic()
        elif time.monotonic() - since > quiet:
            return
        time.sleep(0.05)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def measure(kind: str, batches: list[list[ReadableSpan]], spans: int, traces: int, cpu: int | None,
            export_protocol: str = "http/protobuf", tree: Path = REPO) -> dict[str, Any]:
    receiver = GrpcReceiver() if export_protocol == "grpc" else Receiver()
    server = Server(cpu, {}, receiver.endpoint, export_protocol, tree)
    try:
        items: list[Any] = [otlp_json(b) for b in batches] if kind == "http/json" else batches
        warmup = sender_factory(kind, server)()
        assert warmup(items[0]), "warm-up batch refused"
        warm_spans, rest = len(batches[0]), items[1:]
        wait_until(lambda: server.metrics().get("agent_eval_traces_evaluated_total", 0) > 0, 60, "warm-up evaluated")
        wait_until(lambda: len(receiver.evaluation_spans()) >= server.metrics().get("agent_eval_traces_evaluated_total", 0),
                   60, "warm-up exported")
        time.sleep(0.5)
        before = server.metrics()
        measured_traces = {s.context.trace_id for batch in batches[1:] for s in batch}
        expected_spans = len(receiver.evaluation_spans()) + len(measured_traces)
        cpu_before, wall_before = server.cpu_seconds(), time.perf_counter()
        failed = send_all(sender_factory(kind, server), rest)
        sent_at = time.perf_counter()

        def done() -> bool:
            m = server.metrics()
            completed = m.get("agent_eval_traces_completed_total", 0)
            runs = m.get("agent_eval_agent_traces_total", 0)
            evaluated = m.get("agent_eval_traces_evaluated_total", 0)
            return (completed >= traces and evaluated >= runs and len(receiver.evaluation_spans()) >= evaluated
                    and len(receiver.results()) >= EVALUATORS * evaluated)

        # A scrape of /metrics costs serve 1-3 ms of CPU (Prometheus pays that every 15 s or so): the receiver, in
        # this process, is watched until each measured trace's evaluation span and results are there (one run a
        # trace) or nothing has come for 2 s; only then is serve asked, and its /metrics decide.
        wait_for_receiver(receiver, expected_spans, quiet=2.0)
        wait_until(done, 600, "every trace evaluated and exported", interval=0.25)
        cpu_after, wall_after = server.cpu_seconds(), time.perf_counter()
        after = server.metrics()
    finally:
        server.stop()
        receiver.close()
    measured = spans - warm_spans
    dropped = {k: after.get(k, 0) - before.get(k, 0) for k in
               ("agent_eval_dropped_total", "agent_eval_spans_dropped_total", "agent_eval_sink_errors_total",
                "agent_eval_admission_decisions_total")}
    cpu_s = cpu_after - cpu_before
    return {
        "transport": kind, "spans": measured, "failed_requests": failed, "cpu_s": round(cpu_s, 2),
        "wall_s": round(wall_after - wall_before, 2), "send_s": round(sent_at - wall_before, 2),
        "spans_per_cpu_s": round(measured / cpu_s), "runs_evaluated": int(after["agent_eval_traces_evaluated_total"]
                                                                          - before["agent_eval_traces_evaluated_total"]),
        "dropped": int(dropped["agent_eval_dropped_total"] + dropped["agent_eval_spans_dropped_total"]),
        "sink_errors": int(dropped["agent_eval_sink_errors_total"]),
    }


def base_tree(ref: str) -> Path:
    """A detached git worktree of ``ref`` in a temporary directory: serve runs from it with ``PYTHONPATH`` (ahead
    of the installed package); its dependencies are this environment's."""
    path = Path(tempfile.mkdtemp(prefix="serve-base-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    native = path / "otel_agent_eval" / "formats" / "_otlp_native.c"
    if native.exists():  # its C decoder compiled in place, as this checkout's editable install has it
        subprocess.run([*sysconfig.get_config_var("CC").split(), "-shared", "-fPIC", "-O2",
                        f"-I{sysconfig.get_paths()['include']}", str(native),
                        "-o", str(native.with_suffix(sysconfig.get_config_var("EXT_SUFFIX")))], check=True)
    return path


def measure_memory(batches: list[list[ReadableSpan]], traces: int, cpu: int | None) -> dict[str, Any]:
    server = Server(cpu, {"OTEL_AGENT_EVAL_SETTLE_DELAY_SECONDS": "600", "OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "600",
                          "OTEL_AGENT_EVAL_MAX_TRACE_AGE_SECONDS": "600"}, None)
    try:
        time.sleep(1.0)
        before = server.rss_bytes()
        send_all(sender_factory("http/protobuf", server), batches)
        wait_until(lambda: server.metrics().get("agent_eval_buffered_traces", 0) >= traces, 120, "every trace buffered")
        buffered = server.metrics()["agent_eval_buffered_traces"]
        after = server.rss_bytes()
        estimated = server.metrics()["agent_eval_buffered_bytes"]
        return {"buffered_traces": int(buffered), "rss_delta_mib": round((after - before) / 2**20, 1),
                "bytes_per_trace": round((after - before) / max(buffered, 1)),
                "estimated_bytes_per_trace": round(estimated / max(buffered, 1))}
    finally:
        server.stop()


def stages(batches: list[list[ReadableSpan]], kind: str, rounds: int) -> list[dict[str, float]]:
    """CPU seconds per stage of serve's path on one thread, one dict per round; see the module docstring."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor
    from prometheus_client import CollectorRegistry

    from otel_agent_eval.assembly import assemble
    from otel_agent_eval.config import Settings
    from otel_agent_eval.evaluators import build_configured_evaluators
    from otel_agent_eval.evaluators.base import evaluate_run
    from otel_agent_eval.formats.otlp import decode_traces_json, decode_traces_protobuf
    from otel_agent_eval.model import EvaluatedTrace
    from otel_agent_eval.pipeline.buffer import FLUSH, TraceBuffer
    from otel_agent_eval.pipeline.completion import flatten, join_log_records
    from otel_agent_eval.pipeline.stats import PipelineStats, RunLabels
    from otel_agent_eval.sinks import otlp_export
    from otel_agent_eval.sinks.otel import OtelSink
    from otel_agent_eval.sinks.prometheus import PrometheusSink

    bodies = [otlp_json(b) for b in batches] if kind == "http/json" else [encode_spans(b).SerializeToString() for b in batches]
    try:  # serve's collector settings (startup frozen, young passes every 50 000 objects), as serve runs
        from otel_agent_eval.serve.server import server_collector
    except ImportError:  # older trees
        server_collector = None  # type: ignore[assignment]
    if server_collector is not None:
        server_collector()
    decode = decode_traces_json if kind == "http/json" else decode_traces_protobuf
    settings = Settings.load()
    evaluators, _ = build_configured_evaluators(settings)
    per_round: list[dict[str, float]] = []

    class Collect(SpanProcessor, LogRecordProcessor):  # type: ignore[misc]
        """The SDK objects the OTel sink makes, kept for encoding as the batch processors would."""

        def __init__(self) -> None:
            self.items: list[Any] = []

        def on_end(self, span: Any) -> None:
            self.items.append(span)

        def on_emit(self, record: Any) -> None:
            self.items.append(record)

        emit = on_emit

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 0) -> bool:
            return True

    def evaluate(run: Any) -> list[Any]:
        return evaluate_run(evaluators, run)  # as serve's workers do: one isolation scope per run

    def add(records: list[Any]) -> None:
        for r in records:
            buffer.add(r, r.trace_id, r.is_local_root, 0.0)

    try:
        from otel_agent_eval.sinks import otlp_direct
    except ImportError:  # a tree from before the direct encoder: the SDK path
        otlp_direct = None  # type: ignore[assignment]

    class Queue(list):  # type: ignore[type-arg]
        """Stands in for ``ResultQueue``: keeps the encoded items."""

        put = list.extend

    for _ in range(rounds):
        resource = Resource.create({"service.name": "otel-agent-eval"})
        if hasattr(otlp_export, "hashed_once"):  # as serve makes it (the benchmark also runs on older trees)
            resource = otlp_export.hashed_once(resource)
        if otlp_direct is not None:
            spans, logs = Queue(), Queue()
            otel = otlp_direct.DirectOtlpSink(spans, logs)  # type: ignore[arg-type]
            encode_spans_now = encode_logs_now = functools.partial(otlp_direct.export_request,
                                                                    *otlp_direct.resource_and_scope(resource))
            sink_stage = "OTel sink (direct encoding)"
        else:
            tracer_provider, logger_provider = TracerProvider(resource=resource), LoggerProvider(resource=resource)
            spans, logs = Collect(), Collect()
            tracer_provider.add_span_processor(spans)
            logger_provider.add_log_record_processor(logs)
            otel = OtelSink(tracer_provider, logger_provider)

            def encode_spans_now(batch: Any) -> bytes:
                return encode_spans(batch).SerializePartialToString()

            def encode_logs_now(batch: Any) -> bytes:
                return encode_logs(batch).SerializePartialToString()

            sink_stage = "OTel sink (SDK objects)"
        prometheus = PrometheusSink(CollectorRegistry(), PipelineStats(), RunLabels(100, 100))
        buffer = TraceBuffer(settle_delay=0, idle_timeout=60, max_age=60, max_traces=10**6, max_spans_per_trace=10**4,
                             on_drop=lambda reason, n: None)
        spent: dict[str, float] = dict.fromkeys(
            ("decode", "buffer", "assemble", "evaluate", "prometheus sink", sink_stage, "OTLP requests"), 0.0)

        def timed(stage: str, fn: Callable[..., Any], *args: Any, spent: dict[str, float] = spent) -> Any:
            started = time.process_time()
            out = fn(*args)
            spent[stage] += time.process_time() - started
            return out

        for body in bodies:
            timed("buffer", add, timed("decode", decode, body))
        for completed in timed("buffer", buffer.pop_all, FLUSH):
            records = join_log_records(completed.spans, completed.logs)
            for run in timed("assemble", lambda records: flatten(assemble(records)), records):
                evaluated = EvaluatedTrace(run, timed("evaluate", evaluate, run), {}, time.time_ns(), time.time_ns())
                timed("prometheus sink", prometheus.emit, evaluated)
                timed(sink_stage, otel.emit, evaluated)
        for collected, encode in ((spans, encode_spans_now), (logs, encode_logs_now)):
            items = collected if isinstance(collected, list) else collected.items
            for i in range(0, len(items), 512):
                timed("OTLP requests", encode, items[i:i + 512])
        per_round.append(spent)
    return per_round


def print_stages(batches: list[list[ReadableSpan]], spans: int, traces: int, kind: str, rounds: int) -> None:
    """The whole path per round (median and range: what one thread does end to end), then each stage's share.

    Each stage's best over the rounds is printed for where the time goes, but their sum is not a figure
    of the path: the best of each stage comes from different rounds (the sum came out 15-30 % under any one
    round's total on an idle machine).
    """
    per_round = stages(batches, kind, rounds)
    totals = sorted(sum(spent.values()) for spent in per_round)
    median = statistics.median(totals)
    print(f"{kind}: one thread, {rounds} rounds: {spans / median:,.0f} spans per CPU-second (median round; "
          f"{spans / totals[-1]:,.0f}-{spans / totals[0]:,.0f}), {median / traces * 1e6:,.0f} us per trace")
    best = {stage: min(spent[stage] for spent in per_round) for stage in per_round[0]}
    total = sum(best.values())
    print(f"  each stage's best of {rounds} (shares of their sum):")
    for stage, seconds in sorted(best.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:<26} {100 * seconds / total:5.1f} %  {seconds * 1e3:7.1f} ms  {spans / seconds:>10,.0f} spans/s alone")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40, help="batches of 512 spans per transport (default 40)")
    parser.add_argument("--quick", action="store_true", help="10 batches")
    parser.add_argument("--transports", default="http/protobuf,grpc,http/json")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per transport, interleaved; the verdict is on the median (default 3)")
    parser.add_argument("--stages", action="store_true", help="CPU per stage on one thread instead (see above)")
    parser.add_argument("--rounds", type=int, default=3, help="--stages: rounds (default 3)")
    parser.add_argument("--export-protocol", default="http/protobuf", choices=("http/protobuf", "grpc"),
                        help="how serve exports its results to this process's receiver")
    parser.add_argument("--no-pin", action="store_true", help="server and clients share every CPU (default: one each)")
    parser.add_argument("--base", metavar="REF",
                        help="also measure serve as of this git commit (a temporary worktree), alternating with this "
                             "tree run by run, and print this tree's figure over the base's")
    args = parser.parse_args()
    count = 10 if args.quick else args.requests
    cpus: tuple[int | None, int | None] = (None, None)
    if hasattr(os, "sched_getaffinity") and not args.no_pin:
        available = sorted(os.sched_getaffinity(0))
        cpus = (available[0], available[1] if len(available) > 1 else None)
        if cpus[1] is not None:
            os.sched_setaffinity(0, {cpus[1]})
    print(f"building {count} batches of ~{SPANS_PER_REQUEST} spans ...", flush=True)
    batches, spans, traces = build_batches(count)
    if args.stages:
        for kind in dict.fromkeys("http/json" if k == "http/json" else "protobuf" for k in args.transports.split(",")):
            print_stages(batches, spans, traces, kind, args.rounds)
        return
    print(f"  {spans} spans in {traces} traces ({spans / traces:.1f} spans/trace); server on CPU {cpus[0]}, "
          f"clients ({SENDERS} threads) on CPU {cpus[1]} (None: any); admission off, no rate cap, {EVALUATORS} deterministic "
          f"evaluators, results exported over OTLP {args.export_protocol}", flush=True)
    kinds = args.transports.split(",")
    base = base_tree(args.base) if args.base else None
    trees = {"this tree": REPO} | ({f"base {args.base}": base} if base else {})
    figures: dict[tuple[str, str], list[int]] = {(kind, tree): [] for kind in kinds for tree in trees}
    try:
        for round_ in range(args.repeat):  # rounds interleave the transports and trees: a noisy minute hits all
            for kind in kinds:
                for tree, path in trees.items():
                    r = measure(kind, batches, spans, traces, cpus[0], args.export_protocol, path)
                    figures[kind, tree].append(r["spans_per_cpu_s"])
                    label = f"{kind} ({tree})" if base else kind
                    print(f"{label:<14} {r['spans_per_cpu_s']:>7} spans per CPU-second of serve (round {round_ + 1}); "
                          f"{r['spans']} spans, {r['runs_evaluated']} runs evaluated and exported, CPU {r['cpu_s']} s, "
                          f"wall {r['wall_s']} s (sending {r['send_s']} s); failed requests {r['failed_requests']}, "
                          f"dropped {r['dropped']}, sink errors {r['sink_errors']}", flush=True)
    finally:
        if base:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False)
    for kind in kinds:
        runs, goal = sorted(figures[kind, "this tree"]), GOALS[kind]
        median = statistics.median(runs)
        verdict = "met" if median >= goal else "NOT met"
        print(f"{kind:<14} median {median:>7.0f} spans per CPU-second of serve over {len(runs)} runs "
              f"(min {runs[0]}, max {runs[-1]}; goal >= {goal}: {verdict})", flush=True)
        if base:
            base_runs = figures[kind, f"base {args.base}"]
            pairs = sorted(a / b for a, b in zip(figures[kind, "this tree"], base_runs))
            print(f"{'':<14} base {args.base}: median {statistics.median(base_runs):.0f} (min {min(base_runs)}, max "
                  f"{max(base_runs)}); this tree / base: {statistics.median(pairs):.2f}x (run by run "
                  f"{pairs[0]:.2f}-{pairs[-1]:.2f}x)", flush=True)
    memory = measure_memory(batches, traces, cpus[0])
    print(f"memory         {memory['bytes_per_trace'] / 1024:>7.1f} KiB RSS per buffered trace "
          f"({memory['buffered_traces']} traces all buffered, RSS +{memory['rss_delta_mib']} MiB; "
          f"estimate {memory['estimated_bytes_per_trace'] / 1024:.1f} KiB/trace; {spans / traces:.1f} spans/trace)")


if __name__ == "__main__":
    main()
