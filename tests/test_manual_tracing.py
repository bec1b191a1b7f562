"""Manual tracing: what an agent records by hand is what ``assemble()`` gives back, and the processor
evaluates it like any instrumented framework."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_eval import AgentEvalProcessor, ToolExpectation
from otel_agent_eval.manual import agent_run
from tests.frameworks.harness import RecordingSink, assemble_with_logs

ANSWER = "I could not refund order 42: the payment provider is down."


def record_refund(provider: TracerProvider) -> None:
    with agent_run("support", input="Refund order 42", tracer_provider=provider, model="m1") as run:
        with run.step(thought="Look the order up, and check the refund policy.") as step:
            step.tool_call("lookup_order", {"order_id": "42"}, result={"status": "paid", "amount": 30})
            step.tool_call("get_policy", {"topic": "refunds"}, result="Refunds within 30 days.")
        with run.step() as step:
            step.tool_call("refund_order", {"order_id": "42", "amount": 30}, error="payment provider down")
        with run.step(thought="Tell the user.") as step:
            step.output(ANSWER)
        run.finish(ANSWER)


def exported(record) -> list:  # type: ignore[no-untyped-def]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record(provider)
    return list(exporter.get_finished_spans())


def test_round_trip_names_arguments_results_errors_order_thought_output() -> None:
    spans = exported(record_refund)
    assert sorted(s.name for s in spans) == sorted(
        ["invoke_agent support", "chat m1", "chat m1", "chat m1",
         "execute_tool lookup_order", "execute_tool get_policy", "execute_tool refund_order"]
    )
    (run,) = assemble_with_logs(spans)
    assert (run.agent_name, run.input, run.final_output, run.status) == ("support", "Refund order 42", ANSWER, "ok")
    assert [s.index for s in run.steps] == [0, 1, 2]
    first, second, third = run.steps
    assert first.thought == "Look the order up, and check the refund policy." and first.output is None
    assert [(c.name, c.arguments, c.result, c.error) for c in first.tool_calls] == [
        ("lookup_order", {"order_id": "42"}, {"status": "paid", "amount": 30}, None),
        ("get_policy", {"topic": "refunds"}, "Refunds within 30 days.", None),
    ]
    assert [(c.name, c.arguments, c.error, c.executed, c.requested) for c in second.tool_calls] == [
        ("refund_order", {"order_id": "42", "amount": 30}, "payment provider down", True, True)
    ]
    assert (third.thought, third.output, third.tool_calls) == ("Tell the user.", ANSWER, [])
    assert all(s.model == "m1" for s in run.steps)
    assert run.issues == [] and all(not s.issues for s in run.steps)


def test_a_run_without_a_model_names_none() -> None:
    """No model given: spans named ``chat`` with no ``gen_ai.request.model`` (semconv), not a made-up ``unknown``."""

    def record(provider: TracerProvider) -> None:
        with agent_run("support", input="Hi", tracer_provider=provider) as run:
            with run.step() as step:
                step.output("Hello.")
            run.finish("Hello.")

    spans = exported(record)
    (chat,) = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chat.name == "chat" and "gen_ai.request.model" not in chat.attributes
    (run,) = assemble_with_logs(spans)
    assert [(s.output, s.model) for s in run.steps] == [("Hello.", None)]


def test_an_exception_in_the_run_marks_it_failed_and_propagates() -> None:
    def record(provider: TracerProvider) -> None:
        with pytest.raises(RuntimeError, match="model down"):
            with agent_run("support", input="hi", tracer_provider=provider) as run:
                with run.step():
                    raise RuntimeError("model down")

    spans = exported(record)
    (run,) = assemble_with_logs(spans)
    assert run.status == "error" and "model down" in (run.error or "")
    assert run.steps[0].error is not None and "model down" in run.steps[0].error


def test_the_processor_evaluates_a_manual_run_like_any_framework() -> None:
    provider = TracerProvider()
    sink = RecordingSink()
    rules = [ToolExpectation(agent="support", expected_tools=["lookup_order", "refund_order"])]
    processor = AgentEvalProcessor(expectations=rules, settings=None, env={}, emit_spans=False, emit_logs=False)
    processor.pipeline.sinks.append(sink)
    provider.add_span_processor(processor)
    record_refund(provider)
    assert processor.force_flush(10_000)
    provider.shutdown()
    (evaluated,) = sink.evaluated
    labels = {r.evaluator: r.label for r in evaluated.results}
    assert evaluated.trace.agent_name == "support"
    assert labels["tool_call_accuracy"] == "pass"  # both expected calls were made, in order
    assert labels["tool_failure_recovery"] == "fail"  # refund_order failed and was never retried
