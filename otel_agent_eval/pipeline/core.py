"""The background half of the product: intake -> buffer -> completion -> sampling -> stages -> sinks.

One *collector* thread drains the intake into the ``TraceBuffer``, completes
traces (``completion.py``: assemble, flatten), samples the runs and submits them
to the evaluation stages (``workers.py``), whose watchdog it also runs. Its own
state (buffer, sampler) has no lock: it is the only thread that touches it.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..evaluators.base import Evaluator
from ..intake.admission import Intake
from ..model import AgentTrace
from ..records import LogRecordData, SpanRecord
from ..sinks import Sink
from .buffer import FLUSH, SHUTDOWN, CompletedTrace, TraceBuffer
from .completion import runs_of
from .conversations import ConversationStore
from .sampling import Sampler
from .stats import LogOnce, PipelineStats, RunLabels
from .workers import TICK_SECONDS, Stages

if TYPE_CHECKING:
    from ..evaluators.judge.settings import JudgeSettings

PUBLISH_SECONDS = 1.0


def _judge_settings_of(evaluators: Sequence[Evaluator]) -> JudgeSettings:
    """The judge client's settings of the first judge evaluator that has one, else the defaults."""
    from ..evaluators.judge.settings import JudgeSettings

    for evaluator in evaluators:
        settings = getattr(getattr(evaluator, "judge", None), "settings", None)
        if isinstance(settings, JudgeSettings):
            return settings
    return JudgeSettings()


def _trace_id_of(item: Any) -> int | None:
    """Trace id of an intake item: SpanRecord, LogRecordData or SDK ReadableSpan."""
    trace_id = getattr(item, "trace_id", None)
    return trace_id if trace_id is not None else item.context.trace_id


class Pipeline:
    """Owns the intake, the buffer, the stages and the threads. Start with ``start()``.

    ``judge_settings`` sizes the judge stage (``concurrency`` workers,
    ``max_queued`` runs, ``sample_rate``); by default, those of the judge
    evaluators' client.

    Contracts (the SDK's ``BatchProcessor``'s): ``flush`` returns False once
    stopped; ``shutdown`` is idempotent and returns at once the second time;
    after it, everything offered is dropped and counted (``already_shutdown``)
    and nothing is retained; after ``fork`` the child gets fresh locks, events,
    queues, counters and threads (``_after_fork_in_child``).
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
        publish: Sequence[Callable[[], None]] = (),
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
        self.publish = list(publish)
        """Write state out of the process (prometheus-client's multiprocess files): about every
        ``PUBLISH_SECONDS`` on the collector thread, after each flush, and at shutdown."""
        self.log_once = LogOnce()
        self._init_state()
        at_fork_in_child(self._after_fork_in_child)

    def _init_state(self) -> None:
        s = self.settings
        self.intake = Intake(s, self.stats, self.clock)
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
        self.conversations = ConversationStore(s.max_conversations, s.max_turns_per_conversation) \
            if s.max_conversations else None
        self.stages = Stages(self.evaluators, workers=s.workers, max_queued=s.max_queued_evaluations,
                             timeout=s.evaluator_timeout_seconds, judge_settings=self.judge_settings, sinks=self.sinks,
                             stats=self.stats, run_labels=self.run_labels, log_once=self.log_once)
        self._queue = self.stages.deterministic.queue
        self._wake = threading.Event()
        self._flush_requests: deque[threading.Event] = deque()
        self._stopping = False
        self._shutting_down = False
        self._started = False
        self._collector: threading.Thread | None = None
        self._published_at = self.clock()

    def internal_error(self, kind: str, message: str, *args: object) -> None:
        """A bug of ours on some thread: counted (``processor_errors``), logged once per kind, never raised."""
        self.stats.processor_errors.inc()
        self.log_once(kind, message, *args)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._collector = threading.Thread(target=self._collect, name="otel-agent-eval-collector", daemon=True)
        self._collector.start()
        self.stages.start()

    @property
    def stopped(self) -> bool:
        return self._stopping

    def flush(self, timeout: float | None = None) -> bool:
        """Complete every buffered trace now and wait until its evaluation is emitted.

        True when everything was emitted within ``timeout`` seconds; False once stopped
        (nothing can be flushed any more) or when the timeout passes first.
        """
        if self._stopping:
            return False
        if not self._started:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        done = threading.Event()
        self._flush_requests.append(done)
        self._wake.set()
        if not done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            return False
        idle = self.stages.wait_idle(deadline)
        self._publish()
        return idle

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Evaluate what is pending (within ``timeout`` seconds), then stop the threads. Idempotent.

        The drain completes every buffered trace and feeds its runs to the
        evaluation queue at the pace the workers take them (never dropping for
        ``queue_full``), with the evaluation rate cap lifted (``Sampler.decide``).
        Whatever could not be evaluated in time (still buffered, in the intake,
        completed but not yet queued, or queued) is counted as dropped with reason
        ``shutdown``: per trace before assembly, per run after; judge evaluations
        queued, running, or not fitting the judge queue as ``judge_shutdown``, per run.
        From then on the intake drops (and counts) everything it is offered. A second
        call returns False at once.
        """
        if self._shutting_down:
            return True
        self._shutting_down = True
        flushed = self.flush(timeout) if self._started else True
        self._stopping = self.stages.stopping = True
        self.intake.stop()  # from here on, offers are dropped and counted
        self._wake.set()
        if self._collector is not None and self._collector is not threading.current_thread():
            self._collector.join(timeout=1.0)  # it enqueues nothing after this
        lost, judge_lost = self.stages.stop()
        if judge_lost:
            self.stats.dropped.inc(self.stages.judge.shutdown, amount=judge_lost)
        try:
            buffered = set(self.buffer.trace_ids())
            lost += len(buffered) + len({_trace_id_of(item) for item in list(self.intake.queue)} - buffered)
            self.buffer.pop_all(SHUTDOWN)  # nothing is retained
        except RuntimeError:  # the collector outlived its join timeout and is still mutating
            lost += len(self.buffer)
        self.intake.release()
        if lost:
            self.stats.dropped.inc("shutdown", amount=lost)
        self._publish()
        return flushed

    @property
    def alive(self) -> bool:
        """True while the collector thread runs (health checks)."""
        return self._collector is not None and self._collector.is_alive() and not self._stopping

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
            except Exception:  # noqa: BLE001 - keep the pipeline alive; a bug here must not stop evaluation
                self.internal_error("collector", "otel-agent-eval: error in the collector thread")
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
            self.intake.completed(trace.trace_id)
            self._on_completed(trace, draining=draining)
        self.stages.watch()
        self.intake.tick(now, self.buffer.__contains__)
        self.stats.buffered_traces = len(self.buffer)
        self.stats.buffered_bytes = self.buffer.bytes
        self.stages.publish_depths()
        if now - self._published_at >= PUBLISH_SECONDS:
            self._publish()
        for done in flushes:
            done.set()

    def _publish(self) -> None:
        self._published_at = self.clock()
        for publish in self.publish:
            try:
                publish()
            except Exception:  # noqa: BLE001 - a full disk must not stop evaluation
                self.internal_error("publish", "otel-agent-eval: could not publish the metrics")

    def _drain_intake(self, now: float) -> None:
        queue = self.intake.queue
        while queue:
            item = queue.popleft()
            if isinstance(item, LogRecordData):
                self.buffer.add_log(item, now)
                continue
            try:
                if isinstance(item, SpanRecord):
                    self.buffer.add(item, item.trace_id, item.is_local_root, now)
                else:
                    parent = item.parent
                    self.buffer.add(item, item.context.trace_id, parent is None or parent.is_remote, now)
            except Exception:  # noqa: BLE001 - one unreadable span is counted, the others go on
                self.internal_error("record", "otel-agent-eval: could not read a span")

    def _on_completed(self, completed: CompletedTrace, *, draining: bool = False) -> None:
        """Complete, sample, submit. ``draining``: no rate cap, and wait for room in the queue instead of dropping."""
        self.stats.traces_completed.inc(completed.reason)
        try:
            runs = runs_of(completed, self.conversations,
                           lambda: self.internal_error("record", "otel-agent-eval: could not read a span"))
        except Exception:  # noqa: BLE001 - a trace assembly cannot read is dropped and counted
            self.stats.dropped.inc("assembly_error")
            self.internal_error("assemble", "otel-agent-eval: assembly failed for trace %032x", completed.trace_id)
            return
        if not runs:
            self.stats.dropped.inc("no_agent")
            return
        for run in runs:
            self.stats.agent_traces.inc(*self.run_labels(run))
            if run.attributes_dropped:
                self.stats.span_limit_dropped.inc("attributes", amount=run.attributes_dropped)
            if run.events_dropped:
                self.stats.span_limit_dropped.inc("events", amount=run.events_dropped)
            if run.values_cut_short:
                self.stats.span_limit_dropped.inc("values_cut_short", amount=run.values_cut_short)
            decision = self.sampler.decide(run, rate_limit=not draining)
            self.stats.sampling.inc("sampled" if decision.sampled else "not_sampled", decision.reason)
            if decision.sampled:
                self.stages.submit(run, draining=draining)

    # -- fork ------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """Threads do not survive fork(), and a lock a parent thread held stays held in the child: the child
        starts afresh, with new counters, labels, locks, events, queues and threads (and no buffered traces,
        which stay with the parent). A pipeline stopped in the parent stays stopped."""
        was_started = self._started and not self._stopping
        was_stopped = self._stopping
        self.stats.after_fork()
        if isinstance(self.run_labels, RunLabels):
            self.run_labels.after_fork()
        self.log_once = LogOnce()
        self._init_state()
        if was_stopped:
            self._shutting_down = self._stopping = self.stages.stopping = True
            self.intake.stop()
        elif was_started:
            self.start()


def at_fork_in_child(method: Callable[[], None]) -> None:
    """Call a bound ``method`` in the child after ``os.fork()``, for as long as its object lives (weakly held)."""
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.WeakMethod(method)  # type: ignore[arg-type]

    def after_in_child() -> None:
        bound = ref()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=after_in_child)
