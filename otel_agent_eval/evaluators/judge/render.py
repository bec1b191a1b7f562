"""What the judge sees: a plain-text rendering of an agent trace, within a size budget.

The large-trace rule (documented in docs/judge.md), applied until the text fits
``max_chars``:

1. every field (a text, the arguments or the result of one call) longer than
   ``max_field_chars`` is clipped to its head and tail around an explicit
   ``[... N chars omitted ...]`` marker;
2. every step is rendered in full;
3. if that is too long, middle steps are *summarized*, from the middle
   outwards, as one line per tool call (name, arguments clipped to 200
   characters, result length or error) and the step's text length; the first
   two and last two steps stay in full as long as possible;
4. if even that is too long, the summarized steps are *aggregated* into one
   line: the count of steps and calls per tool, and failures;
5. if the text still does not fit, the evaluator returns an ``error``
   (``trace_too_large``) instead of judging a part silently.

``JudgeView`` records what was shown (``steps_shown``, ``steps_summarized``,
``steps_aggregated``, ``fields_clipped``, ``chars``) for the result details.
Pure functions only.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...model import AgentStep, AgentTrace, ToolCall

KEEP_HEAD = 2
KEEP_TAIL = 2
SUMMARY_ARGS_CHARS = 200


@dataclass
class JudgeView:
    text: str
    steps_shown: list[int] = field(default_factory=list)
    steps_summarized: list[int] = field(default_factory=list)
    steps_aggregated: list[int] = field(default_factory=list)
    fields_clipped: int = 0
    fits: bool = True

    @property
    def chars(self) -> int:
        return len(self.text)

    def describe(self) -> dict[str, Any]:
        return {
            "steps_shown": self.steps_shown,
            "steps_summarized": self.steps_summarized,
            "steps_aggregated": self.steps_aggregated,
            "fields_clipped": self.fields_clipped,
            "chars": self.chars,
        }


def to_text(value: Any) -> str:
    """Tool arguments and results as text: strings as they are, the rest as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def clip(text: str, limit: int) -> tuple[str, bool]:
    """Head and tail of ``text`` around an explicit marker when it is longer than ``limit``."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}[... {omitted} chars omitted ...]{text[-tail:]}", True


class _Clipper:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.clipped = 0

    def __call__(self, value: Any) -> str:
        text, clipped = clip(to_text(value), self.limit)
        self.clipped += clipped
        return text


def call_label(step: AgentStep, position: int) -> str:
    """Stable reference to a call in prompts and questions: ``3.1`` is step 3's second call."""
    return f"{step.index}.{position}"


def render_call(step: AgentStep, position: int, call: ToolCall, clipper: _Clipper) -> str:
    lines = [f"  tool call {call_label(step, position)}: {call.name}({clipper(call.arguments)})"]
    if call.failed:
        lines.append(f"    ERROR: {clipper(call.error)}")
    elif not call.executed:
        lines.append("    (not executed: no result recorded)")
    else:
        lines.append(f"    result: {clipper(call.result)}")
    return "\n".join(lines)


def render_step(step: AgentStep, clipper: _Clipper) -> str:
    lines = [f"STEP {step.index}:"]
    if step.thought:
        lines.append(f"  thought: {clipper(step.thought)}")
    if step.output:
        lines.append(f"  output: {clipper(step.output)}")
    for position, call in enumerate(step.tool_calls):
        lines.append(render_call(step, position, call, clipper))
    if step.error:
        lines.append(f"  STEP ERROR: {clipper(step.error)}")
    return "\n".join(lines)


def summarize_step(step: AgentStep) -> str:
    text_len = len(step.thought or "") + len(step.output or "")
    lines = [f"STEP {step.index} (summarized; text {text_len} chars):"]
    for position, call in enumerate(step.tool_calls):
        args, _ = clip(to_text(call.arguments), SUMMARY_ARGS_CHARS)
        outcome = f"ERROR: {clip(to_text(call.error), SUMMARY_ARGS_CHARS)[0]}" if call.failed else f"result {len(to_text(call.result))} chars"
        lines.append(f"  tool call {call_label(step, position)}: {call.name}({args}) -> {outcome}")
    return "\n".join(lines)


def aggregate_steps(steps: list[AgentStep]) -> str:
    calls = Counter(call.name for step in steps for call in step.tool_calls)
    failed = sum(call.failed for step in steps for call in step.tool_calls)
    per_tool = ", ".join(f"{name} x{n}" for name, n in sorted(calls.items())) or "no tool calls"
    return (
        f"STEPS {steps[0].index}-{steps[-1].index} (aggregated, {len(steps)} steps): "
        f"{per_tool}; {failed} failed call(s)"
    )


def render_header(trace: AgentTrace, clipper: _Clipper) -> str:
    lines = [f"AGENT: {trace.agent_name}", f"TASK (user input): {clipper(trace.input) or '(none recorded)'}"]
    return "\n".join(lines)


def render_footer(trace: AgentTrace, clipper: _Clipper) -> str:
    lines = [f"FINAL RESPONSE: {clipper(trace.final_output) or '(none)'}"]
    if trace.status == "error":
        lines.append(f"AGENT RUN ENDED WITH AN ERROR: {clipper(trace.error) or '(no message)'}")
    return "\n".join(lines)


def render_trace(
    trace: AgentTrace, *, max_chars: int, max_field_chars: int, extra: str = "", include_steps: bool = True
) -> JudgeView:
    """Apply the large-trace rule (module docstring) and say what was shown."""
    clipper = _Clipper(max_field_chars)
    header = render_header(trace, clipper)
    footer = render_footer(trace, clipper)
    fixed = [part for part in (extra, header) if part]
    steps = trace.steps if include_steps else []
    full = {step.index: render_step(step, clipper) for step in steps}
    order = list(range(len(steps)))

    def assemble(summarized: set[int], aggregated: set[int]) -> JudgeView:
        body: list[str] = []
        view = JudgeView("", fields_clipped=clipper.clipped)
        run: list[AgentStep] = []
        for position in order:
            step = steps[position]
            if position in aggregated:
                run.append(step)
                view.steps_aggregated.append(step.index)
                continue
            if run:
                body.append(aggregate_steps(run))
                run = []
            if position in summarized:
                body.append(summarize_step(step))
                view.steps_summarized.append(step.index)
            else:
                body.append(full[step.index])
                view.steps_shown.append(step.index)
        if run:
            body.append(aggregate_steps(run))
        view.text = "\n\n".join([*fixed, *body, footer])
        view.fits = len(view.text) <= max_chars
        return view

    # Summarize middle-out, then the kept head and tail (innermost first).
    middle = order[KEEP_HEAD : max(KEEP_HEAD, len(order) - KEEP_TAIL)]
    centre = (len(middle) - 1) / 2
    by_distance = sorted(range(len(middle)), key=lambda k: (abs(k - centre), k))
    edges = sorted((i for i in order if i not in middle), key=lambda i: min(i, len(order) - 1 - i), reverse=True)
    candidates = [middle[k] for k in by_distance] + edges

    summarized: set[int] = set()
    view = assemble(summarized, set())
    for position in candidates:
        if view.fits:
            return view
        summarized.add(position)
        view = assemble(summarized, set())
    if view.fits:
        return view
    # Aggregate the middle into one line; the edges back in full, then summarized, then aggregated too.
    aggregated = set(middle)
    summarized = set()
    view = assemble(summarized, aggregated)
    for position in edges:
        if view.fits:
            return view
        summarized.add(position)
        view = assemble(summarized, aggregated)
    if not view.fits:
        view = assemble(set(), set(order))
    return view
