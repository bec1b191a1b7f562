"""The background half of the product: buffer -> assemble -> sample -> evaluate -> sinks.

Threads: one *collector* thread drains the span intake into the TraceBuffer,
completes traces, assembles and samples them, and watches the workers; N
*worker* threads run the evaluators and hand results to the sinks.

A hung evaluator cannot be killed in Python, so the collector acts as a
watchdog: when an evaluator runs past its timeout, its job gets an ``error``
result (reason ``timeout``), goes back to the front of the queue for the
remaining evaluators, the stuck worker is abandoned (its late results are
discarded) and a fresh worker takes its place.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .assemble import assemble
from .buffer import FLUSH, SHUTDOWN, CompletedTrace, TraceBuffer
from .config import Settings
from .conversations import ConversationStore
from .dialects import is_genai
from .evaluators.base import Evaluator, safe_evaluate
from .model import AgentTrace, EvalResult
from .logs import join_log_records
from .records import OWN_SCOPE, LogRecordData, SpanRecord, from_readable_span, raw_attributes
from .sampling import AdmissionRate, Sampler
from .stats import LogOnce, PipelineStats, RunLabels

_logger = logging.getLogger("otel_agent_eval")

TICK_SECONDS = 0.1
MAX_ABANDONED_WORKERS = 8
REJECTED_MEMORY = 10
"""Rejected trace ids remembered per generation, in multiples of ``max_buffered_traces``."""


@dataclass
class EvaluatedTrace:
    """What sinks receive: one agent trace, its results, and how long each evaluator took."""

    trace: AgentTrace
    results: list[EvalResult]
    durations: dict[str, float]
    started_ns: int
    ended_ns: int


class Sink(Protocol):
    name: str

    def emit(self, evaluated: EvaluatedTrace) -> None: ...


@dataclass
class _Job:
    trace: AgentTrace
    next_index: int = 0
    results: list[EvalResult] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    started_ns: int = field(default_factory=time.time_ns)


class _Worker:
    def __init__(self, pipeline: Pipeline, number: int) -> None:
        self.pipeline = pipeline
        self.abandoned = False
        self.job: _Job | None = None
        """The job this worker holds until it hands the results to the sinks."""
        self.current: tuple[_Job, int, float] | None = None
        self.thread = threading.Thread(target=pipeline._work, args=(self,), name=f"otel-agent-eval-worker-{number}", daemon=True)


def _trace_id_of(item: Any) -> int | None:
    """Trace id of an intake item: SpanRecord, LogRecordData or SDK ReadableSpan."""
    trace_id = getattr(item, "trace_id", None)
    return trace_id if trace_id is not None else item.context.trace_id


def flatten(traces: Sequence[AgentTrace]) -> list[AgentTrace]:
    """Every agent invocation, nested ones included: each is evaluated on its own."""
    out: list[AgentTrace] = []
    for trace in traces:
        out.append(trace)
        out.extend(flatten(trace.children))
    return out


class Pipeline:
    """Owns the intake, the buffer, the queue and the threads. Start with ``start()``."""

    def __init__(
        self,
        settings: Settings,
        evaluators: Sequence[Evaluator],
        sinks: Sequence[Sink] = (),
        *,
        stats: PipelineStats | None = None,
        run_labels: Callable[[AgentTrace], tuple[str, str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.evaluators = list(evaluators)
        self.sinks = list(sinks)
        self.stats = stats or PipelineStats()
        self.run_labels = run_labels or RunLabels(settings.max_agent_labels, settings.max_service_labels)
        """A run's (agent, service) label values, shared with the Prometheus sink."""
        self.clock = clock
        self.log_once = LogOnce()
        self._init_state()
        _register_fork_handler(self)

    def _init_state(self) -> None:
        s = self.settings
        self.intake: deque[Any] = deque()
        self.buffer = TraceBuffer(
            settle_delay=s.settle_delay_seconds,
            idle_timeout=s.idle_timeout_seconds,
            max_age=s.max_trace_age_seconds,
            max_traces=s.max_buffered_traces,
            max_bytes=s.max_buffered_bytes,
            max_spans_per_trace=s.max_spans_per_trace,
            on_drop=self._count_drop,
        )
        self.sampler = Sampler(
            s.sample_rate,
            keep_errors=s.sample_errors,
            keep_tool_failures=s.sample_tool_failures,
            slow_seconds=s.slow_trace_seconds,
            max_per_second=s.max_evaluations_per_second,
            clock=self.clock,
        )
        self.conversations = ConversationStore(s.max_conversations, s.max_turns_per_conversation)
        self.active_traces: dict[int, None] = {}
        """Trace ids with kept spans: the hot path keeps any further span of these."""
        self.admission = AdmissionRate(s.max_traces_per_second, self.clock())
        self.rejected_traces: dict[int, None] = {}
        """Trace ids rejected on arrival, so their later spans are too (see ``admit``)."""
        self.rejected_earlier: dict[int, None] = {}
        self._queue: deque[_Job] = deque()
        self._lock = threading.Lock()
        self._work_ready = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._flush_requests: deque[threading.Event] = deque()
        self._busy_workers = 0
        self._workers: list[_Worker] = []
        self._abandoned = 0
        self._worker_numbers = 0
        self._stopping = False
        self._shutting_down = False
        self._started = False
        self._collector: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._collector = threading.Thread(target=self._collect, name="otel-agent-eval-collector", daemon=True)
        self._collector.start()
        with self._lock:
            for _ in range(self.settings.workers):
                self._spawn_worker()

    def flush(self, timeout: float | None = None) -> bool:
        """Complete every buffered trace now and wait until its evaluation is emitted."""
        if not self._started or self._stopping:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        done = threading.Event()
        self._flush_requests.append(done)
        self._wake.set()
        if not done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            return False
        with self._lock:
            while self._queue or self._busy_workers:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining if remaining is not None else TICK_SECONDS)
        return True

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Evaluate what is pending (within ``timeout``), then stop the threads.

        Whatever could not be evaluated in time (still buffered, in the intake, or
        queued) is counted as dropped with reason ``shutdown``, per trace.
        """
        if self._stopping:
            return True
        self._shutting_down = True
        flushed = self.flush(timeout)
        self._stopping = True
        self._wake.set()
        if self._collector is not None and self._collector is not threading.current_thread():
            self._collector.join(timeout=1.0)  # it enqueues nothing after this
        with self._lock:
            lost = len(self._queue)
            self._queue.clear()
            for worker in self._workers:  # jobs still being evaluated when the deadline passed
                if worker.job is not None and not worker.abandoned:
                    worker.abandoned = True  # its late results are discarded
                    lost += 1
            self._work_ready.notify_all()
        try:
            buffered = set(self.buffer.trace_ids())
            lost += len(buffered) + len({_trace_id_of(item) for item in list(self.intake)} - buffered)
        except RuntimeError:  # the collector outlived its join timeout and is still mutating
            lost += len(self.buffer)
        if lost:
            self.stats.dropped.inc("shutdown", amount=lost)
        return flushed

    @property
    def alive(self) -> bool:
        """True while the collector thread runs (health checks)."""
        return self._collector is not None and self._collector.is_alive() and not self._stopping

    # -- intake (any thread) ---------------------------------------------------
    def admit(self, trace_id: int) -> bool:
        """The first GenAI span of a trace not yet kept: keep its trace, or reject it for good. O(1).

        Rejected ids are remembered in two generations of ``max_buffered_traces x
        REJECTED_MEMORY`` ids each; a trace that outlives both is decided again by
        the same trace-id rule, which only disagrees if the ratio rose meanwhile.
        """
        if trace_id in self.rejected_traces or trace_id in self.rejected_earlier:
            return False
        if not self.admission.admits(trace_id):
            self.rejected_traces[trace_id] = None
            self.stats.traces_rejected.inc()
            return False
        self.active_traces[trace_id] = None
        self.stats.traces_admitted.inc()
        return True

    def offer(self, span: Any) -> None:
        """Hot-path intake of a finished span (SDK ReadableSpan or SpanRecord). O(1), never blocks."""
        if len(self.intake) >= self.settings.max_intake_spans:
            self.stats.intake_full.inc()
            return
        self.intake.append(span)
        self.stats.spans_kept.inc()

    def offer_log(self, log: LogRecordData) -> None:
        """Intake of a GenAI content log record (see ``logs.py``). O(1), never blocks."""
        if len(self.intake) >= self.settings.max_intake_spans:
            self.stats.intake_full.inc()
            return
        if log.trace_id is not None and log.trace_id not in self.active_traces and not self.admit(log.trace_id):
            return
        self.intake.append(log)
        self.stats.log_records_kept.inc()

    def offer_records(self, records: Sequence[SpanRecord]) -> None:
        """Intake for the server and offline runs: records not yet filtered by the hot-path rule."""
        for record in records:
            self.stats.spans_received.inc()
            if record.scope_name == OWN_SCOPE:
                continue  # our own evaluation spans, sent back by a collector
            if record.trace_id in self.active_traces or (is_genai(record.attributes) and self.admit(record.trace_id)):
                self.offer(record)

    def _count_drop(self, reason: str, spans: int) -> None:
        """TraceBuffer drops: late and oversize spans, or whole traces when full."""
        if reason == "late_span":
            self.stats.late_spans.inc()
        elif reason == "trace_too_large":
            self.stats.spans_dropped.inc(reason, amount=spans)
        else:
            self.stats.dropped.inc(reason)

    # -- collector thread ------------------------------------------------------
    def _collect(self) -> None:
        while not self._stopping:
            try:
                self._collect_once()
            except Exception:  # keep the pipeline alive; a bug here must not stop evaluation
                self.stats.processor_errors.inc()
                self.log_once("collector", "otel-agent-eval: error in the collector thread")
            self._wake.wait(TICK_SECONDS)
            self._wake.clear()

    def _collect_once(self) -> None:
        now = self.clock()
        flushes = []
        while self._flush_requests:
            flushes.append(self._flush_requests.popleft())
        self._drain_intake(now)
        if flushes:
            completed = self.buffer.pop_all(SHUTDOWN if self._shutting_down else FLUSH)
        else:
            completed = self.buffer.pop_complete(now)
        for trace in completed:
            self.active_traces.pop(trace.trace_id, None)
            self._on_completed(trace)
        self._watch_workers()
        self._adapt_admission(now)
        if len(self.active_traces) > 2 * self.settings.max_buffered_traces:
            # Evicted traces leave ids behind; rebuild from what is still buffered.
            self.active_traces = dict.fromkeys(t for t in list(self.active_traces) if t in self.buffer)
        self.stats.buffered_traces = len(self.buffer)
        self.stats.buffered_bytes = self.buffer.bytes
        self.stats.queue_depth = len(self._queue)
        for done in flushes:
            done.set()

    def _adapt_admission(self, now: float) -> None:
        stats = self.stats
        self.admission.update(stats.traces_admitted.value + stats.traces_rejected.value, now)
        stats.admission_ratio = self.admission.ratio
        if len(self.rejected_traces) >= REJECTED_MEMORY * self.settings.max_buffered_traces:
            self.rejected_earlier, self.rejected_traces = self.rejected_traces, {}

    def _drain_intake(self, now: float) -> None:
        intake = self.intake
        while intake:
            span = intake.popleft()
            if isinstance(span, LogRecordData):
                self.buffer.add_log(span, now)
                continue
            try:
                if isinstance(span, SpanRecord):
                    self.buffer.add(span, span.trace_id, span.is_local_root, now)
                else:
                    parent = span.parent
                    self.buffer.add(span, span.context.trace_id, parent is None or parent.is_remote, now)
            except Exception:
                self.stats.processor_errors.inc()
                self.log_once("record", "otel-agent-eval: could not read a span")

    def _records(self, spans: list[Any]) -> list[SpanRecord]:
        """SDK spans become SpanRecords here, once their trace is complete."""
        records = []
        for span in spans:
            if isinstance(span, SpanRecord):
                records.append(span)
                continue
            try:
                records.append(from_readable_span(span, content=is_genai(raw_attributes(span))))
            except Exception:
                self.stats.processor_errors.inc()
                self.log_once("record", "otel-agent-eval: could not read a span")
        return records

    def _on_completed(self, completed: CompletedTrace) -> None:
        self.stats.traces_completed.inc(completed.reason)
        try:
            runs = assemble(join_log_records(self._records(completed.spans), completed.logs))
            if self.settings.max_conversations:
                runs = [self.conversations.attach(run) for run in runs]
            agent_traces = flatten(runs)
        except Exception:
            self.stats.processor_errors.inc()
            self.stats.dropped.inc("assembly_error")
            self.log_once("assemble", "otel-agent-eval: assembly failed for trace %032x", completed.trace_id)
            return
        if not agent_traces:
            self.stats.dropped.inc("no_agent")
            return
        for trace in agent_traces:
            self.stats.agent_traces.inc(*self.run_labels(trace))
            decision = self.sampler.decide(trace)
            self.stats.sampling.inc("sampled" if decision.sampled else "not_sampled", decision.reason)
            if decision.sampled:
                self._enqueue(_Job(trace))

    def _enqueue(self, job: _Job, front: bool = False) -> None:
        with self._lock:
            if front:
                self._queue.appendleft(job)
            else:
                if len(self._queue) >= self.settings.max_queued_evaluations:
                    self._queue.popleft()
                    self.stats.dropped.inc("queue_full")
                self._queue.append(job)
            self._work_ready.notify()

    def _watch_workers(self) -> None:
        now = time.monotonic()
        timeout = self.settings.evaluator_timeout_seconds
        with self._lock:
            for worker in list(self._workers):
                current = worker.current
                if current is None or now - current[2] < timeout:
                    continue
                job, index, _ = current
                evaluator = self.evaluators[index]
                worker.abandoned = True
                worker.current = None
                worker.job = None  # goes back to the queue below
                self._workers.remove(worker)
                self._busy_workers -= 1
                self._abandoned += 1
                self.stats.evaluator_errors.inc(evaluator.name, "timeout")
                job.results.extend(
                    [evaluator.error(job.trace, f"{evaluator.name} ran longer than {timeout:g}s; abandoned", "timeout")]
                )
                job.durations[evaluator.name] = now - current[2]
                job.next_index = index + 1
                self._queue.appendleft(job)
                if self._abandoned > MAX_ABANDONED_WORKERS:
                    self.log_once("abandoned", "otel-agent-eval: %d evaluator threads are stuck", self._abandoned)
                self._spawn_worker()
                self._work_ready.notify()

    def _spawn_worker(self) -> None:
        self._worker_numbers += 1
        worker = _Worker(self, self._worker_numbers)
        self._workers.append(worker)
        worker.thread.start()

    # -- worker threads --------------------------------------------------------
    def _work(self, worker: _Worker) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stopping and not worker.abandoned:
                    self._work_ready.wait()
                if self._stopping or worker.abandoned:
                    return
                job = worker.job = self._queue.popleft()
                self._busy_workers += 1
                self.stats.queue_depth = len(self._queue)
            self._run_job(worker, job)
            with self._lock:
                if worker.abandoned:
                    return
                self._busy_workers -= 1
                self._idle.notify_all()

    def _run_job(self, worker: _Worker, job: _Job) -> None:
        while job.next_index < len(self.evaluators):
            index = job.next_index
            evaluator = self.evaluators[index]
            started = time.monotonic()
            with self._lock:
                if worker.abandoned:
                    return
                worker.current = (job, index, started)
            results = self._evaluate_one(evaluator, job.trace)
            with self._lock:
                if worker.abandoned:
                    return  # the watchdog already reported a timeout for this evaluator
                worker.current = None
                job.results.extend(results)
                job.durations[evaluator.name] = time.monotonic() - started
                job.next_index = index + 1
        with self._lock:
            if worker.abandoned:
                return  # shutdown gave up on this job and counted it
            worker.job = None  # from here on the job is emitted, not lost
        self._emit(job)

    def _evaluate_one(self, evaluator: Evaluator, trace: AgentTrace) -> list[EvalResult]:
        results, failed = safe_evaluate(evaluator, trace)
        if failed:
            self.stats.evaluator_errors.inc(evaluator.name, "exception")
        return results

    def _emit(self, job: _Job) -> None:
        evaluated = EvaluatedTrace(job.trace, job.results, job.durations, job.started_ns, time.time_ns())
        self.stats.traces_evaluated.inc(*self.run_labels(job.trace))
        for sink in self.sinks:
            try:
                sink.emit(evaluated)
            except Exception:
                self.stats.sink_errors.inc(sink.name)
                self.log_once(f"sink-{sink.name}", "otel-agent-eval: sink %s failed", sink.name)

    # -- fork ------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """Threads do not survive fork(): start afresh in the child with empty state."""
        was_started = self._started and not self._stopping
        self._init_state()
        if was_started:
            self.start()


def _register_fork_handler(pipeline: Pipeline) -> None:
    import os

    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.WeakMethod(pipeline._after_fork_in_child)

    def after_in_child() -> None:
        method = ref()
        if method is not None:
            method()

    os.register_at_fork(after_in_child=after_in_child)
