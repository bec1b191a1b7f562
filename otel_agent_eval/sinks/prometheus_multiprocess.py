"""prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``): one ``/metrics`` for every worker of
a pre-forking server (gunicorn, ``uvicorn --workers``), as prometheus-client's documentation sets it up.

In that mode prometheus-client's own metric objects keep their values in a file per process, and
``MultiProcessCollector`` adds the files up at scrape time. Custom collectors are not in those files, and
ours are custom (``ResultMetrics`` and ``PipelineCollector`` read counts kept without its locks): without
this, a scrape showed one worker's share, or nothing in an endpoint that serves the files. A
``MultiprocessMirror`` writes their samples there through the value class prometheus-client's metrics use in
this process (its open files and its lock; a file of its own after ``fork``), about once a second from the
collector thread and whenever the pipeline flushes or stops. Counters and histograms then add up over every
process that wrote them (a worker that exits keeps its counts, as prometheus-client's counters do); gauges
over the live processes (``livesum``; the admission ratio: ``livemin``, the lowest), which needs
``multiprocess.mark_process_dead`` when a worker exits (gunicorn's ``child_exit`` hook), as for any
live gauge. Exemplars and ``_created`` have no place in those files.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ..pipeline.core import at_fork_in_child

_logger = logging.getLogger(__name__)

GAUGE_MODES = {"agent_eval_admission_ratio": "livemin"}
"""How the live processes' values of a gauge combine; the others (queue depths, buffered traces and bytes) add up."""


def multiprocess_mode() -> bool:
    """prometheus-client writes its metrics to ``PROMETHEUS_MULTIPROC_DIR`` in this process (the variable was
    set when prometheus-client was imported: it decides then), and that directory exists. A missing one is
    said at ERROR and the mode left off here: prometheus-client's own metrics raise then, but the processor
    does not stop the app for its metrics."""
    if not metric_objects_fail():
        return bool(getattr(values.ValueClass, "_multiprocess", False))
    _logger.error("otel-agent-eval: PROMETHEUS_MULTIPROC_DIR=%r is not a directory: prometheus-client's multiprocess "
                  "mode cannot work; this process's evaluation metrics stay in it (prometheus_port serves them alone) "
                  "and the judge's metrics are off", _directory())
    return False


def metric_objects_fail() -> bool:
    """prometheus-client was imported with ``PROMETHEUS_MULTIPROC_DIR`` set and that names no directory: every
    metric object it makes raises then (``FileNotFoundError``, when made or first used). The pipeline's metrics are
    collected, not such objects; the judge's are off (``evaluators.configure_evaluators``)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False)) and not os.path.isdir(_directory())


def _directory() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or ""


def multiprocess_registry() -> CollectorRegistry:
    """A registry of every process's metrics, read from ``PROMETHEUS_MULTIPROC_DIR`` at each scrape."""
    registry = CollectorRegistry()
    SizedFilesCollector(registry)
    return registry


class SizedFilesCollector(MultiProcessCollector):
    """prometheus-client's ``MultiProcessCollector``, reading only the files that are past their creation.

    prometheus-client creates a process's file, then sizes it (client_python#1199, open in 0.26): a scrape in
    between read an empty file and failed whole, every process's metrics with it, and a process killed in
    between left the empty file for good, failing every scrape after. An empty file holds no sample.
    """

    def collect(self) -> Any:
        files = [path for path in glob.glob(os.path.join(self._path, "*.db")) if _sized(path)]
        return self.merge(files, accumulate=True)


def _sized(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:  # removed since the glob (``mark_process_dead``): prometheus-client skips it as well
        return False


class MultiprocessMirror:
    """Writes the samples of custom ``collectors`` into this process's multiprocess files (see the module)."""

    def __init__(self, collectors: Sequence[Collector]) -> None:
        self._collectors = list(collectors)
        self._init_state()
        at_fork_in_child(self._init_state)

    def _init_state(self) -> None:
        """Also in a forked child: its counts start afresh in a file of its own, so nothing written is known."""
        self._lock = threading.Lock()  # the collector thread, and app threads flushing or shutting down
        self._written: dict[tuple[str, tuple[tuple[str, str], ...]], list[Any]] = {}
        """(sample name, labels) -> [prometheus-client's value object, the value last written]"""

    def sync(self) -> None:
        with self._lock:
            for collector in self._collectors:
                for family in collector.collect():
                    self._write(family)

    def _write(self, family: Any) -> None:
        below: dict[tuple[tuple[str, str], ...], float] = {}  # a histogram series' cumulative count so far
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            if family.type == "histogram":
                if name.endswith("_bucket"):  # the files keep each bucket's own count, as ``Histogram`` does
                    series = tuple((k, v) for k, v in labels.items() if k != "le")
                    value, below[series] = value - below.get(series, 0.0), value
                elif not name.endswith("_sum"):
                    continue  # ``_count`` is the buckets' sum there
            elif family.type == "counter":
                if not name.endswith("_total"):
                    continue
            elif family.type != "gauge":
                continue
            self._set(family, name, labels, value)

    def _set(self, family: Any, name: str, labels: dict[str, str], value: float) -> None:
        key = (name, tuple(labels.items()))
        entry = self._written.get(key)
        if entry is None:
            mode = GAUGE_MODES.get(family.name, "livesum") if family.type == "gauge" else ""
            holder = values.ValueClass(family.type, family.name, name, tuple(labels), tuple(labels.values()),
                                       family.documentation, multiprocess_mode=mode)
            entry = self._written[key] = [holder, None]
        if entry[1] != value:
            entry[0].set(value)
            entry[1] = value
