"""``otel-agent-eval experiment`` as a user runs it: a subprocess over a JSON-lines dataset, the task
named by ``module:function`` (tests/experiment_tasks.py), JSON for CI, comparison and gates; and
``--gate-lower-bound`` in ``evaluate``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from otel_agent_eval.cli.demo import EXPECTATIONS
from otel_agent_eval.experiments.stats_ci import two_proportion_test, wilson_interval
from tests.cli.test_cli import CLI, export_demo_traces
from tests.experiment_tasks import BROKEN_CASES
from tests.openai_server import answer, question_ids

ROOT = Path(__file__).resolve().parents[2]
ORDERS = [{"id": f"order-{n}", "input": f"refund order {n}", "expected_tool_calls": ["lookup_order", "refund_order"],
           "require_order": True} for n in range(6)]


def dataset(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def experiment(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    full_env.update(env or {})
    return subprocess.run(CLI + ["experiment", *args],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env=full_env, check=False)


def test_a_real_framework_pydantic_ai_through_the_cli(tmp_path: Path) -> None:
    cases = dataset(tmp_path, [
        {"id": "right", "input": "weather and time in Paris", "expected_tools": ["get_weather", "get_time"]},
        {"id": "wrong", "input": "weather in Paris", "expected_tools": ["get_forecast"]},
    ])
    run = experiment(str(cases), "--task", "tests.experiment_tasks:pydantic_weather", "--evaluators", "tool_call_accuracy,loop_detection",
                     "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [(c["id"], c["runs"], c["labels"]) for c in report["cases"]] == [
        ("right", 1, {"tool_call_accuracy": "pass", "loop_detection": "pass"}),
        ("wrong", 1, {"tool_call_accuracy": "fail", "loop_detection": "pass"}),  # the case's own expectation applies
    ]
    accuracy = report["evaluators"]["tool_call_accuracy"]
    interval = wilson_interval(1, 2)
    assert accuracy["pass_rate"] == 0.5 and accuracy["ci95"] == [interval.low, interval.high]  # type: ignore[union-attr]


def test_manual_tracing_compare_and_gates(tmp_path: Path) -> None:
    cases = str(dataset(tmp_path, ORDERS))
    task = ["--task", "tests.experiment_tasks:refunds", "--evaluators", "tool_call_accuracy", "--concurrency", "3"]
    good = experiment(cases, *task, "--format", "json", "--gate", "tool_call_accuracy=0.9")
    assert good.returncode == 0, good.stderr
    baseline = tmp_path / "baseline.json"
    baseline.write_text(good.stdout)
    assert json.loads(good.stdout)["evaluators"]["tool_call_accuracy"]["counts"]["pass"] == 6

    broken = {"order-1", "order-4", "order-5"}
    worse = experiment(cases, *task, "--format", "json", "--compare", str(baseline), "--gate", "tool_call_accuracy=0.9",
                       env={BROKEN_CASES: ",".join(sorted(broken))})
    assert worse.returncode == 1, worse.stderr  # the gate failed
    report = json.loads(worse.stdout)
    assert report["failed_gates"] == ["tool_call_accuracy: pass rate 50.0% < 90.0%"]
    diff = report["comparison"]["evaluators"]["tool_call_accuracy"]
    assert diff["difference"] == pytest.approx(-0.5)
    assert diff["p_value"] == pytest.approx(two_proportion_test(6, 6, 3, 6).p_value)  # type: ignore[union-attr]
    assert {(f["case"], f["before"], f["after"]) for f in report["comparison"]["flipped"]} == {(c, "pass", "fail") for c in broken}

    # The text table, and a gate on the Wilson lower bound: 6 of 6 is only evidence of >= 61%.
    text = experiment(cases, *task, "--compare", str(baseline), "--gate-lower-bound", "tool_call_accuracy=0.9")
    assert text.returncode == 1
    assert "tool_call_accuracy" in text.stdout and "[61.0%, 100.0%]" in text.stdout
    assert "GATE FAILED: tool_call_accuracy: pass-rate lower bound (Wilson 95%) 61.0% < 90.0%" in text.stdout
    assert experiment(cases, *task, "--gate-lower-bound", "tool_call_accuracy=0.6").returncode == 0


def test_judge_evaluators_in_an_experiment_get_the_cases_facts_and_reference(tmp_path: Path, server) -> None:  # type: ignore[no-untyped-def]
    server.set_default(answer({"agent_failed": "no"}))
    rows = [{**ORDERS[0], "facts": ["the refund is 42 EUR"], "expected_output": "Order order-0 is refunded (42 EUR)."},
            {**ORDERS[1], "facts": ["the order was paid", "the refund is 42 EUR"]}]
    run = experiment(str(dataset(tmp_path, rows)), "--task", "tests.experiment_tasks:refunds", "--concurrency", "2", "--format", "json",
                     "--evaluators", "tool_call_accuracy,task_completion,response_facts",
                     env={"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url})
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [c["labels"] for c in report["cases"]] == [
        {"tool_call_accuracy": "pass", "task_completion": "pass", "response_facts": "pass"}] * 2
    asked = sorted(sorted(question_ids(r.body)) for r in server.requests)
    assert asked == sorted([
        ["fact_1"], ["fact_1", "fact_2"],  # each case's own facts
        sorted(["addresses_request", "task_completed", "supported_by_steps", "agent_failed", "agrees_with_reference"]),  # order-0
        sorted(["addresses_request", "task_completed", "supported_by_steps", "agent_failed"]),  # order-1: no reference
    ])
    prompts = [json.dumps(r.body) for r in server.requests]
    assert sum("REFERENCE ANSWER" in p and "Order order-0 is refunded (42 EUR)." in p for p in prompts) == 1


def test_bad_task_and_bad_evaluator_fail_before_any_case(tmp_path: Path) -> None:
    cases = str(dataset(tmp_path, ORDERS[:1]))
    run = experiment(cases, "--task", "tests.experiment_tasks:nope")
    assert run.returncode == 2 and "--task 'tests.experiment_tasks:nope': cannot import it" in run.stderr, run.stderr
    run = experiment(cases, "--task", "tests.experiment_tasks:refunds", "--concurrency", "0")
    assert run.returncode == 2 and "--concurrency 0: must be at least 1" in run.stderr, run.stderr
    run = experiment(cases, "--task", "tests.experiment_tasks:refunds", "--evaluators", "task_completion")
    assert run.returncode == 2 and "'task_completion' is a judge evaluator and no judge is configured" in run.stderr, run.stderr


def test_evaluate_gate_on_the_wilson_lower_bound(tmp_path: Path) -> None:
    expectations = tmp_path / "expectations.json"
    expectations.write_text(json.dumps([e.model_dump(mode="json") for e in EXPECTATIONS]))
    traces = tmp_path / "traces.jsonl"
    export_demo_traces(traces, ["weather: good (parallel calls)"] * 3)
    args = CLI + ["evaluate", str(traces), "--evaluators", "tool_call_accuracy", "--expectations", str(expectations)]
    # The plain gate passes (exit 0): 3 of 3 pass.
    subprocess.run(args + ["--gate", "tool_call_accuracy=0.9"], capture_output=True, text=True, timeout=120, check=True)
    gated = subprocess.run(args + ["--gate-lower-bound", "tool_call_accuracy=0.9"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert gated.returncode == 1  # 3 of 3: the lower bound is 43.9%
    assert "GATE FAILED: tool_call_accuracy: pass-rate lower bound (Wilson 95%) 43.9% < 90.0%" in gated.stdout


def test_the_readme_experiment_commands_run_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Experiments: `otel-agent-eval experiment`", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("    #")[0] for line in block.splitlines() if line.startswith("otel-agent-eval ")]
    assert len(commands) == 3
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "PYTHONPATH": str(ROOT)}
    work = tmp_path / "examples"
    work.mkdir()
    for name in ("refunds.jsonl", "refund_agent.py"):
        (work / name).write_text((ROOT / "examples" / name).read_text())
    outputs = []
    for command in commands:
        run = subprocess.run(command.replace("otel-agent-eval ", f"{' '.join(CLI)} ", 1), shell=True, cwd=work, env=env,
                             capture_output=True, text=True, timeout=180, check=False)
        assert run.returncode == 0, (command, run.stderr)
        outputs.append(run.stdout)
    assert "tool_call_accuracy             66.7%  [20.8%, 93.9%]" in outputs[0]
    assert "case where-is-it: tool_call_accuracy fail" in outputs[0] and "mentions_the_order" in outputs[0]
    assert json.loads((work / "baseline.json").read_text())["evaluators"]["tool_call_accuracy"]["counts"]["pass"] == 2
    assert "vs baseline tool_call_accuracy: +0.0%" in outputs[2]
