"""``otel-agent-eval mcp`` with the official MCP client, over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_eval.cli.mcp_server import ingest, tool_call_accuracy
from tests.formats.test_otlp import to_otlp_json
from tests.test_manual_tracing import record_refund

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"eval_tool_call_accuracy", "eval_ingest_trace", "eval_trace", "list_evaluators"}

STEPS = [
    {"thought": "look it up", "tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "42"}, "result": "paid"}]},
    {"tool_calls": [{"name": "refund_order", "arguments": {"order_id": "42"}, "result": "ok"}]},
    {"output": "Refunded."},
]


def refund_run_otlp_json() -> str:
    """A hand-traced agent run (manual tracing), exported as OTLP/JSON."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record_refund(provider)
    return to_otlp_json(encode_spans(exporter.get_finished_spans()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


async def exercise(client: Client) -> dict[str, Any]:
    """Every tool once, through the client: what an agent using the server would do."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    out: dict[str, Any] = {"tools": tools}
    call = client.call_tool
    out["single_pass"] = structured(await call("eval_tool_call_accuracy", {
        "expected_tool": "get_weather", "actual_tool": "get_weather",
        "expected_arguments": {"city": "Paris"}, "actual_arguments": {"city": "Paris"}}))
    out["single_fail"] = structured(await call("eval_tool_call_accuracy", {
        "expected_tool": "get_weather", "actual_tool": "get_weather",
        "expected_arguments": {"city": "Paris"}, "actual_arguments": {"city": "Lyon"}}))
    out["trace_order"] = structured(await call("eval_tool_call_accuracy", {
        "expected_tool_calls": ["refund_order", "lookup_order"], "agent_trace": STEPS, "require_order": True}))
    out["trace_none"] = structured(await call("eval_tool_call_accuracy", {"expected_tool_calls": [], "agent_trace": STEPS}))
    out["neither"] = structured(await call("eval_tool_call_accuracy", {"actual_tool": "x"}))
    out["ingest"] = structured(await call("eval_ingest_trace", {"otlp_json": refund_run_otlp_json()}))
    ingested = out["ingest"]["agent_traces"][0]
    out["eval"] = structured(await call("eval_trace", {"agent_trace": ingested, "evaluators": ["loop_detection", "step_budget"]}))
    out["spec"] = structured(await call("eval_trace", {"agent_trace": STEPS, "evaluators": ["os:getcwd"]}))
    out["list"] = structured(await call("list_evaluators", {}))
    return out


def check(out: dict[str, Any]) -> None:
    assert set(out["tools"]) == TOOLS
    for tool in out["tools"].values():
        assert len(tool.description or "") > 40, tool.name
    props = out["tools"]["eval_tool_call_accuracy"].input_schema["properties"]
    assert {"expected_tool", "actual_tool", "expected_tool_calls", "agent_trace", "require_order"} <= set(props)
    assert all(props[name].get("description") for name in props)
    assert out["single_pass"] == {"score": 1.0, "passed": True, "label": "pass", "reason": out["single_pass"]["reason"],
                                  "evaluator": "tool_call_accuracy"}
    assert out["single_fail"]["passed"] is False and out["single_fail"]["score"] == 0.0
    assert out["trace_order"]["passed"] is False  # both called, in the other order
    assert out["trace_none"]["passed"] is False and out["trace_none"]["score"] == 0.0  # [] asserts no tool
    assert "error" in out["neither"]
    (run,) = out["ingest"]["agent_traces"]
    assert run["agent_name"] == "support" and len(run["steps"]) == 3
    assert [c["name"] for c in run["steps"][0]["tool_calls"]] == ["lookup_order", "get_policy"]
    results = out["eval"]["results"]
    assert [r["evaluator"] for r in results] == ["loop_detection", "step_budget"]
    assert all(r["label"] in ("pass", "fail") for r in results)
    assert "not accepted" in out["spec"]["error"]
    listed = {e["name"]: e for e in out["list"]["evaluators"]}
    assert listed["tool_call_accuracy"]["needs_judge"] is False
    assert listed["task_completion"]["needs_judge"] is True and listed["task_completion"]["available"] is False


def test_pure_cores() -> None:
    assert tool_call_accuracy(expected_tool_calls=["a"], agent_trace=[{"tool_calls": [{"name": "a"}]}])["passed"] is True
    assert "error" in tool_call_accuracy(expected_tool="a", actual_tool="a", expected_tool_calls=["a"])
    assert "error" in tool_call_accuracy(expected_tool_calls=["a"], agent_trace=[{"index": "x"}])
    assert "error" in ingest("{not json")


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_AGENT_EVAL_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_stdio_with_the_official_client() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "otel_agent_eval", "mcp"], env=server_env(), cwd=str(ROOT))

    async def main() -> dict[str, Any]:
        async with Client(params) as client:
            return await exercise(client)

    check(asyncio.run(main()))


@pytest.fixture
def http_server() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "otel_agent_eval", "mcp", "--port", str(port)],
                            env=server_env(), cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_streamable_http_with_the_official_client(http_server: int) -> None:
    async def main() -> dict[str, Any]:
        async with Client(f"http://127.0.0.1:{http_server}/mcp") as client:
            return await exercise(client)

    check(asyncio.run(main()))


def test_http_refuses_a_foreign_host_header(http_server: int) -> None:
    """DNS rebinding: a page on another origin that resolves to 127.0.0.1 is refused."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{http_server}/mcp", data=body, method="POST",
        headers={"Host": "evil.example", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (403, 421)
