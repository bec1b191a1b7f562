"""Judge evaluators switch on from OTEL_AGENT_EVAL_JUDGE_* in the processor, the demo and the config checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest

from otel_agent_eval import AgentEvalProcessor, ConfigError
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from tests.openai_server import FakeOpenAI, answer


def test_processor_runs_judge_evaluators_when_a_judge_is_configured() -> None:
    with FakeOpenAI(answer({"agent_failed": "no"})) as judge_server:
        env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": judge_server.base_url,
               "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion"}
        provider = TracerProvider()
        processor = AgentEvalProcessor(env=env, registry=CollectorRegistry(), settle_delay_seconds=0, emit_spans=False, emit_logs=False)
        provider.add_span_processor(processor)
        assert [e.name for e in processor.evaluators][-1] == "task_completion"
        ScriptedAgent("calc", {"add": lambda a, b: a + b}).run(
            provider.get_tracer("app"), "add 1 and 2", [Turn(None, [("add", {"a": 1, "b": 2})]), Turn("3")]
        )
        assert processor.force_flush(20_000)
        metrics = generate_latest(processor.registry).decode()
        provider.shutdown()
    assert 'agent_eval_results_total{agent="calc",evaluator="task_completion",outcome="pass",reason="",service="unknown"} 1.0' in metrics
    assert 'agent_eval_judge_tokens_total{evaluator="task_completion",model="judge-1",type="input"}' in metrics
    assert judge_server.request_count == 1


def test_judge_deadline_must_fit_in_the_evaluator_timeout() -> None:
    env = {"OTEL_AGENT_EVAL_JUDGE_MODEL": "m", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
           "OTEL_AGENT_EVAL_EVALUATOR_TIMEOUT_SECONDS": "10"}
    with pytest.raises(ConfigError, match="OTEL_AGENT_EVAL_JUDGE_DEADLINE_SECONDS"):
        AgentEvalProcessor(env=env)


def test_demo_says_how_to_enable_judges() -> None:
    run = subprocess.run([sys.executable, "-m", "otel_agent_eval", "demo", "--traces", "3", "--rate", "0", "--metrics-port", "-1"],
                         capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 0, run.stderr
    assert "judge evaluators: off (set OTEL_AGENT_EVAL_JUDGE_MODEL" in run.stdout
