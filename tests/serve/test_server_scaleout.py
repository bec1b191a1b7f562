"""Scale-out: 3 ``serve`` replicas behind trace-id routing, as the Collector's loadbalancing exporter does.

``HashRing`` mirrors ``exporter/loadbalancingexporter/consistent_hashing.go`` in
opentelemetry-collector-contrib: 100 points per endpoint at ``crc32(endpoint + byte(i)) % 36000``
(CRC-32 IEEE, not FNV), a trace goes to the first point at or after ``crc32(trace id) % 36000``,
wrapping around; a point already taken is skipped. ``RoutingExporter`` splits every batch by that
ring and sends each part with the official OTLP/HTTP exporter, like the loadbalancing exporter's
per-endpoint OTLP exporters; parts that fail are counted (spans and trace ids).
"""

from __future__ import annotations

import bisect
import json
import signal
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Sequence
from itertools import cycle
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, set_span_in_context

from tests.serve.server_process import SCENARIOS, Receiver, ServerProcess, wait_for

MAX_POSITIONS = 36_000
WEIGHT = 100


class HashRing:
    def __init__(self, endpoints: Sequence[str]) -> None:
        taken: set[int] = set()
        items = []
        for endpoint in endpoints:
            for i in range(WEIGHT):
                position = zlib.crc32(endpoint.encode() + bytes([i])) % MAX_POSITIONS
                if position not in taken:
                    taken.add(position)
                    items.append((position, endpoint))
        items.sort()
        self.positions = [p for p, _ in items]
        self.endpoints = [e for _, e in items]

    def endpoint_for(self, trace_id: int) -> str:
        position = zlib.crc32(trace_id.to_bytes(16, "big")) % MAX_POSITIONS
        index = bisect.bisect_left(self.positions, position)
        return self.endpoints[index % len(self.endpoints)]


class RoutingExporter(SpanExporter):
    def __init__(self, endpoints: Sequence[str]) -> None:
        self.ring = HashRing(endpoints)
        self.exporters = {e: OTLPSpanExporter(endpoint=f"http://{e}/v1/traces", timeout=1) for e in endpoints}
        self.failed_spans: dict[str, int] = defaultdict(int)
        self.failed_traces: set[int] = set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        groups: dict[str, list[ReadableSpan]] = defaultdict(list)
        for span in spans:
            groups[self.ring.endpoint_for(span.context.trace_id)].append(span)
        result = SpanExportResult.SUCCESS
        for endpoint, group in groups.items():
            if self.exporters[endpoint].export(group) != SpanExportResult.SUCCESS:
                self.failed_spans[endpoint] += len(group)
                self.failed_traces.update(s.context.trace_id for s in group)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        for exporter in self.exporters.values():
            exporter.shutdown()


def test_hash_ring_spreads_and_is_stable() -> None:
    ring = HashRing(["a:4318", "b:4318", "c:4318"])
    counts: dict[str, int] = defaultdict(int)
    for trace_id in range(1, 30_001):
        counts[ring.endpoint_for(trace_id * 0x9E3779B97F4A7C15 % (1 << 128))] += 1
    assert set(counts) == {"a:4318", "b:4318", "c:4318"}
    assert min(counts.values()) > 0.2 * 30_000
    # Removing an endpoint only moves the traces it owned.
    smaller = HashRing(["a:4318", "c:4318"])
    for trace_id in range(1, 2_000):
        tid = trace_id * 0x9E3779B97F4A7C15 % (1 << 128)
        if ring.endpoint_for(tid) != "b:4318":
            assert smaller.endpoint_for(tid) == ring.endpoint_for(tid)


def test_three_replicas_one_stopped_and_restarted_mid_stream_each_trace_evaluated_at_most_once_and_loss_counted(
    tmp_path: Path,
) -> None:
    """Traffic through the ring while replica r1 is stopped (SIGTERM: it drains) and, a while later,
    restarted on the same port. Deterministic: traces complete on their root or at a drain, never on
    a timer (idle timeout of an hour), and every replica is stopped (drained) at the end, so what was
    evaluated is read from the receiver and the stop reports, not waited for."""
    receiver = Receiver()
    replicas: list[ServerProcess] = []
    restarted: ServerProcess | None = None
    # Admission off: the app's batches reach a replica in bursts (its exporter stalls on r1 while r1 is
    # down), and the adaptive admission ratio would reject part of a burst: counted
    # (admission_decisions{rejected}), but not the loss this test accounts for.
    env = {"OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "3600", "OTEL_AGENT_EVAL_MAX_TRACE_AGE_SECONDS": "3600",
           "OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND": "0"}
    try:
        for i in range(3):
            replicas.append(ServerProcess(tmp_path / f"r{i}", "--drain-seconds", "20", name=f"r{i}", receiver=receiver,
                                          env=env))
        endpoints = [f"127.0.0.1:{r.ports['http']}" for r in replicas]
        name_of = {e: f"r{i}" for i, e in enumerate(endpoints)}
        router = RoutingExporter(endpoints)
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(router, schedule_delay_millis=50))
        tracer = provider.get_tracer("test-app")
        sent: list[int] = []
        done = threading.Event()

        def traffic() -> None:
            for scenario in cycle(SCENARIOS):
                if done.is_set():
                    return
                with tracer.start_as_current_span("POST /agent", kind=SpanKind.SERVER) as root:
                    scenario.agent.run(tracer, scenario.task, scenario.turns)
                sent.append(root.get_span_context().trace_id)
                time.sleep(0.01)

        def more(count: int) -> None:
            target = len(sent) + count
            wait_for(lambda: len(sent) >= target, 60, f"{count} more traces sent")

        thread = threading.Thread(target=traffic, daemon=True)
        thread.start()
        more(40)
        reports = {"r1 (stopped)": replicas[1].stop(signal.SIGTERM, timeout=40)}  # mid-stream: traffic keeps flowing
        down = len(sent)
        more(30)  # r1 is down: its share fails at the exporter, counted
        restarted = ServerProcess(tmp_path / "r1b", "--drain-seconds", "20", "--http-port", str(replicas[1].ports["http"]),
                                  name="r1", receiver=receiver, env=env)
        up = len(sent)
        more(40)
        done.set()
        thread.join(10)
        assert provider.force_flush(30_000)
        provider.shutdown()
        for name, replica in (("r0", replicas[0]), ("r2", replicas[2]), ("r1 (restarted)", restarted)):
            reports[name] = replica.stop(signal.SIGTERM, timeout=40)

        r1 = endpoints[1]
        owner = {t: router.ring.endpoint_for(t) for t in sent}
        assert set(router.failed_spans) == {r1}, dict(router.failed_spans)  # only r1's share failed
        assert any(owner[t] == r1 for t in sent[down:up]) and router.failed_traces <= {t for t in sent if owner[t] == r1}

        by_trace: dict[int, list[dict]] = defaultdict(list)
        for span in receiver.evaluation_spans():
            by_trace[int(span["trace_id"], 16)].append(span)
        duplicates = {format(t, "032x"): len(s) for t, s in by_trace.items() if len(s) > 1}
        assert not duplicates, f"evaluated twice: {duplicates}"  # at most once, across the stop and the restart
        assert set(by_trace) <= set(sent)
        for t, spans in by_trace.items():  # evaluated where the ring sent it
            assert spans[0]["service"] == name_of[owner[t]]
        result_ids = [r["attributes"]["agent_eval.result_id"] for r in receiver.results()]
        assert len(result_ids) == len(set(result_ids))

        # Every trace sent is evaluated, or its loss is counted: by the exporter (spans that failed to
        # reach r1 while it drained or was down), or by a replica: dropped{shutdown} (none here, the drains
        # finished in time), or, for a request that was already being read when the drain began, its spans
        # refused in a partial-success answer (spans_rejected) or dropped after the drain (spans_dropped).
        unaccounted = {t for t in sent if t not in by_trace} - router.failed_traces
        refused = sum(r["spans_rejected"] + r["spans_dropped"].get("already_shutdown", 0) for r in reports.values())
        assert len(unaccounted) <= refused, ([format(t, "032x") for t in unaccounted], reports)
        for name, report in reports.items():
            assert report["drained"] is True and report["dropped_shutdown"] == 0 and report["exported"] is True, (name, report)
        assert sum(r["traces_evaluated"] for r in reports.values()) == len(by_trace)  # the reports agree with the receiver
        assert all(r["traces_evaluated"] > 0 for r in reports.values()), reports
    finally:
        for replica in [*replicas, *([restarted] if restarted else [])]:
            replica.kill()
        receiver.close()


def test_ring_change_splits_in_flight_traces_and_none_is_evaluated_twice_whole(tmp_path: Path) -> None:
    """Scale-up from 2 to 3 replicas while 60 agent runs are in flight: each run's first turn
    (model call and tool span) was exported before the ring changed, the rest (second model
    call, agent span, root) after. Runs the ring keeps in place are evaluated once, whole, by
    their replica. A run that moved is split as collector/README.md describes: the new
    replica evaluates the part with the root (completed by root + settle), the old replica
    completes its part when it can no longer expect the rest (idle timeout; here, to be
    deterministic, an hour, so at its drain) and evaluates it as a partial run of the same
    agent span, with result ids of its own; no replica ever sees, or evaluates, a moved run whole."""
    receiver = Receiver()
    replicas: list[ServerProcess] = []
    try:
        for i in range(3):
            replicas.append(ServerProcess(tmp_path / f"r{i}", name=f"r{i}", receiver=receiver,
                                          env={"OTEL_AGENT_EVAL_IDLE_TIMEOUT_SECONDS": "3600",
                                               "OTEL_AGENT_EVAL_MAX_TRACE_AGE_SECONDS": "3600",
                                               "OTEL_AGENT_EVAL_MAX_TRACES_PER_SECOND": "0"}))  # 60 runs at once: no admission
        endpoints = [f"127.0.0.1:{r.ports['http']}" for r in replicas]
        name_of = {e: f"r{i}" for i, e in enumerate(endpoints)}
        before, after = HashRing(endpoints[:2]), HashRing(endpoints)
        router = RoutingExporter(endpoints)
        router.ring = before
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(router))  # each span exported when it ends
        tracer = provider.get_tracer("test-app")

        runs = []
        for n in range(60):
            root = tracer.start_span("POST /agent", kind=SpanKind.SERVER)
            agent = tracer.start_span("invoke_agent calc", context=set_span_in_context(root), attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "calc",
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"add {n} and 2"}]}]),
            })
            inside = set_span_in_context(agent)
            with tracer.start_as_current_span("chat m", context=inside, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                    {"type": "tool_call", "id": f"c{n}", "name": "add", "arguments": {"a": n, "b": 2}}]}]),
            }):
                pass
            with tracer.start_as_current_span("execute_tool add", context=inside, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": f"c{n}",
                "gen_ai.tool.call.result": str(n + 2),
            }):
                pass
            runs.append((root, agent, inside))
        router.ring = after  # scale-up: the Collector's resolver now lists a third replica
        for n, (root, agent, inside) in enumerate(runs):
            with tracer.start_as_current_span("chat m", context=inside, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": str(n + 2)}]}]),
            }):
                pass
            agent.end()
            root.end()
        provider.shutdown()
        assert not router.failed_spans

        trace_ids = [root.get_span_context().trace_id for root, _, _ in runs]
        agent_span = {root.get_span_context().trace_id: format(agent.get_span_context().span_id, "016x") for root, agent, _ in runs}
        moved = {t for t in trace_ids if before.endpoint_for(t) != after.endpoint_for(t)}
        assert moved and all(after.endpoint_for(t) == endpoints[2] for t in moved)  # consistent hashing: only to the new one
        expected_evaluations = len(trace_ids) + len(moved)

        def step_counts() -> dict[int, list[tuple[str, int, str]]]:
            """Per trace: (replica, steps, evaluated span) of every step_budget result."""
            out: dict[int, list[tuple[str, int, str]]] = defaultdict(list)
            for r in receiver.results():
                if r["attributes"]["gen_ai.evaluation.name"] == "step_budget":
                    steps = json.loads(r["attributes"]["agent_eval.details"])["steps"]
                    out[int(r["trace_id"], 16)].append((r["service"], steps, r["span_id"]))
            return out

        # Every part with a root completes on it; the root-less halves of moved runs wait (no timer fires).
        wait_for(lambda: sum(map(len, step_counts().values())) >= len(trace_ids), 60, "every part with a root evaluated")
        completed = [r.metrics().sum("agent_eval_traces_completed_total", reason="root_ended") for r in replicas]
        assert sum(completed) == len(trace_ids) and completed[2] == len(moved)  # r2 holds only moved runs
        reports = [r.stop(signal.SIGTERM, timeout=40) for r in replicas]  # the drains complete the rest
        seen = step_counts()
        for t in trace_ids:
            owner = name_of[after.endpoint_for(t)]
            if t not in moved:
                assert seen[t] == [(owner, 2, agent_span[t])], (format(t, "032x"), seen[t])
            else:
                old = name_of[before.endpoint_for(t)]
                # each replica evaluates its half as a one-step run of the same agent span, never the whole run
                assert sorted(seen[t]) == sorted([(owner, 1, agent_span[t]), (old, 1, agent_span[t])]), seen[t]
        # the agent-less half of a moved run says it is partial, on the old replica
        partial = {(int(span["trace_id"], 16), span["service"]) for span in receiver.evaluation_spans()
                   if span["attributes"].get("agent_eval.partial")}
        assert partial == {(t, name_of[before.endpoint_for(t)]) for t in moved}
        # the two halves of a moved run report different result ids
        result_ids = [r["attributes"]["agent_eval.result_id"] for r in receiver.results()]
        assert len(result_ids) == len(set(result_ids)) == 4 * expected_evaluations  # 4 evaluators
        # the old replicas completed the moved halves at their drain, the new one only by root ended
        assert sum(r["traces_completed"].get("shutdown", 0) for r in reports[:2]) == len(moved)
        assert sum(r["evaluated_during_drain"] for r in reports[:2]) == len(moved)
        assert reports[2]["traces_completed"] == {"root_ended": len(moved)}
        assert all(r["dropped_shutdown"] == 0 and r["exported"] for r in reports), reports
    finally:
        for replica in replicas:
            replica.kill()
        receiver.close()
