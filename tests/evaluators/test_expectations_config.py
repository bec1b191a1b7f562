"""Expectations and thresholds from configuration reach the judge evaluators too (issue 14, items 4 and 5).

A real processor on the real SDK, a scripted agent, and a local OpenAI-compatible judge server
answering per question id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agent_eval import AgentEvalProcessor, EvalResult
from otel_agent_eval.cli.scripted_agent import ScriptedAgent, Turn
from otel_agent_eval.model import EvaluatedTrace
from tests.formats.test_otlp import to_otlp_json
from tests.openai_server import FakeOpenAI, answer

FACTS = [
    {"agent": "weather", "input_pattern": "Paris", "facts": ["it is 20C in Paris", "it is sunny"]},
    {"agent": "weather", "input_pattern": "Rome", "facts": ["it is 25C in Rome"], "thresholds": {"plan_quality": 0.9}},
]


def judge_env(server: FakeOpenAI, expectations: Path, **extra: str) -> dict[str, str]:
    return {
        "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-1", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": server.base_url,
        "OTEL_AGENT_EVAL_JUDGE_API_KEY": "test", "OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "response_facts,plan_quality",
        "OTEL_AGENT_EVAL_EXPECTATIONS_FILE": str(expectations), "OTEL_AGENT_EVAL_EVALUATORS": "tool_call_accuracy",
        **extra,
    }


class Keep:
    name = "keep"

    def __init__(self, into: list[EvaluatedTrace]) -> None:
        self.into = into

    def emit(self, evaluated: EvaluatedTrace) -> None:
        self.into.append(evaluated)


def weather_run(provider: TracerProvider, city: str) -> None:
    agent = ScriptedAgent("weather", {"get_weather": lambda city: f"sunny, 20C in {city}"})
    agent.run(provider.get_tracer("app"), f"weather in {city}?",
              [Turn(None, [("get_weather", {"city": city})]), Turn(f"It is sunny in {city}.")])


def test_response_facts_from_the_expectations_file_and_judge_thresholds_from_env(tmp_path: Path) -> None:
    expectations = tmp_path / "expectations.json"
    expectations.write_text(json.dumps(FACTS))
    results: list[EvaluatedTrace] = []
    # plan_quality scores 4/5 = 0.8 on every run; Paris misses its second fact.
    with FakeOpenAI(answer({"fact_2": "no", "redundant_steps": "no", "expert_efficient": "no"})) as server:
        env = judge_env(server, expectations, OTEL_AGENT_EVAL_THRESHOLDS="plan_quality=0.7")
        processor = AgentEvalProcessor(env=env, registry=CollectorRegistry(), settle_delay_seconds=0,
                                       emit_spans=False, emit_logs=False)
        processor.pipeline.sinks.append(Keep(results))
        provider = TracerProvider()
        provider.add_span_processor(processor)
        thresholds = {e.name: e.threshold for e in processor.evaluators}
        weather_run(provider, "Paris")
        weather_run(provider, "Rome")
        weather_run(provider, "Oslo")
        assert processor.force_flush(20_000)
        asked = [json.dumps(r["body"]) for r in server.requests]
        provider.shutdown()
    assert thresholds == {"tool_call_accuracy": 1.0, "plan_quality": 0.7, "response_facts": 1.0}
    by_city: dict[str | None, dict[str, EvalResult]] = {}
    for evaluated in results:  # deterministic and judge results may come in separate emissions
        by_city.setdefault(evaluated.trace.input, {}).update({r.evaluator: r for r in evaluated.results})
    paris, rome, oslo = (by_city[f"weather in {city}?"] for city in ("Paris", "Rome", "Oslo"))
    # Facts come from the rules: a missing one fails, keeping its partial credit; no rule, no facts: skipped.
    assert (paris["response_facts"].label, paris["response_facts"].score) == ("fail", 0.5)
    assert (rome["response_facts"].label, rome["response_facts"].score) == ("pass", 1.0)
    assert (oslo["response_facts"].label, oslo["response_facts"].reason) == ("skipped", "not_applicable")
    # plan_quality's threshold: the environment's, except where a matching rule names one.
    assert (paris["plan_quality"].label, paris["plan_quality"].details["threshold"]) == ("pass", 0.7), paris["plan_quality"]
    assert (rome["plan_quality"].label, rome["plan_quality"].score, rome["plan_quality"].details["threshold"]) == (
        "fail", 0.8, 0.9)
    # A rule with facts only says nothing about tool calls: tool_call_accuracy is not decided by it.
    assert paris["tool_call_accuracy"].reason == "no_expectation"
    assert any("it is 20C in Paris" in text for text in asked) and any("it is 25C in Rome" in text for text in asked)


def test_evaluate_expectations_give_response_facts_their_facts(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    weather_run(provider, "Paris")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(to_otlp_json(encode_spans(exporter.get_finished_spans())) + "\n")
    expectations = tmp_path / "expectations.json"
    expectations.write_text(json.dumps(FACTS))
    with FakeOpenAI(answer()) as server:
        env = judge_env(server, tmp_path / "unused.json", OTEL_AGENT_EVAL_JUDGE_EVALUATORS="response_facts")
        del env["OTEL_AGENT_EVAL_EXPECTATIONS_FILE"]
        run = subprocess.run(
            [sys.executable, "-m", "otel_agent_eval", "evaluate", str(traces), "--format", "json",
             "--expectations", str(expectations), "--threshold", "response_facts=1.0"],
            capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", **env}, check=False,
        )
    assert run.returncode == 0, run.stderr
    (agent_run,) = json.loads(run.stdout)["agent_runs"]
    (facts,) = [r for r in agent_run["results"] if r["evaluator"] == "response_facts"]
    assert (facts["label"], facts["score"], facts["details"]["threshold"]) == ("pass", 1.0, 1.0)
