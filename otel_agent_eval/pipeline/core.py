"""The background half of the product: buffer -> assemble -> sample -> evaluate -> sinks.

Threads: one *collector* thread drains the span intake into the TraceBuffer,
completes traces, assembles and samples them, and watches the workers. Two
*stages* evaluate a sampled run, each with its own bounded queue, worker pool
and drop reasons, so a slow or failing judge never holds back the rest:

- ``deterministic``: ``workers`` threads run the evaluators that need no judge
  and emit their results at once (the run's first evaluation span);
- ``judge``: judge-concurrency threads run the ``needs_judge`` evaluators of the
  runs the judge sample rate picks, and emit a second evaluation span.

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
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..assembly import assemble
from .buffer import FLUSH, SHUTDOWN, CompletedTrace, TraceBuffer
from ..config import Settings
from .conversations import ConversationStore
from ..assembly.dialects import is_genai
from ..evaluators.base import Evaluator, safe_evaluate
from ..isolation import is_evaluator_telemetry
from ..model import AgentTrace, EvalResult
from ..intake.logs import join_log_records
from ..records import OWN_SCOPE, LogRecordData, SpanRecord, from_readable_span, raw_attributes
from .sampling import AdmissionRate, Sampler, trace_id_sampled
from .stats import LabelledCounts, LogOnce, PipelineStats, RunLabels
from ..intake.waiting import NOT_ADMITTED, WaitingSpans

if TYPE_CHECKING:
    from ..evaluators.judge.settings import JudgeSettings

_logger = logging.getLogger("otel_agent_eval")

TICK_SECONDS = 0.1
MAX_ABANDONED_WORKERS = 8
REJECTED_MEMORY = 10
"""Rejected trace ids remembered per generation, in multiples of ``max_buffered_traces``."""


Phase = Literal["deterministic", "judge"]


@dataclass
class EvaluatedTrace:
    """What sinks receive: one agent trace, one phase's results, and how long each evaluator took.

    A run is emitted once per phase: ``deterministic`` as soon as those
    evaluators are done, ``judge`` when the judge evaluators are (if sampled).
    """

    trace: AgentTrace
    results: list[EvalResult]
    durations: dict[str, float]
    started_ns: int
    ended_ns: int
    phase: Phase = "deterministic"


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


class _Stage:
    """One queue and its worker pool: the evaluators of a phase, with their own bounds and drop reasons."""

    def __init__(self, phase: Phase, evaluators: list[Evaluator], workers: int, max_queued: int,
                 lock: threading.Lock, drop_prefix: str) -> None:
        self.phase = phase
        self.evaluators = evaluators
        self.size = workers
        self.max_queued = max_queued
        self.queue_full = f"{drop_prefix}queue_full"
        self.shutdown = f"{drop_prefix}shutdown"
        self.queue: deque[_Job] = deque()
        self.work_ready = threading.Condition(lock)
        self.room = threading.Condition(lock)
        """Notified when a worker takes a job: a draining collector waits on it instead of dropping."""
        self.workers: list[_Worker] = []
        self.busy = 0


class _Worker:
    def __init__(self, pipeline: Pipeline, stage: _Stage, number: int) -> None:
        self.pipeline = pipeline
        self.stage = stage
        self.abandoned = False
        self.job: _Job | None = None
        """The job this worker holds until it hands the results to the sinks."""
        self.current: tuple[_Job, int, float] | None = None
        prefix = "judge-" if stage.phase == "judge" else ""
        self.thread = threading.Thread(target=pipeline._work, args=(self,), name=f"otel-agent-eval-{prefix}worker-{number}", daemon=True)


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


def _judge_settings_of(evaluators: Sequence[Evaluator]) -> JudgeSettings:
    """The judge client's settings of the first judge evaluator that has one, else the defaults."""
    from ..evaluators.judge.settings import JudgeSettings

    for evaluator in evaluators:
        settings = getattr(getattr(evaluator, "judge", None), "settings", None)
        if isinstance(settings, JudgeSettings):
            return settings
    return JudgeSettings()


class Pipeline:
    """Owns the intake, the buffer, the stages' queues and the threads. Start with ``start()``.

    ``judge_settings`` sizes the judge stage (``concurrency`` workers,
    ``max_queued`` runs, ``sample_rate``); by default, those of the judge
    evaluators' client.
    """

    def __init__(
        self,
        settings: Settings,
        evaluators: Sequence[Evaluator],
        sinks: Sequence[Sink] = (),
        *,
        stats: PipelineStats | None = None,
        run_labels: Callable[[AgentTrace], tuple[str, str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        judge_settings: JudgeSettings | None = None,
    ) -> None:
        self.settings = settings
        self.evaluators = list(evaluators)
        judging = [e for e in self.evaluators if e.needs_judge]
        self.judge_settings = judge_settings if judge_settings is not None or not judging else _judge_settings_of(judging)
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
        self.waiting = WaitingSpans(s.wait_for_trace_seconds, s.max_waiting_spans, s.max_waiting_bytes,
                                    on_leave=lambda outcome, n: self.stats.waiting_spans.inc(outcome, amount=n))
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stage = _Stage("deterministic", [e for e in self.evaluators if not e.needs_judge], s.workers,
                             s.max_queued_evaluations, self._lock, "")
        judge = self.judge_settings
        self._judge_stage = _Stage("judge", [e for e in self.evaluators if e.needs_judge],
                                   judge.concurrency if judge else 1, judge.max_queued if judge else 1, self._lock, "judge_")
        self._stages = (self._stage, self._judge_stage)
        self._queue = self._stage.queue
        self._wake = threading.Event()
        self._flush_requests: deque[threading.Event] = deque()
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
            for stage in self._stages:
                for _ in range(stage.size if stage.evaluators else 0):
                    self._spawn_worker(stage)

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
            while any(stage.queue or stage.busy for stage in self._stages):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining if remaining is not None else TICK_SECONDS)
        return True

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Evaluate what is pending (within ``timeout``), then stop the threads.

        The drain completes every buffered trace and feeds its runs to the
        evaluation queue at the pace the workers take them (never dropping for
        ``queue_full``), with the evaluation rate cap lifted (``Sampler.decide``).
        Whatever could not be evaluated in time (still buffered, in the intake,
        completed but not yet queued, or queued) is counted as dropped with reason
        ``shutdown``: per trace before assembly, per run after; judge evaluations
        queued, running, or not fitting the judge queue as ``judge_shutdown``, per run.
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
            lost_by_stage = [self._abandon_stage(stage) for stage in self._stages]
        if lost_by_stage[1]:
            self.stats.dropped.inc(self._judge_stage.shutdown, amount=lost_by_stage[1])
        lost = lost_by_stage[0]
        try:
            buffered = set(self.buffer.trace_ids())
            lost += len(buffered) + len({_trace_id_of(item) for item in list(self.intake)} - buffered)
        except RuntimeError:  # the collector outlived its join timeout and is still mutating
            lost += len(self.buffer)
        if lost:
            self.stats.dropped.inc("shutdown", amount=lost)
        return flushed

    def _abandon_stage(self, stage: _Stage) -> int:
        """Under the lock: clear a stage's queue and abandon its busy workers; how many runs were lost."""
        lost = len(stage.queue)
        stage.queue.clear()
        stage.room.notify_all()  # a draining collector waiting for room gives up and counts what is left
        for worker in stage.workers:  # jobs still being evaluated when the deadline passed
            if worker.job is not None and not worker.abandoned:
                worker.abandoned = True  # its late results are discarded
                lost += 1
        stage.work_ready.notify_all()
        return lost

    @property
    def alive(self) -> bool:
        """True while the collector thread runs (health checks)."""
        return self._collector is not None and self._collector.is_alive() and not self._stopping

    # -- intake (any thread) ---------------------------------------------------
    def admit(self, trace_id: int, *, log: bool = False) -> bool:
        """The first GenAI span (or ``log`` record) of a trace not yet kept: keep its trace, or reject it. O(1).

        Rejected ids are remembered in two generations of ``max_buffered_traces x
        REJECTED_MEMORY`` ids each; a trace that outlives both is decided again by
        the same trace-id rule, which only disagrees if the ratio rose meanwhile.
        Evaluator-made telemetry (``isolation.py``) is dropped here, item by item.
        """
        if trace_id in self.rejected_traces or trace_id in self.rejected_earlier:
            return False
        if is_evaluator_telemetry(trace_id):
            (self.stats.log_records_dropped if log else self.stats.spans_dropped).inc("evaluator_telemetry")
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
        if self._stopping:  # shutdown has counted what it left; nothing will read this any more
            self.stats.spans_dropped.inc("shutdown")
            return
        self.intake.append(span)
        self.stats.spans_kept.inc()

    def offer_log(self, log: LogRecordData) -> None:
        """Intake of a GenAI content log record (see ``logs.py``). O(1), never blocks."""
        if len(self.intake) >= self.settings.max_intake_spans:
            self.stats.intake_full.inc()
            return
        if self._stopping:
            self.stats.log_records_dropped.inc("shutdown")
            return
        if log.trace_id is not None and log.trace_id not in self.active_traces:
            if not self._admit_with_waiting(log.trace_id, log=True):
                return
        self.intake.append(log)
        self.stats.log_records_kept.inc()

    def offer_records(self, records: Sequence[SpanRecord]) -> None:
        """Intake for the server and offline runs: records not yet filtered by the hot-path rule.

        A non-GenAI span of a trace not yet known waits (``WaitingSpans``) for a
        GenAI span of its trace, since batches over the wire arrive in any order.
        """
        waiting = self.waiting.enabled
        now = self.clock() if waiting else 0.0
        for record in records:
            self.stats.spans_received.inc()
            trace_id = record.trace_id
            if record.scope_name == OWN_SCOPE:
                continue  # our own evaluation spans, sent back by a collector
            if trace_id in self.active_traces:
                self.offer(record)
            elif is_genai(record.attributes):
                if self._admit_with_waiting(trace_id):
                    self.offer(record)
            elif waiting and trace_id not in self.rejected_traces and trace_id not in self.rejected_earlier:
                self.waiting.add(record, now)

    def _admit_with_waiting(self, trace_id: int, *, log: bool = False) -> bool:
        """``admit``, then adopt (or let go) the trace's spans that waited for it."""
        if self.admit(trace_id, log=log):
            for record in self.waiting.take(trace_id):
                self.offer(record)
            return True
        self.waiting.take(trace_id, NOT_ADMITTED)
        return False

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
        draining = bool(flushes) and self._shutting_down
        if flushes:
            completed = self.buffer.pop_all(SHUTDOWN if draining else FLUSH)
        else:
            completed = self.buffer.pop_complete(now)
        for index, trace in enumerate(completed):
            if self._stopping:  # the drain deadline passed while these waited for room
                self.stats.dropped.inc("shutdown", amount=len(completed) - index)
                break
            self.active_traces.pop(trace.trace_id, None)
            self._on_completed(trace, draining=draining)
        if self.waiting.spans:
            self.waiting.expire(now)
        self._watch_workers()
        self._adapt_admission(now)
        if len(self.active_traces) > 2 * self.settings.max_buffered_traces:
            # Evicted traces leave ids behind; rebuild from what is still buffered.
            self.active_traces = dict.fromkeys(t for t in list(self.active_traces) if t in self.buffer)
        self.stats.buffered_traces = len(self.buffer)
        self.stats.buffered_bytes = self.buffer.bytes
        self._publish_depths()
        for done in flushes:
            done.set()

    def _publish_depths(self) -> None:
        self.stats.queue_depth = len(self._stage.queue)
        self.stats.judge_queue_depth = len(self._judge_stage.queue)

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

    def _on_completed(self, completed: CompletedTrace, *, draining: bool = False) -> None:
        """Assemble, sample, queue. ``draining``: no rate cap, and wait for room in the queue instead of dropping."""
        self.stats.traces_completed.inc(completed.reason)
        try:
            runs = assemble(join_log_records(self._records(completed.spans), completed.logs))
            if self.settings.max_conversations:
                runs = [self.conversations.attach(run) for run in runs]
            agent_traces = flatten(runs)
            for run in agent_traces if completed.dropped else ():
                run.spans_dropped = completed.dropped  # the judge is told, and skips what it cannot see
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
            decision = self.sampler.decide(trace, rate_limit=not draining)
            self.stats.sampling.inc("sampled" if decision.sampled else "not_sampled", decision.reason)
            if not decision.sampled:
                continue
            if self._stage.evaluators:
                self._enqueue(self._stage, _Job(trace), draining=draining)
            else:
                self.stats.traces_evaluated.inc(*self.run_labels(trace))  # nothing deterministic to run: that phase is done
            if self._judge_stage.evaluators and self.judge_settings is not None:
                judged = trace_id_sampled(int(trace.trace_id, 16), self.judge_settings.sample_rate)
                self.stats.judge_sampling.inc("sampled" if judged else "not_sampled")
                if judged:
                    self._enqueue(self._judge_stage, _Job(trace), draining=draining)

    def _enqueue(self, stage: _Stage, job: _Job, *, draining: bool = False) -> None:
        """Queue a run; when full, drop the oldest (``queue_full``).

        While draining, the deterministic stage waits for room (the workers set
        the pace; the drain deadline ends the wait, and the run counts as
        ``shutdown``); the judge stage, far slower, does not hold the drain back:
        a run that does not fit counts as ``judge_shutdown``.
        """
        with self._lock:
            if draining and len(stage.queue) >= stage.max_queued:
                if stage is self._judge_stage:
                    self.stats.dropped.inc(stage.shutdown)
                    return
                while len(stage.queue) >= stage.max_queued and not self._stopping:
                    stage.room.wait(TICK_SECONDS)
                    self._watch_workers_locked()  # a hung evaluator must not stall the drain
                if self._stopping:
                    self.stats.dropped.inc(stage.shutdown)
                    return
            elif len(stage.queue) >= stage.max_queued:
                stage.queue.popleft()
                self.stats.dropped.inc(stage.queue_full)
            stage.queue.append(job)
            stage.work_ready.notify()

    def _watch_workers(self) -> None:
        with self._lock:
            self._watch_workers_locked()

    def _watch_workers_locked(self) -> None:
        now = time.monotonic()
        timeout = self.settings.evaluator_timeout_seconds
        for stage in self._stages:
            for worker in list(stage.workers):
                current = worker.current
                if current is not None and now - current[2] >= timeout:
                    self._replace_stuck(stage, worker, current, now, timeout)

    def _replace_stuck(self, stage: _Stage, worker: _Worker, current: tuple[_Job, int, float], now: float,
                       timeout: float) -> None:
        """Under the lock: time out the evaluator, requeue its job at the front, start a fresh worker."""
        job, index, _ = current
        evaluator = stage.evaluators[index]
        worker.abandoned = True
        worker.current = None
        worker.job = None  # goes back to the queue below
        stage.workers.remove(worker)
        stage.busy -= 1
        self._abandoned += 1
        self.stats.evaluator_errors.inc(evaluator.name, "timeout")
        job.results.append(evaluator.error(job.trace, f"{evaluator.name} ran longer than {timeout:g}s; abandoned", "timeout"))
        job.durations[evaluator.name] = now - current[2]
        job.next_index = index + 1
        stage.queue.appendleft(job)
        if self._abandoned > MAX_ABANDONED_WORKERS:
            self.log_once("abandoned", "otel-agent-eval: %d evaluator threads are stuck", self._abandoned)
        self._spawn_worker(stage)
        stage.work_ready.notify()

    def _spawn_worker(self, stage: _Stage) -> None:
        self._worker_numbers += 1
        worker = _Worker(self, stage, self._worker_numbers)
        stage.workers.append(worker)
        worker.thread.start()

    # -- worker threads --------------------------------------------------------
    def _work(self, worker: _Worker) -> None:
        stage = worker.stage
        while True:
            with self._lock:
                while not stage.queue and not self._stopping and not worker.abandoned:
                    stage.work_ready.wait()
                if self._stopping or worker.abandoned:
                    return
                job = worker.job = stage.queue.popleft()
                stage.room.notify()
                stage.busy += 1
                self._publish_depths()
            self._run_job(worker, job)
            with self._lock:
                if worker.abandoned:
                    return
                stage.busy -= 1
                self._idle.notify_all()

    def _run_job(self, worker: _Worker, job: _Job) -> None:
        evaluators = worker.stage.evaluators
        while job.next_index < len(evaluators):
            index = job.next_index
            evaluator = evaluators[index]
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
        self._emit(job, worker.stage.phase)

    def _evaluate_one(self, evaluator: Evaluator, trace: AgentTrace) -> list[EvalResult]:
        results, failed = safe_evaluate(evaluator, trace)
        if failed:
            self.stats.evaluator_errors.inc(evaluator.name, "exception")
        return results

    def _emit(self, job: _Job, phase: Phase) -> None:
        evaluated = EvaluatedTrace(job.trace, job.results, job.durations, job.started_ns, time.time_ns(), phase)
        counts: LabelledCounts = self.stats.traces_evaluated if phase == "deterministic" else self.stats.traces_judged
        counts.inc(*self.run_labels(job.trace))
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
