"""``JudgeClient``: one judge request through the official ``openai`` client, with cost control.

Every call goes: redact -> cache -> budget reservation (the estimate, held
until the real usage settles it) -> circuit breaker -> rate limits (RPM, TPM)
-> concurrency slot -> HTTP attempt with instrumentation suppressed -> retries
(429 honouring Retry-After, 5xx, timeouts, connection errors; the openai
client's own retries are off so they are ours to count) -> usage, cost,
metrics -> validation by the caller's parser -> cache.

The breaker counts whole calls (after retries): ``judge_unavailable`` and
``judge_timeout`` are failures; any answer from the judge is a success.

Failures raise ``JudgeError`` with a reason from a fixed set (``REASONS``);
a spent budget raises ``BudgetExhausted``. Evaluators turn them into results.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context

from .limits import (
    AnswerCache,
    CircuitBreaker,
    HourlyBudget,
    Reservation,
    TokenBucket,
    cache_key,
)
from .metrics import JudgeMetrics
from .redaction import Redact, Redactor
from .spans import judge_span, judge_tracer

if TYPE_CHECKING:
    from .settings import JudgeSettings

REASONS = (
    "judge_unavailable",       # connection refused, DNS, 5xx after retries, unexpected client failure
    "judge_timeout",           # HTTP timeouts after retries, or no concurrency slot before the deadline
    "judge_rejected",          # 4xx other than 429: bad key, unknown model, request refused by the API
    "rate_limited_exhausted",  # 429 after retries, Retry-After beyond the deadline, or local RPM/TPM wait too long
    "malformed_response",      # not one JSON object, or not the expected shape
    "refusal",                 # message.refusal set, or finish_reason content_filter
    "empty_response",          # no choice, or empty content
    "ambiguous_answer",        # a question answered with something other than yes / no / unknown, or not answered
    "trace_too_large",         # the large-trace rule could not fit the trace (render.py)
)

BREAKER_FAILURES = frozenset({"judge_unavailable", "judge_timeout"})
"""Call outcomes that count towards opening the circuit breaker."""
NOT_SENT = frozenset({"rate_limited_exhausted"})
"""Call outcomes that say nothing about the judge's health (local limits, 429s)."""

_KEYS: tuple[Any, ...] = tuple(
    key
    for key in (
        getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None),
        getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None),
        "suppress_instrumentation",  # the plain string older instrumentations read
    )
    if key is not None
)


@contextlib.contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Judge HTTP calls must not become app spans (nor come back to be evaluated).

    Sets the context keys OpenTelemetry instrumentations check (the same ones
    ``opentelemetry.instrumentation.utils.suppress_instrumentation`` sets),
    without depending on ``opentelemetry-instrumentation``.
    """
    ctx = otel_context.get_current()
    for key in _KEYS:
        ctx = otel_context.set_value(key, True, ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


class JudgeError(Exception):
    """The judge could not answer usably. ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.details = details or {}


class BudgetExhausted(Exception):
    """The hourly judge budget is spent: judge evaluators skip (``budget_exhausted``)."""


@dataclass
class JudgeReply:
    content: str
    parsed: Any
    input_tokens: int
    output_tokens: int
    usage_estimated: bool
    cost_usd: float | None
    attempts: int
    cached: bool
    redactions: int


def estimate_tokens(text: str) -> int:
    """About four characters per token: good enough for limits and budgets before the call."""
    return len(text) // 4 + 1


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``retry-after-ms``, ``retry-after`` in seconds, or an HTTP date."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError, OverflowError):
        return None


class _Retry(Exception):
    def __init__(self, reason: str, message: str, wait: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.wait = wait
        self.status = status


class JudgeClient:
    """A thread-safe judge shared by all judge evaluators (one budget, one cache, one concurrency limit)."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        metrics: JudgeMetrics | None = None,
        redact: Redact | None = None,
        http_client: Any = None,
        openai_client: Any = None,
        tracer_provider: Any = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not settings.model:
            raise ValueError("JudgeClient needs a model (OTEL_AGENT_EVAL_JUDGE_MODEL)")
        self.settings = settings
        self.model: str = settings.model
        self.metrics = metrics
        self.redactor = Redactor(builtin=settings.redact, user=redact)
        self.clock = clock
        self.sleep = sleep
        self.cache = AnswerCache(settings.cache_size, settings.cache_dir)
        self.budget = HourlyBudget(settings.budget_tokens_per_hour, settings.budget_usd_per_hour, clock)
        self.rpm = TokenBucket(settings.requests_per_minute, clock)
        self.tpm = TokenBucket(settings.tokens_per_minute, clock)
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_seconds, clock)
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._openai = openai_client if openai_client is not None else self._build_openai(http_client)
        self.tracer = judge_tracer(tracer_provider)  # judge spans (spans.py): off unless a provider is given
        if metrics is not None:
            metrics.watch_budget(self.budget.remaining_ratio)
            metrics.watch_breaker(self.breaker.current)

    def _build_openai(self, http_client: Any) -> Any:
        import openai  # the ``judge`` extra: imported only when a judge is configured

        s = self.settings
        key = s.api_key.get_secret_value() if s.api_key is not None else ("not-needed" if s.base_url else None)
        return openai.OpenAI(
            api_key=key,
            base_url=s.base_url,
            timeout=s.timeout_seconds,
            max_retries=0,
            default_headers=dict(s.headers) or None,
            default_query={"api-version": s.api_version} if s.api_version else None,
            http_client=http_client,
        )

    # -- the call --------------------------------------------------------------
    def ask(
        self,
        *,
        evaluator: str,
        scope: str,
        system: str,
        user: str,
        schema: dict[str, Any],
        parse: Callable[[str], Any],
        expected_output_tokens: int = 200,
    ) -> JudgeReply:
        """Send one judge request; return the reply with ``parse(content)`` as ``parsed``.

        ``scope`` names what the answer depends on besides the text (evaluator
        name and version, prompt version): it is part of the cache key.
        ``parse`` raises ``qag.ParseError`` (reason and message) for unusable answers.
        """
        system, n1 = self.redactor.redact(system)
        user, n2 = self.redactor.redact(user)
        key = cache_key(scope, self.model, system, user)
        hit = self.cache.get(key)
        if hit is not None:
            with contextlib.suppress(Exception):
                reply = JudgeReply(**{**hit, "parsed": parse(hit["content"]), "cached": True, "attempts": 0, "redactions": n1 + n2})
                self._count(self.metrics and self.metrics.cache_hits.labels(evaluator))
                return reply
        in_tokens = estimate_tokens(system) + estimate_tokens(user)
        reservation = self.budget.reserve(in_tokens + expected_output_tokens, self._cost(in_tokens, expected_output_tokens) or 0.0)
        if reservation is None:
            self._count(self.metrics and self.metrics.budget_skips.labels(evaluator))
            raise BudgetExhausted(f"hourly judge budget spent ({self._budget_text()})")
        try:
            completion, attempts = self._guarded_request(evaluator, system, user, schema, expected_output_tokens)
            reply = self._read(completion, evaluator, system, user, attempts, n1 + n2, parse, reservation)
        except JudgeError as exc:
            self._count(self.metrics and self.metrics.errors.labels(evaluator, exc.reason))
            raise
        finally:
            self.budget.settle(reservation)  # a call that got no answer spent nothing (no-op once settled)
        self.cache.put(key, {
            "content": reply.content, "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
            "usage_estimated": reply.usage_estimated, "cost_usd": reply.cost_usd,
        })
        return reply

    def _guarded_request(self, evaluator: str, system: str, user: str, schema: dict[str, Any], out_tokens: int) -> tuple[Any, int]:
        """The request behind the circuit breaker: refused at once while it is open, its outcome recorded."""
        if not self.breaker.allow():
            self._count(self.metrics and self.metrics.breaker_rejections.labels(evaluator))
            raise JudgeError(
                "judge_unavailable",
                f"judge circuit breaker open after {self.breaker.failures} consecutive failures; "
                f"next probe in {self.breaker.retry_in():.1f}s",
                {"breaker": "open"},
            )
        ok: bool | None = None
        try:
            result = self._request(system, user, schema, out_tokens, self.clock() + self.settings.deadline_seconds)
            ok = True
            return result
        except JudgeError as exc:
            ok = False if exc.reason in BREAKER_FAILURES else None if exc.reason in NOT_SENT else True
            raise
        finally:
            self.breaker.record(ok)

    def _request(self, system: str, user: str, schema: dict[str, Any], out_tokens: int, deadline: float) -> tuple[Any, int]:
        estimate = estimate_tokens(system) + estimate_tokens(user) + out_tokens
        self._wait_for(self.tpm, estimate, deadline, "tokens per minute")
        attempts = 0
        while True:
            attempts += 1
            self._wait_for(self.rpm, 1, deadline, "requests per minute")
            try:
                return self._attempt(system, user, schema, deadline), attempts
            except _Retry as retry:
                wait = retry.wait
                if wait is None:
                    base = self.settings.backoff_seconds * 2 ** (attempts - 1)
                    wait = base / 2 + random.uniform(0, base / 2)
                wait = min(wait, self.settings.max_backoff_seconds) if retry.wait is None else wait
                fits = wait <= self.settings.max_backoff_seconds and self.clock() + wait < deadline
                if attempts > self.settings.max_retries or not fits:
                    self._count(self.metrics and self.metrics.requests.labels(self.model, retry.reason))
                    why = f"after {attempts} attempt(s)" if fits else f"next retry in {wait:.1f}s would pass the deadline or max backoff"
                    raise JudgeError(retry.reason, f"{retry} ({why})", {"attempts": attempts, "status": retry.status}) from None
                self._count(self.metrics and self.metrics.requests.labels(self.model, "retry"))
                self.sleep(wait)

    def _wait_for(self, bucket: TokenBucket, amount: float, deadline: float, what: str) -> None:
        wait = bucket.reserve(amount)
        if wait <= 0:
            return
        if self.clock() + wait >= deadline:
            bucket.refund(amount)
            self._count(self.metrics and self.metrics.requests.labels(self.model, "rate_limited_exhausted"))
            raise JudgeError("rate_limited_exhausted", f"local {what} limit: {wait:.1f}s wait would pass the deadline", {"limit": what})
        self.sleep(wait)

    def _attempt(self, system: str, user: str, schema: dict[str, Any], deadline: float) -> Any:
        import openai

        remaining = deadline - self.clock()
        if remaining <= 0 or not self._slots.acquire(timeout=remaining):
            self._count(self.metrics and self.metrics.requests.labels(self.model, "judge_timeout"))
            raise JudgeError("judge_timeout", "no free judge slot before the deadline (concurrency limit)")
        started = time.perf_counter()
        try:
            with suppress_instrumentation(), judge_span(self.tracer, self._openai, self.model, self.settings.temperature) as traced:
                return traced(openai_create(self._openai, self.settings, self.model, system, user, schema,
                                            timeout=max(0.1, min(self.settings.timeout_seconds, deadline - self.clock()))))
        except openai.RateLimitError as exc:
            raise _Retry("rate_limited_exhausted", "judge rate limited (429)",
                         retry_after_seconds(exc.response.headers), 429) from None
        except openai.APIStatusError as exc:
            if exc.status_code >= 500:
                raise _Retry("judge_unavailable", f"judge returned HTTP {exc.status_code}", status=exc.status_code) from None
            self._count(self.metrics and self.metrics.requests.labels(self.model, "judge_rejected"))
            raise JudgeError("judge_rejected", f"judge returned HTTP {exc.status_code}: {str(exc.message)[:200]}",
                             {"status": exc.status_code}) from None
        except openai.APITimeoutError:
            raise _Retry("judge_timeout", "judge request timed out") from None
        except openai.APIConnectionError as exc:
            raise _Retry("judge_unavailable", f"cannot reach the judge: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the judge must never take the pipeline down
            self._count(self.metrics and self.metrics.requests.labels(self.model, "judge_unavailable"))
            raise JudgeError("judge_unavailable", f"{type(exc).__name__}: {exc}"[:300]) from None
        finally:
            self._slots.release()
            if self.metrics is not None:
                self.metrics.duration.labels(self.model).observe(time.perf_counter() - started)

    def _read(self, completion: Any, evaluator: str, system: str, user: str, attempts: int, redactions: int,
              parse: Callable[[str], Any], reservation: Reservation) -> JudgeReply:
        from .qag import ParseError

        usage = getattr(completion, "usage", None)
        choice = completion.choices[0] if getattr(completion, "choices", None) else None
        message = getattr(choice, "message", None)
        content = (getattr(message, "content", None) or "") if message is not None else ""
        estimated = usage is None or usage.prompt_tokens is None
        input_tokens = estimate_tokens(system) + estimate_tokens(user) if estimated else int(usage.prompt_tokens)
        output_tokens = estimate_tokens(content) if estimated or usage.completion_tokens is None else int(usage.completion_tokens)
        cost = self._spend(evaluator, input_tokens, output_tokens, reservation)

        def fail(reason: str, message_text: str) -> JudgeError:
            self._count(self.metrics and self.metrics.requests.labels(self.model, reason))
            return JudgeError(reason, message_text, {"attempts": attempts, "input_tokens": input_tokens, "output_tokens": output_tokens})

        if choice is None:
            raise fail("empty_response", "the judge returned no choice")
        refusal = getattr(message, "refusal", None)
        if refusal or getattr(choice, "finish_reason", None) == "content_filter":
            raise fail("refusal", f"the judge refused: {str(refusal or 'content filter')[:200]}")
        if not content.strip():
            raise fail("empty_response", "the judge returned empty content")
        try:
            parsed = parse(content)
        except ParseError as exc:
            raise fail(exc.reason, str(exc)[:300]) from None
        self._count(self.metrics and self.metrics.requests.labels(self.model, "ok"))
        return JudgeReply(content, parsed, input_tokens, output_tokens, estimated, cost, attempts, False, redactions)

    def _cost(self, input_tokens: int, output_tokens: int) -> float | None:
        price = self.settings.price(self.model)
        return None if price is None else (input_tokens * price.input + output_tokens * price.output) / 1e6

    def _spend(self, evaluator: str, input_tokens: int, output_tokens: int, reservation: Reservation) -> float | None:
        cost = self._cost(input_tokens, output_tokens)
        self.budget.settle(reservation, input_tokens + output_tokens, cost or 0.0)
        if self.metrics is not None:
            self.metrics.tokens.labels(evaluator, self.model, "input").inc(input_tokens)
            self.metrics.tokens.labels(evaluator, self.model, "output").inc(output_tokens)
            if cost is not None:
                self.metrics.cost.labels(evaluator, self.model).inc(cost)
        return cost

    def _budget_text(self) -> str:
        tokens, usd = self.budget.spent()
        parts = []
        if self.budget.max_tokens:
            parts.append(f"{tokens:.0f}/{self.budget.max_tokens} tokens")
        if self.budget.max_usd:
            parts.append(f"${usd:.4f}/${self.budget.max_usd:g}")
        return ", ".join(parts)

    @staticmethod
    def _count(child: Any) -> None:
        if child:
            child.inc()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._openai.close()


def openai_create(client: Any, settings: JudgeSettings, model: str, system: str, user: str,
                  schema: dict[str, Any], *, timeout: float) -> Any:
    """The chat completions call, with the structured-output mode the settings ask for."""
    kwargs: dict[str, Any] = {}
    if settings.response_format == "json_schema":
        kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "judge_answers", "schema": schema, "strict": True}}
    elif settings.response_format == "json_object":
        kwargs["response_format"] = {"type": "json_object"}
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        timeout=timeout,
        **kwargs,
    )
