"""Judge building blocks without a network: settings, redaction, QAG parsing, rendering, limits, schema check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_agent_eval.config import ConfigError
from otel_agent_eval.evaluators.judge import qag
from otel_agent_eval.evaluators.judge.client import retry_after_seconds
from otel_agent_eval.evaluators.judge.limits import AnswerCache, HourlyBudget, TokenBucket, cache_key
from otel_agent_eval.evaluators.judge.qag import ParseError, Question
from otel_agent_eval.evaluators.judge.redaction import Redactor
from otel_agent_eval.evaluators.judge.render import clip, render_trace
from otel_agent_eval.evaluators.judge.schema_check import check_call, tool_schemas
from otel_agent_eval.evaluators.judge.settings import JudgeSettings, settings_table
from otel_agent_eval.model import AgentStep, AgentTrace, ToolCall


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- settings -------------------------------------------------------------------------------------


def test_settings_from_env_with_both_mapping_formats() -> None:
    s = JudgeSettings.load(env={
        "OTEL_AGENT_EVAL_JUDGE_MODEL": "gpt-4o-mini",
        "OTEL_AGENT_EVAL_JUDGE_BASE_URL": "http://127.0.0.1:11434/v1",
        "OTEL_AGENT_EVAL_JUDGE_HEADERS": "api-key=abc, x-team=evals",
        "OTEL_AGENT_EVAL_JUDGE_PRICES": "gpt-4o-mini=0.15/0.6",
        "OTEL_AGENT_EVAL_JUDGE_BUDGET_USD_PER_HOUR": "2.5",
        "OTEL_AGENT_EVAL_JUDGE_TEMPERATURE": "none",
    })
    assert s.enabled and s.headers == {"api-key": "abc", "x-team": "evals"}
    assert s.evaluators == ("task_completion", "plan_quality", "tool_call_necessity", "trajectory_efficiency")
    assert s.price("gpt-4o-mini").output == 0.6 and s.temperature is None
    s2 = JudgeSettings.load(env={"OTEL_AGENT_EVAL_JUDGE_HEADERS": '{"api-key": "x"}',
                                 "OTEL_AGENT_EVAL_JUDGE_PRICES": '{"m": {"input": 1, "output": 2}}'})
    assert s2.headers == {"api-key": "x"} and s2.prices["m"].input == 1 and not s2.enabled


def test_api_key_falls_back_to_openai_api_key_and_is_secret() -> None:
    s = JudgeSettings.load(env={"OTEL_AGENT_EVAL_JUDGE_MODEL": "m", "OPENAI_API_KEY": "sk-secret"})
    assert s.api_key.get_secret_value() == "sk-secret" and "sk-secret" not in repr(s)
    s = JudgeSettings.load(env={"OTEL_AGENT_EVAL_JUDGE_MODEL": "m", "OPENAI_API_KEY": "a", "OTEL_AGENT_EVAL_JUDGE_API_KEY": "b"})
    assert s.api_key.get_secret_value() == "b"


@pytest.mark.parametrize(("env", "named"), [
    ({"OTEL_AGENT_EVAL_JUDGE_CONCURRENCY": "0"}, "OTEL_AGENT_EVAL_JUDGE_CONCURRENCY"),
    ({"OTEL_AGENT_EVAL_JUDGE_HEADERS": "novalue"}, "OTEL_AGENT_EVAL_JUDGE_HEADERS"),
    ({"OTEL_AGENT_EVAL_JUDGE_PRICES": "m=1"}, "OTEL_AGENT_EVAL_JUDGE_PRICES"),
    ({"OTEL_AGENT_EVAL_JUDGE_RESPONSE_FORMAT": "xml"}, "OTEL_AGENT_EVAL_JUDGE_RESPONSE_FORMAT"),
    ({"OTEL_AGENT_EVAL_JUDGE_MODEL": "m", "OTEL_AGENT_EVAL_JUDGE_BASE_URL": "http://x", "OTEL_AGENT_EVAL_JUDGE_BUDGET_USD_PER_HOUR": "1"},
     "OTEL_AGENT_EVAL_JUDGE_PRICES"),
    ({"OTEL_AGENT_EVAL_JUDGE_MODEL": "m"}, "OTEL_AGENT_EVAL_JUDGE_API_KEY"),
    ({"OTEL_AGENT_EVAL_JUDGE_EVALUATORS": "task_completion,vibes"}, "OTEL_AGENT_EVAL_JUDGE_EVALUATORS"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        JudgeSettings.load(env=env)


def test_unknown_argument_and_table() -> None:
    with pytest.raises(ConfigError, match="unknown setting.*modle"):
        JudgeSettings.load(env={}, modle="x")
    assert "OTEL_AGENT_EVAL_JUDGE_BUDGET_TOKENS_PER_HOUR" in settings_table()


# --- redaction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("write to bob.smith@example.com", "write to [EMAIL]"),
    ("call +33 1 23 45 67 89 or (555) 123-4567", "call [PHONE] or [PHONE]"),
    ("key sk-proj-abcdefghijklmnopqrstuvwx1234 ok", "key [API_KEY] ok"),
    ("Authorization: Bearer eyJhbGciOi.abc.def", "Authorization: [BEARER_TOKEN]"),
    ("order 12345 on 2024-05-01 costs 12.50, v1.2.3", "order 12345 on 2024-05-01 costs 12.50, v1.2.3"),
    ("card 4111 1111 1111 1111 or 4111-1111-1111-1111", "card [CARD_NUMBER] or [CARD_NUMBER]"),
    # not phone numbers: an IPv4 address, a 16-digit tracking number failing Luhn, a ms timestamp
    ("host 192.168.100.200 parcel 1234 5678 9012 3456 at 1732900000123",
     "host 192.168.100.200 parcel 1234 5678 9012 3456 at 1732900000123"),
])
def test_builtin_redaction(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_user_redaction_runs_after_builtin_and_builtin_can_be_off() -> None:
    r = Redactor(user=lambda t: t.replace("ACME", "[CUSTOMER]"))
    assert r("ACME a@b.io") == "[CUSTOMER] [EMAIL]"
    assert Redactor(builtin=False)("a@b.io") == "a@b.io"


# --- QAG ------------------------------------------------------------------------------------------

QS = [Question("done", "Done?", "yes"), Question("failed", "Failed?", "no")]


def test_schema_is_strict_and_lists_every_question() -> None:
    schema = qag.answer_schema(QS)
    assert schema["required"] == ["done", "failed"] and schema["additionalProperties"] is False
    assert schema["properties"]["done"]["properties"]["answer"]["enum"] == ["yes", "no", "unknown"]


@pytest.mark.parametrize("content", [
    '{"done": {"answer": "yes", "reason": "r"}, "failed": {"answer": "no", "reason": "r"}}',
    '```json\n{"done": {"answer": "Yes."}, "failed": "no"}\n```',
    'Here you go: {"done": true, "failed": {"answer": "NO"}} Hope it helps.',
    '{"answers": [{"id": "done", "answer": "yes"}, {"id": "failed", "answer": "no"}]}',
    # A reasoning model's thoughts, a draft of the answer in them (two objects, malformed, before they were set aside).
    '<think>Draft: {"done": "no", "failed": "no"}. No: it did finish.</think>\n{"done": "yes", "failed": "no"}',
])
def test_strict_parser_accepts_unambiguous_shapes(content: str) -> None:
    answers = qag.parse_answers(content, QS)
    assert {k: v["answer"] for k, v in answers.items()} == {"done": "yes", "failed": "no"}
    assert qag.score(QS, answers) == 1.0


@pytest.mark.parametrize(("content", "reason"), [
    ("I think the agent did fine.", "malformed_response"),
    ('{"done": "yes"} {"failed": "no"}', "malformed_response"),
    ('{"done": "yes", "failed": "no"} <think>{"done": "no"}</think>', "malformed_response"),  # thoughts lead or are answer
    ("[1, 2]", "malformed_response"),
    ('{"done": {"answer": "maybe"}, "failed": {"answer": "no"}}', "ambiguous_answer"),
    ('{"done": {"answer": "yes, mostly"}, "failed": "no"}', "ambiguous_answer"),
    ('{"done": {"answer": "yes"}}', "ambiguous_answer"),
])
def test_strict_parser_rejects_the_rest(content: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        qag.parse_answers(content, QS)
    assert info.value.reason == reason


def test_score_counts_negated_questions_by_expected_answer() -> None:
    answers = {"done": {"answer": "yes", "reason": ""}, "failed": {"answer": "yes", "reason": ""}}
    assert qag.score(QS, answers) == 0.5


@pytest.mark.parametrize("content", [
    '{"done": {"answer": "unknown", "reason": "no result shown"}, "failed": {"answer": "no", "reason": "r"}}',
    '{"done": "Unknown.", "failed": false}',
])
def test_parser_accepts_unknown(content: str) -> None:
    answers = qag.parse_answers(content, QS)
    assert {k: v["answer"] for k, v in answers.items()} == {"done": "unknown", "failed": "no"}


def _answers(**given: str) -> dict[str, dict[str, str]]:
    return {qid: {"answer": answer, "reason": f"because {qid}"} for qid, answer in given.items()}


CRITICAL = [Question("done", "Done?", "yes", critical=True), Question("failed", "Failed?", "no", critical=True),
            Question("clear", "Clear?", "yes"), Question("sourced", "Sourced?", "yes")]


def test_a_critical_miss_fails_whatever_the_share() -> None:
    verdict = qag.verdict(CRITICAL, _answers(done="yes", failed="yes", clear="yes", sourced="yes"))
    assert verdict.score == 0.75 and verdict.critical_misses == ("failed",)
    assert not verdict.passed(0.5) and "critical: failed" in verdict.explanation
    fine = qag.verdict(CRITICAL, _answers(done="yes", failed="no", clear="no", sourced="yes"))
    assert fine.score == 0.75 and fine.passed(0.75) and not fine.passed(0.8)


def test_unknown_answers_leave_the_denominator_and_are_reported() -> None:
    verdict = qag.verdict(CRITICAL, _answers(done="yes", failed="unknown", clear="no", sourced="unknown"))
    assert verdict.score == 0.5 and verdict.unknown == ("failed", "sourced") and verdict.misses == ("clear",)
    assert not verdict.insufficient and "2 unknown" in verdict.explanation
    assert verdict.describe() == {"misses": ["clear"], "critical_misses": [], "unknown": ["failed", "sourced"]}


@pytest.mark.parametrize(("given", "insufficient"), [
    ({"done": "unknown", "failed": "unknown", "clear": "yes", "sourced": "yes"}, True),  # every critical one
    ({"done": "unknown", "failed": "unknown", "clear": "unknown", "sourced": "unknown"}, True),  # every one
    ({"done": "unknown", "failed": "no", "clear": "yes", "sourced": "yes"}, False),
])
def test_insufficient_evidence(given: dict[str, str], insufficient: bool) -> None:
    verdict = qag.verdict(CRITICAL, _answers(**given))
    assert verdict.insufficient is insufficient
    assert ("not enough evidence" in verdict.explanation) is insufficient


def test_without_critical_questions_only_all_unknown_is_insufficient() -> None:
    assert not qag.verdict(QS, _answers(done="unknown", failed="no")).insufficient
    all_unknown = qag.verdict(QS, _answers(done="unknown", failed="unknown"))
    assert all_unknown.insufficient and all_unknown.score is None


# --- rendering (large traces) ---------------------------------------------------------------------


def big_trace(steps: int, result_chars: int = 500) -> AgentTrace:
    return AgentTrace(
        trace_id="1" * 32, agent_name="a", input="task", final_output="done",
        steps=[AgentStep(index=i, thought=f"thinking {i}", tool_calls=[ToolCall(name=f"tool{i % 3}", arguments={"i": i}, result="x" * result_chars)])
               for i in range(steps)],
    )


def test_small_trace_is_shown_in_full() -> None:
    view = render_trace(big_trace(3), max_chars=10_000, max_field_chars=2_000)
    assert view.steps_shown == [0, 1, 2] and not view.steps_summarized and view.fits
    assert view.describe()["chars"] == len(view.text)


def test_middle_steps_are_summarized_first_and_edges_kept() -> None:
    view = render_trace(big_trace(20), max_chars=6_000, max_field_chars=2_000)
    assert view.fits and len(view.text) <= 6_000
    assert {0, 1, 18, 19} <= set(view.steps_shown)
    assert view.steps_summarized and min(view.steps_summarized) > 1 and max(view.steps_summarized) < 18
    assert "result 500 chars" in view.text
    assert sorted(view.steps_shown + view.steps_summarized) == list(range(20))


def test_huge_traces_are_aggregated_and_never_cut_silently() -> None:
    view = render_trace(big_trace(400), max_chars=4_000, max_field_chars=2_000)
    assert view.fits and view.steps_aggregated
    assert "aggregated" in view.text and "tool0 x" in view.text
    assert sorted(view.steps_shown + view.steps_summarized + view.steps_aggregated) == list(range(400))


def test_long_fields_are_clipped_with_a_marker() -> None:
    text, clipped = clip("a" * 5000, 300)
    assert clipped and "[... 4700 chars omitted ...]" in text
    view = render_trace(big_trace(1, result_chars=10_000), max_chars=20_000, max_field_chars=1_000)
    assert view.fields_clipped == 1 and "chars omitted" in view.text


def test_structured_tool_errors_are_rendered_as_errors() -> None:
    trace = AgentTrace(trace_id="1" * 32, steps=[AgentStep(index=0, tool_calls=[
        ToolCall(name="a", error="TimeoutError: upstream"), ToolCall(name="b", result="no error here")])])
    text = render_trace(trace, max_chars=10_000, max_field_chars=500).text
    assert 'ERROR: "TimeoutError: upstream"' in text and 'result: "no error here"' in text


# --- limits and cache -----------------------------------------------------------------------------


def test_token_bucket_reserves_and_reports_the_wait() -> None:
    clock = Clock()
    bucket = TokenBucket(60, clock)  # one per second, burst 60
    assert all(bucket.reserve(1) == 0 for _ in range(60))
    assert bucket.reserve(1) == pytest.approx(1.0)
    clock.now += 2
    assert bucket.reserve(1) == 0
    assert TokenBucket(0, clock).reserve(10**9) == 0


def test_hourly_budget_slides() -> None:
    clock = Clock()
    budget = HourlyBudget(max_tokens=1000, clock=clock)
    budget.spend(600, 0)
    assert budget.remaining_ratio() == pytest.approx(0.4) and not budget.exhausted()
    clock.now += 1800
    budget.spend(400, 0)
    assert budget.exhausted() and budget.remaining_ratio() == 0
    clock.now += 1801
    assert not budget.exhausted() and budget.remaining_ratio() == pytest.approx(0.6)
    usd = HourlyBudget(max_usd=1.0, clock=clock)
    usd.spend(10, 0.75)
    assert usd.remaining_ratio() == pytest.approx(0.25)
    assert HourlyBudget().remaining_ratio() == 1.0


def test_cache_lru_and_disk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = AnswerCache(2, str(tmp_path))
    for key in "abc":
        cache.put(key, {"content": key})
    assert cache._items.keys() == {"b", "c"}
    assert cache.get("a") == {"content": "a"}  # from disk
    assert json.loads((tmp_path / "a.json").read_text()) == {"content": "a"}
    assert AnswerCache(0).get("a") is None
    assert cache_key("x", "a  b\n") == cache_key("x", "a b")


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == pytest.approx(10.0)
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


# --- deterministic argument check -----------------------------------------------------------------

DEFS = [
    {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                         "unit": {"enum": ["C", "F"]}},
        "required": ["city"], "additionalProperties": False}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
]


@pytest.mark.parametrize(("call", "problems"), [
    (ToolCall(name="get_weather", arguments={"city": "Paris", "days": 3}), []),
    (ToolCall(name="get_weather", arguments='{"city": "Paris"}'), []),
    (ToolCall(name="search", arguments={"q": "x"}), []),
    (ToolCall(name="get_weather", arguments={"days": 3}), ["missing required 'city'"]),
    (ToolCall(name="get_weather", arguments={"city": 3}), ["expected string, got integer"]),
    (ToolCall(name="get_weather", arguments={"city": "P", "days": 9}), ["9 > maximum 7"]),
    (ToolCall(name="get_weather", arguments={"city": "P", "unit": "K"}), ["not in"]),
    (ToolCall(name="get_weather", arguments={"city": "P", "x": 1}), ["unexpected property 'x'"]),
    (ToolCall(name="get_weather", arguments="{city: Paris"), ["not valid JSON"]),
    (ToolCall(name="delete_all", arguments={}), ["not among the defined tools"]),
])
def test_check_call(call: ToolCall, problems: list[str]) -> None:
    found = check_call(tool_schemas(DEFS), call)
    assert len(found) == len(problems) and all(p in f for p, f in zip(problems, found))


def test_tool_schemas_accepts_json_text() -> None:
    assert set(tool_schemas(json.dumps(DEFS))) == {"get_weather", "search"}
    assert tool_schemas("not json") == {} and tool_schemas(None) == {}


def test_docs_variable_table_is_in_sync() -> None:
    from pathlib import Path

    assert settings_table() in (Path(__file__).resolve().parents[3] / "docs" / "judge.md").read_text()


# --- verdict properties ----------------------------------------------------------------------------

_questions = st.lists(
    st.builds(Question, id=st.just(""), text=st.just("?"), expected=st.sampled_from(["yes", "no"]), critical=st.booleans()),
    min_size=1, max_size=8,
).map(lambda qs: [Question(f"q{n}", q.text, q.expected, q.critical) for n, q in enumerate(qs)])


@given(_questions, st.data(), st.floats(0.0, 1.0))
def test_verdict_properties(questions: list[Question], data: st.DataObject, threshold: float) -> None:
    given_answers = {q.id: data.draw(st.sampled_from(["yes", "no", "unknown"])) for q in questions}
    verdict = qag.verdict(questions, _answers(**given_answers))
    assert qag.verdict(questions, _answers(**{q.id: q.expected for q in questions})).passed(threshold)  # as expected: pass
    critical_miss = any(q.critical and given_answers[q.id] not in (q.expected, "unknown") for q in questions)
    if critical_miss:
        assert not verdict.passed(threshold)
    known = [q for q in questions if given_answers[q.id] != "unknown"]
    if known:  # unknowns never count, either way
        assert verdict.score == sum(given_answers[q.id] == q.expected for q in known) / len(known)
    assert verdict.insufficient == (not known or any(q.critical for q in questions)
                                    and all(given_answers[q.id] == "unknown" for q in questions if q.critical))


def test_default_judge_evaluators_are_judge_evaluators() -> None:
    """``JudgeSettings`` checks only names beyond the defaults against the evaluators (not imported otherwise)."""
    from otel_agent_eval.evaluators.judge import DEFAULT_JUDGE_EVALUATORS, JUDGE_EVALUATORS

    assert set(DEFAULT_JUDGE_EVALUATORS) <= set(JUDGE_EVALUATORS)


def test_registry_knows_the_judge_evaluators_by_name() -> None:
    """The registry names the judge evaluators without importing them (``JUDGE_EVALUATOR_NAMES``)."""
    from otel_agent_eval.evaluators.judge import JUDGE_EVALUATORS
    from otel_agent_eval.evaluators.registry import JUDGE_EVALUATOR_NAMES

    assert JUDGE_EVALUATOR_NAMES == set(JUDGE_EVALUATORS)


@pytest.mark.parametrize("plugins", [False, True], ids=["no plugin", "plugin installed"])
def test_no_judge_configured_imports_no_judge_client(plugins: bool) -> None:
    """Every command asks whether a judge is configured; without one, the client, the judge evaluators
    and their Prometheus metrics stay unimported (a fresh interpreter: this one has imported them), also
    where an installed evaluator plugin's names are checked against the built-in ones."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from otel_agent_eval.config import Settings\n"
        "from otel_agent_eval.evaluators import build_configured_evaluators, registry\n"
        f"assert bool(registry._entry_points()) or not {plugins!r}, 'the example plugin is not installed'\n"
        + ("" if plugins else "registry._entry_points = dict\n") +
        "build_configured_evaluators(Settings.load(), env={})\n"
        "print(sorted(m for m in sys.modules if m.startswith('otel_agent_eval.evaluators.judge.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PATH": ""})
    assert out.stdout.strip() == "['otel_agent_eval.evaluators.judge.settings']", out.stdout
