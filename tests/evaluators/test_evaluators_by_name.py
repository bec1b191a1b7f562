"""Evaluators by name everywhere: built-in, judge, installed (entry point) and ``module:Class`` /
``module:function`` specs, through settings, ``evaluate``, ``serve`` and the judge alias.

The installed package is ``tests/data/plugin_pkg`` (``scripts/run-tests.sh`` installs it): it
registers ``answers_in_french`` as an entry point and defines ``AnswerLength`` for ``module:Class``.
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)

from otel_agent_eval import AgentTrace
from otel_agent_eval.config import ConfigError, Settings
from otel_agent_eval.evaluators import build_configured_evaluators
from tests.cli.test_cli import CLI, export_demo_traces
from tests.serve.server_process import SCENARIOS, ServerProcess, run_scenarios, wait_for

USER_SPECS = "tool_call_accuracy,answers_in_french,oae_example_plugin:AnswerLength"


@pytest.fixture(scope="module", autouse=True)
def plugin_installed() -> None:
    names = {ep.name for ep in entry_points(group="otel_agent_eval.evaluators")}
    assert "answers_in_french" in names, "install the test plugin: pip install -e tests/data/plugin_pkg (scripts/run-tests.sh does)"


def names(evaluators: list) -> list[str]:  # type: ignore[type-arg]
    return [e.name for e in evaluators]


def test_every_kind_of_name_builds_and_a_bad_one_fails_fast_naming_it() -> None:
    settings = Settings.load({}, evaluators=USER_SPECS + ",oae_example_plugin:both", thresholds={"answers_in_french": 0.9})
    evaluators, judge = build_configured_evaluators(settings, env={})
    assert judge is None
    assert names(evaluators) == ["tool_call_accuracy", "answers_in_french", "answer_length", "answers_in_french", "answer_length"]
    assert evaluators[1].threshold == 0.9  # the threshold chosen for an installed evaluator's name

    with pytest.raises(ConfigError, match=r"OTEL_AGENT_EVAL_EVALUATORS: unknown evaluator 'answers_in_frnch'; allowed: .*answers_in_french"):
        Settings.load({"OTEL_AGENT_EVAL_EVALUATORS": "answers_in_frnch"})
    for spec, why in (("oae_example_plugin:Missing", "cannot import it"), ("oae_example_plugin:LANGUAGE_KEY", "not a class or function"),
                      ("task_completion", "no judge is configured")):
        with pytest.raises(ConfigError, match=rf"OTEL_AGENT_EVAL_EVALUATORS.*{spec}.*{why}"):
            build_configured_evaluators(Settings.load({}, evaluators=spec), env={})


def test_a_user_evaluator_reads_the_runs_metadata() -> None:
    from oae_example_plugin import AnswersInFrench

    run = AgentTrace(trace_id="1" * 32, agent_name="a", steps=[], final_output="Il fait beau et le soleil est là")
    assert AnswersInFrench().evaluate(run)[0].label == "pass"
    english = run.model_copy(update={"metadata": {"app.language": "en"}})
    assert AnswersInFrench().evaluate(english)[0].label == "skipped"


def test_judge_names_in_evaluators_and_the_judge_alias(server) -> None:  # type: ignore[no-untyped-def]
    env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url}

    def built(evaluators: str, **extra: str) -> list[str]:
        full = {**env, **extra}
        made, judge = build_configured_evaluators(Settings.load({}, evaluators=evaluators), env=full)
        assert judge is not None
        judge.close()
        return names(made)

    # Named among the evaluators: exactly those (the alias's default does not add more).
    assert built("tool_call_accuracy,task_completion") == ["tool_call_accuracy", "task_completion"]
    # The alias, set: added to them.
    assert built("task_completion", OTEL_AGENT_EVAL_JUDGE_EVALUATORS="plan_quality,task_completion") == ["task_completion", "plan_quality"]
    # None named: the alias's default, as before.
    assert built("tool_call_accuracy") == ["tool_call_accuracy", "task_completion", "plan_quality", "tool_call_necessity",
                                           "trajectory_efficiency"]


def test_evaluate_runs_user_evaluators_by_entry_point_and_module_class(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["weather: good (parallel calls)", "weather: wrong tool"])
    run = subprocess.run(CLI + ["evaluate", str(traces), "--format", "json", "--evaluators", USER_SPECS],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    totals = json.loads(run.stdout)["totals"]
    assert set(totals) == {"tool_call_accuracy", "answers_in_french", "answer_length"}
    assert totals["answers_in_french"]["fail"] == 2  # the demo agents answer in English
    assert totals["answer_length"]["pass"] == 2  # short answers

    bad = subprocess.run(CLI + ["evaluate", str(traces)], capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "OTEL_AGENT_EVAL_EVALUATORS": "tool_call_accuracy,oae_example_plugin:Nope"})
    assert bad.returncode == 2
    assert "OTEL_AGENT_EVAL_EVALUATORS" in bad.stderr and "'oae_example_plugin:Nope': cannot import it" in bad.stderr, bad.stderr
    unknown = subprocess.run(CLI + ["evaluate", str(traces), "--evaluators", "answers_in_frnch"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert unknown.returncode == 2 and "unknown evaluator 'answers_in_frnch'" in unknown.stderr, unknown.stderr


def test_serve_runs_user_evaluators_by_entry_point_and_module_class(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, "--evaluators", USER_SPECS)
    try:
        exporter = HttpSpanExporter(endpoint=f"{server.http_endpoint}/v1/traces", timeout=5)
        run_scenarios(exporter, SCENARIOS)
        names = ("tool_call_accuracy", "answers_in_french", "answer_length")
        # The trace counter is incremented before the sinks record the results: wait for the results.
        metrics = wait_for(lambda: (m := server.metrics()).sum("agent_eval_traces_evaluated_total") >= len(SCENARIOS)
                           and all(m.sum("agent_eval_results_total", evaluator=n) >= len(SCENARIOS) for n in names) and m,
                           30, "every scenario evaluated by every evaluator")
        for name in names:
            assert metrics.sum("agent_eval_results_total", evaluator=name) == len(SCENARIOS), name
        assert metrics.sum("agent_eval_results_total", evaluator="answer_length", outcome="pass") > 0
    finally:
        server.kill()
