"""The evaluation stages: bounded queues, worker threads, the watchdog, and the hand-over to the sinks.

Two stages evaluate a sampled run, each with its own bounded queue, worker pool
and drop reasons, so a slow or failing judge never holds back the rest:

- ``deterministic``: ``workers`` threads run the evaluators that need no judge
  and emit their results at once (the run's first evaluation span);
- ``judge``: judge-concurrency threads run the ``needs_judge`` evaluators of the
  runs the judge sample rate picks, and emit a second evaluation span.

A hung evaluator cannot be killed in Python, so the collector thread calls
``watch()``: when an evaluator runs past its timeout, its job gets an ``error``
result (reason ``timeout``), goes back to the front of the queue for the
remaining evaluators, the stuck worker is abandoned (its late results are
discarded) and a fresh worker takes its place.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..evaluators.base import Evaluator, run_scope, safe_evaluate
from ..evaluators.view import RunView
from ..model import AgentTrace, EvalResult, EvaluatedTrace, Phase
from ..sinks import Sink
from .sampling import trace_id_sampled
from .stats import LabelledCounts, LogOnce, PipelineStats

if TYPE_CHECKING:
    from ..evaluators.judge.settings import JudgeSettings

TICK_SECONDS = 0.1
MAX_ABANDONED_WORKERS = 8
EMIT_GRACE_SECONDS = 1.0
"""How long ``stop`` waits for runs being handed to the sinks (a sink that blocks is a bug: bounded anyway)."""


@dataclass
class Job:
    trace: AgentTrace
    next_index: int = 0
    results: list[EvalResult] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    started_ns: int = field(default_factory=time.time_ns)


class Stage:
    """One queue and its worker pool: the evaluators of a phase, with their own bounds and drop reasons."""

    def __init__(self, phase: Phase, evaluators: list[Evaluator], workers: int, max_queued: int,
                 lock: threading.Lock, drop_prefix: str) -> None:
        self.phase = phase
        self.evaluators = evaluators
        self.size = workers
        self.max_queued = max_queued
        self.queue_full = f"{drop_prefix}queue_full"
        self.shutdown = f"{drop_prefix}shutdown"
        self.queue: deque[Job] = deque()
        self.work_ready = threading.Condition(lock)
        self.room = threading.Condition(lock)
        """Notified when a worker takes a job: a draining collector waits on it instead of dropping."""
        self.workers: list[Worker] = []
        self.busy = 0


class Worker:
    def __init__(self, stages: Stages, stage: Stage, number: int) -> None:
        self.stage = stage
        self.abandoned = False
        self.job: Job | None = None
        """The job this worker holds until it hands the results to the sinks."""
        self.current: tuple[Job, int, float] | None = None
        prefix = "judge-" if stage.phase == "judge" else ""
        self.thread = threading.Thread(target=stages._work, args=(self,), name=f"otel-agent-eval-{prefix}worker-{number}",
                                       daemon=True)


class Stages:
    """Both stages under one lock, their workers, the watchdog and the sinks. Built afresh after fork."""

    def __init__(self, evaluators: Sequence[Evaluator], *, workers: int, max_queued: int, timeout: float,
                 judge_settings: JudgeSettings | None, sinks: list[Sink], stats: PipelineStats,
                 run_labels: Callable[[AgentTrace], tuple[str, str]], log_once: LogOnce) -> None:
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.deterministic = Stage("deterministic", [e for e in evaluators if not e.needs_judge], workers, max_queued,
                                   self.lock, "")
        judge = judge_settings
        self.judge = Stage("judge", [e for e in evaluators if e.needs_judge],
                           judge.concurrency if judge else 1, judge.max_queued if judge else 1, self.lock, "judge_")
        self.judge_settings = judge
        self.all = (self.deterministic, self.judge)
        self.timeout = timeout
        self.sinks = sinks  # the pipeline's own list: a sink added to it later is used too
        self.stats = stats
        self.run_labels = run_labels
        self.log_once = log_once
        self.stopping = False
        self.emitting = 0
        """Runs evaluated and being handed to the sinks: neither lost nor counted evaluated yet."""
        self._abandoned = 0
        self._worker_numbers = 0

    def start(self) -> None:
        with self.lock:
            for stage in self.all:
                for _ in range(stage.size if stage.evaluators else 0):
                    self._spawn_worker(stage)

    # -- collector thread --------------------------------------------------------------------
    def submit(self, trace: AgentTrace, *, draining: bool = False) -> None:
        """A sampled run: a job for the deterministic stage, and one for the judge if its sample rate picks the trace."""
        if self.deterministic.evaluators:
            self._enqueue(self.deterministic, Job(trace), draining=draining)
        else:
            self.stats.traces_evaluated.inc(*self.run_labels(trace))  # nothing deterministic to run: that phase is done
        if self.judge.evaluators and self.judge_settings is not None:
            judged = trace_id_sampled(int(trace.trace_id, 16), self.judge_settings.sample_rate)
            self.stats.judge_sampling.inc("sampled" if judged else "not_sampled")
            if judged:
                self._enqueue(self.judge, Job(trace), draining=draining)

    def _enqueue(self, stage: Stage, job: Job, *, draining: bool = False) -> None:
        """Queue a run; when full, drop the oldest (``queue_full``).

        While draining, the deterministic stage waits for room (the workers set
        the pace; the drain deadline ends the wait, and the run counts as
        ``shutdown``); the judge stage, far slower, does not hold the drain back:
        a run that does not fit counts as ``judge_shutdown``.
        """
        with self.lock:
            if draining and len(stage.queue) >= stage.max_queued:
                if stage is self.judge:
                    self.stats.dropped.inc(stage.shutdown)
                    return
                while len(stage.queue) >= stage.max_queued and not self.stopping:
                    stage.room.wait(TICK_SECONDS)
                    self._watch_locked()  # a hung evaluator must not stall the drain
                if self.stopping:
                    self.stats.dropped.inc(stage.shutdown)
                    return
            elif len(stage.queue) >= stage.max_queued:
                stage.queue.popleft()
                self.stats.dropped.inc(stage.queue_full)
            stage.queue.append(job)
            stage.work_ready.notify()

    def publish_depths(self) -> None:
        self.stats.queue_depth = len(self.deterministic.queue)
        self.stats.judge_queue_depth = len(self.judge.queue)

    def watch(self) -> None:
        with self.lock:
            self._watch_locked()

    def _watch_locked(self) -> None:
        now = time.monotonic()
        for stage in self.all:
            for worker in list(stage.workers):
                current = worker.current
                if current is not None and now - current[2] >= self.timeout:
                    self._replace_stuck(stage, worker, current, now)

    def _replace_stuck(self, stage: Stage, worker: Worker, current: tuple[Job, int, float], now: float) -> None:
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
        job.results.append(evaluator.error(job.trace, f"{evaluator.name} ran longer than {self.timeout:g}s; abandoned",
                                           "timeout"))
        job.durations[evaluator.name] = now - current[2]
        job.next_index = index + 1
        stage.queue.appendleft(job)
        if self._abandoned > MAX_ABANDONED_WORKERS:
            self.log_once("abandoned", "otel-agent-eval: %d evaluator threads are stuck", self._abandoned)
        self._spawn_worker(stage)
        stage.work_ready.notify()

    def _spawn_worker(self, stage: Stage) -> None:
        self._worker_numbers += 1
        worker = Worker(self, stage, self._worker_numbers)
        stage.workers.append(worker)
        worker.thread.start()

    # -- any thread --------------------------------------------------------------------------
    def wait_idle(self, deadline: float | None) -> bool:
        """Wait until every queue is empty and no worker is busy; False when ``deadline`` (monotonic) passes first."""
        with self.lock:
            while any(stage.queue or stage.busy for stage in self.all):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.idle.wait(remaining if remaining is not None else TICK_SECONDS)
        return True

    def stop(self) -> tuple[int, int]:
        """Stop every worker; the runs lost per stage (queued, or being evaluated), deterministic then judge."""
        with self.lock:
            self.stopping = True
            lost = self._abandon(self.deterministic), self._abandon(self.judge)
            # A run being handed to the sinks is counted evaluated once they have it (non-blocking: microseconds):
            # waited for, so that the figures read after ``stop`` add up.
            deadline = time.monotonic() + EMIT_GRACE_SECONDS
            while self.emitting and (remaining := deadline - time.monotonic()) > 0:
                self.idle.wait(remaining)
        return lost

    def _abandon(self, stage: Stage) -> int:
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

    # -- worker threads ----------------------------------------------------------------------
    def _work(self, worker: Worker) -> None:
        stage = worker.stage
        while True:
            with self.lock:
                while not stage.queue and not self.stopping and not worker.abandoned:
                    stage.work_ready.wait()
                if self.stopping or worker.abandoned:
                    return
                job = worker.job = stage.queue.popleft()
                stage.room.notify()
                stage.busy += 1
                self.publish_depths()
            self._run_job(worker, job)
            with self.lock:
                if worker.abandoned:
                    return
                stage.busy -= 1
                self.idle.notify_all()

    def _run_job(self, worker: Worker, job: Job) -> None:
        # One isolation context for the job's evaluators (``isolation.py``), one view of its run they share.
        with RunView(job.trace), run_scope(worker.stage.evaluators):
            if not self._evaluate(worker, job):
                return
        with self.lock:
            if worker.abandoned:
                return  # shutdown gave up on this job and counted it
            worker.job = None  # from here on the job is emitted, not lost
            self.emitting += 1
        try:
            self._emit(job, worker.stage.phase)
        finally:
            with self.lock:
                self.emitting -= 1
                self.idle.notify_all()

    def _evaluate(self, worker: Worker, job: Job) -> bool:
        """Run the job's evaluators from ``job.next_index``; False when the worker was abandoned."""
        evaluators = worker.stage.evaluators
        while job.next_index < len(evaluators):
            index = job.next_index
            evaluator = evaluators[index]
            started = time.monotonic()
            with self.lock:
                if worker.abandoned:
                    return False
                worker.current = (job, index, started)
            results, failed = safe_evaluate(evaluator, job.trace)
            if failed:
                self.stats.evaluator_errors.inc(evaluator.name, "exception")
            with self.lock:
                if worker.abandoned:
                    return False  # the watchdog already reported a timeout for this evaluator
                worker.current = None
                job.results.extend(results)
                job.durations[evaluator.name] = time.monotonic() - started
                job.next_index = index + 1
        return True

    def _emit(self, job: Job, phase: Phase) -> None:
        evaluated = EvaluatedTrace(job.trace, job.results, job.durations, job.started_ns, time.time_ns(), phase)
        for sink in self.sinks:
            try:
                sink.emit(evaluated)
            except Exception:  # noqa: BLE001 - a failing sink is counted; the other sinks still get the run
                self.stats.sink_errors.inc(sink.name)
                self.log_once(f"sink-{sink.name}", "otel-agent-eval: sink %s failed", sink.name)
        # Counted once every sink has had the run: a reader who sees N evaluated sees their results.
        counts: LabelledCounts = self.stats.traces_evaluated if phase == "deterministic" else self.stats.traces_judged
        counts.inc(*self.run_labels(job.trace))
