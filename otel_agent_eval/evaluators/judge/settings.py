"""Judge settings from arguments and ``OTEL_AGENT_EVAL_JUDGE_*`` variables.

Same rules as ``otel_agent_eval.config.Settings``: explicit arguments over
environment variables over defaults, and a wrong value fails at once with a
``ConfigError`` naming the variable. The API key may also come from
``OPENAI_API_KEY``, as with the ``openai`` client itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ...config_base import ConfigError, comma_list, load_model, table_for

JUDGE_PREFIX = "OTEL_AGENT_EVAL_JUDGE_"

DEFAULT_JUDGE_EVALUATORS = ("task_completion", "plan_quality", "tool_call_necessity", "trajectory_efficiency")
"""Online defaults: the ones that need nothing beyond the trace (no dataset, no history, no tool definitions)."""


class ModelPrice(BaseModel):
    """USD per one million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)


class JudgeSettings(BaseModel):
    """The judge endpoint and its cost controls. Field ``x`` is read from ``OTEL_AGENT_EVAL_JUDGE_X``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    evaluators: tuple[str, ...] = Field(DEFAULT_JUDGE_EVALUATORS, description="Judge evaluators to run when a model is set, comma separated; OTEL_AGENT_EVAL_EVALUATORS may name them too, and this default applies only when neither does.")
    # endpoint
    model: str | None = Field(None, description="Judge model (deployment name on Azure). Unset: judge evaluators are off.")
    base_url: str | None = Field(None, description="OpenAI-compatible base URL, e.g. http://localhost:11434/v1 (Ollama). Unset: api.openai.com (or OPENAI_BASE_URL).")
    api_key: SecretStr | None = Field(None, description="API key; falls back to OPENAI_API_KEY. Not needed for local endpoints.")
    api_version: str | None = Field(None, description="Sent as the api-version query parameter (Azure OpenAI deployment URLs).")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers: JSON object or k=v,k=v (e.g. api-key=... for Azure).")
    temperature: float | None = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature; 'none' leaves it out (models that reject it).")
    response_format: str = Field("json_schema", pattern="^(json_schema|json_object|none)$", description="Structured output mode: json_schema, json_object or none (the strict parser reads the answer either way).")
    # time and retries
    timeout_seconds: float = Field(20.0, gt=0, description="Timeout of one HTTP attempt.")
    deadline_seconds: float = Field(25.0, gt=0, description="Whole judge call, retries and rate-limit waits included; keep it below OTEL_AGENT_EVAL_EVALUATOR_TIMEOUT_SECONDS.")
    max_retries: int = Field(3, ge=0, le=10, description="Retries on 429, 5xx, timeouts and connection errors (the openai client's own retries are off).")
    backoff_seconds: float = Field(0.5, ge=0.0, description="First retry delay; doubles per retry (with jitter), unless the server sends Retry-After.")
    max_backoff_seconds: float = Field(20.0, ge=0.0, description="Longest single retry delay, Retry-After included.")
    # throughput and cost
    concurrency: int = Field(4, ge=1, le=256, description="Judge requests in flight at once (all judge evaluators together); also the judge stage's worker threads, and the offline evaluate's.")
    sample_rate: float = Field(1.0, ge=0.0, le=1.0, description="Share of evaluated agent runs the judge evaluators also see, by trace id (TraceIdRatioBased rule); the others are counted in judge_sampling_decisions{not_sampled}.")
    max_queued: int = Field(200, ge=1, description="Agent runs waiting for a judge worker; beyond, the oldest is dropped (judge_queue_full). Deterministic results are not held back.")
    breaker_failures: int = Field(5, ge=0, description="Consecutive judge calls failing as judge_unavailable or judge_timeout (after retries) that open the circuit breaker; 0 disables it.")
    breaker_cooldown_seconds: float = Field(30.0, gt=0, description="How long an open breaker fails judge evaluations fast (error, judge_unavailable) before one probe call decides whether it closes.")
    requests_per_minute: float = Field(0.0, ge=0.0, description="Token-bucket limit on judge requests per minute; 0: no limit.")
    tokens_per_minute: float = Field(0.0, ge=0.0, description="Token-bucket limit on judge tokens (input + output, estimated before the call) per minute; 0: no limit.")
    budget_tokens_per_hour: int = Field(0, ge=0, description="Judge tokens per sliding hour; beyond, judge evaluators are skipped (budget_exhausted). 0: no limit.")
    budget_usd_per_hour: float = Field(0.0, ge=0.0, description="Estimated judge USD per sliding hour (needs a price for the model); 0: no limit.")
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="USD per 1M tokens: JSON {\"model\": {\"input\": 0.15, \"output\": 0.6}} or model=0.15/0.6,model2=...")
    max_prompt_chars: int = Field(24_000, ge=2_000, description="Size of the trace rendering sent to the judge; longer traces are summarized by the documented rule.")
    max_field_chars: int = Field(2_000, ge=200, description="Longest single text, argument or result shown; longer ones are clipped with an explicit marker.")
    # cache and privacy
    cache_size: int = Field(2_048, ge=0, description="Judge answers kept in memory (LRU); 0 disables the cache.")
    cache_dir: str | None = Field(None, description="Directory for an on-disk JSON cache of judge answers (offline re-runs).")
    redact: bool = Field(True, description="Replace e-mail addresses, card and phone numbers, API keys and bearer tokens before text is sent.")

    @field_validator("evaluators", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_list(value)

    @field_validator("headers", mode="before")
    @classmethod
    def _headers(cls, value: Any) -> Any:
        return _parse_mapping(value, "headers") if isinstance(value, str) else value

    @field_validator("prices", mode="before")
    @classmethod
    def _prices(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text)
        prices: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            model, sep, pair = item.partition("=")
            inp, slash, out = pair.partition("/")
            if not sep or not slash:
                raise ValueError(f"expected model=input/output per 1M tokens, got {item!r}")
            prices[model.strip()] = {"input": inp.strip(), "output": out.strip()}
        return prices

    @field_validator("temperature", mode="before")
    @classmethod
    def _temperature(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in ("none", "null") else value

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    def price(self, model: str) -> ModelPrice | None:
        return self.prices.get(model)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> JudgeSettings:
        """Build settings from ``overrides`` over ``OTEL_AGENT_EVAL_JUDGE_*`` (and ``OPENAI_API_KEY``) over defaults."""
        env = os.environ if env is None else env
        settings = load_model(
            cls, JUDGE_PREFIX, env, overrides, fallbacks={"api_key": "OPENAI_API_KEY"}, secrets=("api_key", "headers")
        )
        settings._check_consistency(env)
        return settings

    def _check_consistency(self, env: Mapping[str, str]) -> None:
        unknown: list[str] = []
        if not set(self.evaluators) <= set(DEFAULT_JUDGE_EVALUATORS):  # the defaults are judge evaluators (a test
            from .evaluators import JUDGE_EVALUATORS  # says so): the evaluators are imported only to check others

            unknown = [name for name in self.evaluators if name not in JUDGE_EVALUATORS]
        if unknown:
            raise ConfigError(
                f"{JUDGE_PREFIX}EVALUATORS: unknown judge evaluator(s) {', '.join(unknown)}; allowed: {', '.join(sorted(JUDGE_EVALUATORS))}"
            )
        if not self.enabled:
            return
        if self.budget_usd_per_hour and self.model not in self.prices:
            raise ConfigError(
                f"{JUDGE_PREFIX}BUDGET_USD_PER_HOUR needs a price for model {self.model!r} in {JUDGE_PREFIX}PRICES "
                f"(e.g. {self.model}=0.15/0.60, USD per 1M input/output tokens)"
            )
        if self.base_url is None and self.api_key is None and not env.get("OPENAI_BASE_URL"):
            raise ConfigError(
                f"{JUDGE_PREFIX}API_KEY (or OPENAI_API_KEY) is required for api.openai.com; "
                f"set {JUDGE_PREFIX}BASE_URL for a local endpoint"
            )
        if self.deadline_seconds < self.timeout_seconds:
            raise ConfigError(
                f"{JUDGE_PREFIX}DEADLINE_SECONDS ({self.deadline_seconds}) must not be below "
                f"{JUDGE_PREFIX}TIMEOUT_SECONDS ({self.timeout_seconds})"
            )


def _parse_mapping(text: str, what: str) -> dict[str, str]:
    """``{"a": "b"}`` or ``a=b,c=d``."""
    text = text.strip()
    if text.startswith("{"):
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError(f"{what}: expected a JSON object")
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected k=v, got {item!r}")
        out[key.strip()] = val.strip()
    return out


def settings_table() -> str:
    """The docs' variable table, generated from the fields."""
    return table_for(JudgeSettings, JUDGE_PREFIX)
