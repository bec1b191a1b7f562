"""The Vercel AI SDK scenarios (run by ``tests/frameworks/vercel/run.cjs`` in node) and the node setup.

One agent (``functionId`` "concierge", four tools: ``get_weather`` and ``local_time`` return,
``book_table`` throws for "Chez Nobody", ``ask_expert`` runs a sub-agent) and six scenarios, each scripted turn by turn here: the
replies the local OpenAI-compatible server gives, and the tool results run.cjs's tools return.

The node projects (``vercel/ai5``, ``vercel/ai6``: one per ``ai`` major, each with its lockfile) are
installed with ``npm ci`` when their ``node_modules`` does not match the lockfile (a stamp holds the
lockfile's hash). Without node >= 20.6 and npm, or when ``npm ci`` fails, the tests skip with the
reason, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import Behaviour, FakeOpenAI, per_model, text, tool_calls

ROOT = Path(__file__).resolve().parent / "vercel"
RUNNER = ROOT / "run.cjs"
PROJECTS = {"ai5": ROOT / "ai5", "ai6": ROOT / "ai6"}
AGENT = "concierge"
FUNCTIONS = ("generateText", "streamText", "agent")
"""How run.cjs runs the concierge: the two functions, and the agent class (``agent.generate``)."""
STAMP = ".otel-agent-eval-lock.sha256"
MIN_NODE = (20, 6)


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]
    result: Any
    """What the tool returned (run.cjs), or what the model was sent back for a tool that threw."""
    error: str | None = None
    """The exception message of a tool that threw."""
    invalid: bool = False
    """The tool's schema rejected the arguments: never executed (no tool span); the model is sent
    an error text."""


@dataclass(frozen=True)
class Turn:
    """One model response: its tool calls, its text, the usage the server reports."""

    calls: tuple[Call, ...]
    content: str | None
    usage: tuple[int, int]

    def reply(self) -> Behaviour:
        if self.calls:
            return tool_calls(*((c.call_id, c.name, c.arguments) for c in self.calls), content=self.content, usage=self.usage)
        return text(self.content or "", usage=self.usage)


@dataclass(frozen=True)
class Scenario:
    name: str
    prompt: str
    turns: tuple[Turn, ...]
    title: str = ""
    """How docs/fidelity.md's Vercel table names it."""
    expert: tuple[Turn, ...] = ()
    """The sub-agent's turns, when the concierge calls ask_expert (whose question is its prompt)."""

    @property
    def final_output(self) -> str | None:
        return self.turns[-1].content


EXPERT = "weather-expert"
TOOLS = [("get_weather", ["city"]), ("local_time", ["city"]), ("book_table", ["people", "restaurant"]),
         ("ask_expert", ["question"])]
"""The tools run.cjs offers, with their parameters."""

PARIS = Call("call_w", "get_weather", {"city": "Paris"}, {"city": "Paris", "forecast": "sunny", "temperature_c": 21})
NO_TABLE = "no tables left at Chez Nobody"

SCENARIOS = {s.name: s for s in (
    Scenario("single", "What's the weather in Paris?", (
        Turn((PARIS,), None, (11, 3)),
        Turn((), "Sunny, 21C in Paris.", (20, 5)),
    ), title="single tool"),
    Scenario("parallel", "Weather and local time in Tokyo?", (
        Turn((Call("call_w", "get_weather", {"city": "Tokyo"}, {"city": "Tokyo", "forecast": "sunny", "temperature_c": 21}),
              Call("call_t", "local_time", {"city": "Tokyo"}, "10:30 in Tokyo")), None, (11, 3)),
        Turn((), "Sunny; 10:30.", (30, 4)),
    ), title="parallel tools"),
    # book_table throws: the tool span ends ERROR with an exception event and no result; the
    # model is sent the error text ({type: "error-text"}), which is the call's result.
    Scenario("failing", "Book a table for 2 at Chez Nobody.", (
        Turn((Call("call_b", "book_table", {"restaurant": "Chez Nobody", "people": 2}, NO_TABLE, error=NO_TABLE),), None, (12, 3)),
        Turn((), "Sorry, no tables.", (25, 4)),
    ), title="failing tool"),
    Scenario("multistep", "If it is sunny in Paris, book a table for 2 at Le Jardin.", (
        Turn((PARIS,), None, (13, 3)),
        Turn((Call("call_b", "book_table", {"restaurant": "Le Jardin", "people": 2}, "booked Le Jardin"),),
             "Sunny, booking.", (20, 6)),
        Turn((), "Booked Le Jardin.", (30, 4)),
    ), title="multi-step"),
    # Arguments the tool's schema rejects (people missing): the SDK does not execute the tool and
    # sends the model an error text instead of a result.
    Scenario("invalid", "Book a table at Le Jardin.", (
        Turn((Call("call_x", "book_table", {"restaurant": "Le Jardin"}, None, invalid=True),), None, (10, 2)),
        Turn((), "For how many people?", (20, 3)),
    ), title="invalid tool input"),
    # A sub-agent as a tool: ask_expert's execute runs its own generateText (functionId
    # weather-expert), whose spans nest under the ask_expert tool span.
    Scenario("subagent", "Ask the expert about the weather in Paris.", (
        Turn((Call("call_ask", "ask_expert", {"question": "Weather in Paris?"}, "Sunny in Paris."),), None, (14, 3)),
        Turn((), "The expert says: sunny.", (28, 5)),
    ), expert=(
        Turn((PARIS,), None, (9, 2)),
        Turn((), "Sunny in Paris.", (17, 4)),
    ), title="sub-agent"),
)}


def run_name(scenario: str, function: str, content: bool = True) -> str:
    """The run's model name and ``metadata.sessionId`` (the AgentTrace's conversation id)."""
    return f"{scenario}-{function}" + ("" if content else "-nocontent")


def replies(scenario: Scenario, name: str) -> dict[str, list[Behaviour]]:
    """The scripted server's replies per model: the concierge's, and its sub-agent's (``<run>-expert``)."""
    out = {name: [t.reply() for t in scenario.turns]}
    if scenario.expert:
        out[f"{name}-expert"] = [t.reply() for t in scenario.expert]
    return out


# --------------------------------------------------------------------------- node setup


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"Vercel AI SDK tests cannot run under CI: {reason}")
    pytest.skip(reason)


def _node_version(node: str) -> tuple[int, ...]:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    return tuple(int(p) for p in out.lstrip("v").split(".")[:2] if p.isdigit())


def install(project: Path) -> str:
    """``npm ci`` in ``project`` unless its node_modules matches the lockfile; the node binary."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("node and npm are needed for the Vercel AI SDK tests (not on PATH)")
    assert node is not None and npm is not None
    if _node_version(node) < MIN_NODE:
        _unavailable(f"node >= {'.'.join(map(str, MIN_NODE))} is needed for the Vercel AI SDK tests")
    digest = hashlib.sha256((project / "package-lock.json").read_bytes()).hexdigest()
    stamp = project / "node_modules" / STAMP
    with open(project / ".npm-ci.lock", "w") as lock:  # one installer at a time (pytest-xdist)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == digest:
            return node
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=project,
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            _unavailable(f"npm ci failed in {project}: {done.stderr[-1500:]}")
        stamp.write_text(digest)
    return node


# --------------------------------------------------------------------------- a node run


Run = tuple[str, str, bool]
"""(scenario, function, content recorded)."""


def run_node(major: str, protocol: str, api: str, otlp: str, model: FakeOpenAI, runs: Sequence[Run],
             spans_file: Path) -> dict[str, dict[str, Any]]:
    """Script ``model`` for ``runs``, run them in node (one process) exporting to ``otlp``; run.cjs's line per run."""
    node = install(PROJECTS[major])
    model.script(*per_model({k: v for s, f, c in runs for k, v in replies(SCENARIOS[s], run_name(s, f, c)).items()}))
    options = {
        "project": str(PROJECTS[major]), "otlp": otlp, "protocol": protocol, "api": api, "baseURL": model.base_url,
        "spans": str(spans_file),
        "runs": [{"name": run_name(s, f, c), "function": f, "prompt": SCENARIOS[s].prompt, "content": c} for s, f, c in runs],
    }
    done = subprocess.run([node, str(RUNNER), json.dumps(options)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return {line["name"]: line for line in map(json.loads, done.stdout.splitlines())}


def read_spans(spans_file: Path) -> list[dict[str, Any]]:
    """The spans run.cjs wrote: {traceId, spanId, parentSpanId, name, start, end, attributes, resource}."""
    return [json.loads(line) for line in spans_file.read_text().splitlines()]
