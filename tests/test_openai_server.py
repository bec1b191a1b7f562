"""The fake OpenAI-compatible server (tests/openai_server.py), checked with the real ``openai`` client:
both APIs, streamed and not, judge answers, scripted failures and delays, the queue, the records."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

openai = pytest.importorskip("openai")

from tests.openai_server import (  # noqa: E402
    OMIT,
    Behaviour,
    FakeOpenAI,
    answer,
    counted_usage,
    drop,
    empty,
    garbage,
    hang,
    no_choices,
    not_json,
    per_model,
    raw,
    refusal,
    scripted,
    slow,
    status,
    text,
    tool_calls,
    unexpected,
)

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
CALLS = (("call_1", "get_weather", {"city": "Paris"}), ("call_2", "get_time", {"city": "Paris", "tz": True}))
SCHEMA = {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": {
    "type": "object", "properties": {"task_completed": {}, "agent_failed": {}, "stale": {}}}}}


# ``server``: the fake OpenAI server of tests/conftest.py, reset to answer every question "yes".


@pytest.fixture()
def client(server: FakeOpenAI) -> Iterator[Any]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=5) as c:
        yield c


def chat(client: Any, **kwargs: Any) -> Any:
    return client.chat.completions.create(model=kwargs.pop("model", "m"), messages=kwargs.pop("messages", USER), **kwargs)


def verdicts(content: str) -> dict[str, str]:
    return {qid: v["answer"] for qid, v in json.loads(content).items()}


# --- chat completions -----------------------------------------------------------------------------


def test_chat_text_and_tool_calls(server: FakeOpenAI, client: Any) -> None:
    server.script(tool_calls(*CALLS, content="Looking."), text("Sunny."))
    first = chat(client)
    message = first.choices[0].message
    assert (message.content, first.choices[0].finish_reason) == ("Looking.", "tool_calls")
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == list(CALLS)
    second = chat(client)
    assert (second.choices[0].message.content, second.choices[0].message.tool_calls) == ("Sunny.", None)
    assert second.choices[0].finish_reason == "stop" and second.usage.total_tokens > 0


def test_chat_stream_parses_into_the_same_answer(server: FakeOpenAI, client: Any) -> None:
    server.script(tool_calls(*CALLS, content="Let me look that up.", usage=(7, 3)))
    with client.chat.completions.stream(model="m", messages=USER, stream_options={"include_usage": True}) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert [d for d in deltas if d] == ["Let ", "me ", "look ", "that ", "up."]  # word by word
    message = final.choices[0].message
    assert message.content == "Let me look that up." and final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == list(CALLS)
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (7, 3)
    assert server.requests[-1].body["stream"] is True


def test_chat_stream_has_usage_only_when_asked(server: FakeOpenAI, client: Any) -> None:
    chunks = list(chat(client, stream=True))
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


# --- the Responses API ----------------------------------------------------------------------------


def test_responses_text_and_function_calls(server: FakeOpenAI, client: Any) -> None:
    server.script(tool_calls(*CALLS, content="Looking.", usage=(5, 2)), text("Sunny."))
    first = client.responses.create(model="m", input="Weather?")
    assert first.output_text == "Looking." and (first.usage.input_tokens, first.usage.output_tokens) == (5, 2)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == list(CALLS)
    assert client.responses.create(model="m", input="Weather?").output_text == "Sunny."
    assert [r.api for r in server.requests] == ["responses", "responses"]


def test_responses_stream_builds_the_same_response(server: FakeOpenAI, client: Any) -> None:
    server.script(tool_calls(*CALLS, content="Two calls.", usage=(5, 2)), refusal("No."), refusal("No."))
    with client.responses.stream(model="m", input="Weather?") as stream:
        kinds = [event.type for event in stream]
        streamed = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == 2 and kinds.count("response.function_call_arguments.delta") == 4
    assert streamed.output_text == "Two calls." and (streamed.usage.input_tokens, streamed.usage.output_tokens) == (5, 2)
    calls = [item for item in streamed.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == list(CALLS)
    with client.responses.stream(model="m", input="Weather?") as stream:
        assert stream.get_final_response().output[0].content[0].refusal == "No."
    assert client.responses.create(model="m", input="Weather?").output[0].content[0].refusal == "No."


# --- judge answers --------------------------------------------------------------------------------


def test_judge_answers_per_question_from_the_schema(server: FakeOpenAI, client: Any) -> None:
    server.script(answer({"agent_failed": "no", "stale": "maybe"}), answer({"stale": OMIT}, default="no"))
    first = chat(client, response_format=SCHEMA).choices[0].message.content
    assert verdicts(first) == {"task_completed": "yes", "agent_failed": "no", "stale": "maybe"}
    second = chat(client, response_format=SCHEMA).choices[0].message.content
    assert verdicts(second) == {"task_completed": "no", "agent_failed": "no"}


def test_judge_questions_from_the_prompt_and_from_a_callable(server: FakeOpenAI, client: Any) -> None:
    prompt = "RECORD\n- not_a_question: x\nQUESTIONS\n- q_one: Did it?\n- q-two: Really?\n"
    server.script(answer(lambda ids, body: {ids[-1]: "no"}))
    content = chat(client, messages=[{"role": "system", "content": "judge"}, {"role": "user", "content": prompt}])
    assert verdicts(content.choices[0].message.content) == {"q_one": "yes", "q-two": "no"}
    text_format = {"format": {"type": "json_schema", "name": "v", "schema": SCHEMA["json_schema"]["schema"]}}
    response = client.responses.create(model="m", input=prompt, text=text_format)
    assert verdicts(response.output_text) == {"task_completed": "yes", "agent_failed": "yes", "stale": "yes"}


def test_judge_and_agent_turns_share_one_queue_by_model(server: FakeOpenAI, client: Any) -> None:
    server.script(*per_model({"agent": [tool_calls(CALLS[0]), text("Done.")], "judge": [answer({"stale": "no"})]}))
    assert verdicts(chat(client, model="judge", response_format=SCHEMA).choices[0].message.content)["stale"] == "no"
    assert chat(client, model="agent").choices[0].message.tool_calls[0].id == "call_1"
    assert verdicts(chat(client, model="judge", response_format=SCHEMA).choices[0].message.content)["stale"] == "yes"
    assert len(server.remaining()) == 1
    assert chat(client, model="agent").choices[0].message.content == "Done."
    assert server.remaining() == [] and [r.behaviour.model for r in server.requests] == ["judge", "agent", None, "agent"]


# --- failures -------------------------------------------------------------------------------------


def test_status_with_retry_after(server: FakeOpenAI, client: Any) -> None:
    server.script(status(429, retry_after="0.5"), status(503), status(401))
    with pytest.raises(openai.RateLimitError) as limited:
        chat(client)
    assert limited.value.response.headers["retry-after"] == "0.5"
    with pytest.raises(openai.InternalServerError):
        chat(client)
    with pytest.raises(openai.AuthenticationError):
        chat(client)
    assert chat(client).choices  # the default again


@pytest.mark.parametrize("behaviour", [drop(), garbage()])
def test_broken_connections(server: FakeOpenAI, client: Any, behaviour: Any) -> None:
    server.script(behaviour)
    with pytest.raises(openai.APIConnectionError):
        chat(client)
    assert server.request_count == 1 and chat(client).choices


def test_bodies_a_judge_cannot_use(server: FakeOpenAI, client: Any) -> None:
    server.script(refusal("I won't."), empty(), no_choices(), raw("{not json"), not_json())
    message = chat(client).choices[0].message
    assert (message.content, message.refusal) == (None, "I won't.")
    assert chat(client).choices[0].message.content == ""
    assert chat(client).choices == []
    assert chat(client).choices[0].message.content == "{not json"
    with pytest.raises(ValueError):  # a 200 whose JSON body does not parse
        chat(client)


def test_slow_answer_times_the_client_out_then_answers_the_next(server: FakeOpenAI) -> None:
    server.script(slow(1.0))
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=0.2) as impatient:
        with pytest.raises(openai.APITimeoutError):
            chat(impatient)
    server.script(slow(0.05, {"stale": "no"}))
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=5) as patient:
        assert verdicts(chat(patient, response_format=SCHEMA).choices[0].message.content)["stale"] == "no"


def test_hang_holds_every_request_until_the_server_stops() -> None:
    fake = FakeOpenAI(hang()).start()
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            httpx.post(fake.base_url + "/chat/completions", json={"model": "m", "messages": USER}, timeout=60)
        except httpx.HTTPError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    guard = time.monotonic() + 30  # a hang guard, not a speed check
    while fake.in_flight < 2 and not errors and time.monotonic() < guard:
        time.sleep(0.01)
    assert (fake.in_flight, fake.max_in_flight, errors) == (2, 2, [])  # both held at once
    fake.close()
    for t in threads:
        t.join(10)
    assert [type(e) for e in errors] == [httpx.RemoteProtocolError] * 2


# --- records and errors ---------------------------------------------------------------------------


def test_every_request_is_recorded(server: FakeOpenAI, client: Any) -> None:
    server.script(text("Hi."))
    chat(client, temperature=0)
    request = server.requests[0]
    assert (request.index, request.api, request.path) == (0, "chat", "/v1/chat/completions")
    assert request["body"] == request.body and request.body["temperature"] == 0
    assert request.headers["authorization"] == "Bearer test" and request.behaviour == text("Hi.")
    assert server.errors == []


def test_unknown_paths_and_unexpected_requests_are_errors(server: FakeOpenAI, client: Any) -> None:
    server.script(unexpected("not now"))
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="m", input="x")
    with pytest.raises(openai.BadRequestError):
        chat(client)
    assert server.errors == ["unknown path /v1/embeddings", "not now (request 1, model 'm')"]
    assert server.remaining() == [] and server.request_count == 2


def test_scripted_servers_count_usage_and_fail_past_the_script() -> None:
    with scripted({"a": [text("one"), text("two")]}) as fake:
        with openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0) as c:
            usages = [(r.usage.prompt_tokens, r.usage.completion_tokens) for r in (chat(c, model="a"), chat(c, model="a"))]
            assert usages == [counted_usage(0, {}, ""), counted_usage(1, {}, "")] == [(100, 10), (101, 11)]
            with pytest.raises(openai.BadRequestError):
                chat(c, model="a")
        assert fake.errors == ["no scripted reply left (request 2, model 'a')"]


def test_sized_usage_grows_with_the_prompt(server: FakeOpenAI, client: Any) -> None:
    small = chat(client, messages=[{"role": "user", "content": "x" * 40}]).usage
    big = chat(client, messages=[{"role": "user", "content": "x" * 4000}]).usage
    assert (small.prompt_tokens, big.prompt_tokens) == (11, 1001)
    server.script(text("no usage", usage=False))
    assert chat(client).usage is None


def test_unknown_behaviour_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown behaviour kind 'http_garbage'"):
        Behaviour("http_garbage")
