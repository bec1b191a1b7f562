"""Throttles and memory for the judge: token buckets, the hourly budget, the answer cache.

Thread safe (evaluators run on several worker threads), clock injectable for tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

Clock = Callable[[], float]


class TokenBucket:
    """``rate_per_minute`` tokens per minute, bursting up to one minute's worth.

    ``reserve`` takes tokens now and returns how long the caller must wait
    before using them (0 when available): waiting outside the lock keeps other
    threads free, and reservations queue fairly.
    """

    def __init__(self, rate_per_minute: float, clock: Clock = time.monotonic) -> None:
        self.rate = rate_per_minute / 60.0
        self.capacity = rate_per_minute
        self.clock = clock
        self._tokens = self.capacity
        self._last = clock()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def reserve(self, amount: float) -> float:
        if not self.enabled:
            return 0.0
        amount = min(amount, self.capacity)  # a request larger than a minute's worth waits for a full bucket
        with self._lock:
            now = self.clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= amount
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def refund(self, amount: float) -> None:
        """Give back a reservation that was not used (deadline too close), or over-estimated tokens."""
        if self.enabled and amount:
            with self._lock:
                self._tokens = min(self.capacity, self._tokens + amount)


class HourlyBudget:
    """Tokens and estimated USD spent over the last hour, in one-minute slots.

    ``exhausted()`` is checked before each judge call; spending is recorded
    from the actual usage afterwards. A call in flight may overshoot by one call.
    """

    SLOT_SECONDS = 60.0

    def __init__(self, max_tokens: int = 0, max_usd: float = 0.0, clock: Clock = time.monotonic) -> None:
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.clock = clock
        self._slots: deque[list[float]] = deque()  # [slot start, tokens, usd]
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.max_tokens or self.max_usd)

    def _expire(self, now: float) -> None:
        while self._slots and now - self._slots[0][0] >= 3600.0:
            self._slots.popleft()

    def spend(self, tokens: int, usd: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            now = self.clock()
            self._expire(now)
            if not self._slots or now - self._slots[-1][0] >= self.SLOT_SECONDS:
                self._slots.append([now, 0.0, 0.0])
            self._slots[-1][1] += tokens
            self._slots[-1][2] += usd

    def spent(self) -> tuple[float, float]:
        with self._lock:
            self._expire(self.clock())
            return sum(s[1] for s in self._slots), sum(s[2] for s in self._slots)

    def remaining_ratio(self) -> float:
        """The tighter of the token and USD budgets, as a share left in [0, 1]; 1 without a budget."""
        if not self.enabled:
            return 1.0
        tokens, usd = self.spent()
        ratios = []
        if self.max_tokens:
            ratios.append(1.0 - tokens / self.max_tokens)
        if self.max_usd:
            ratios.append(1.0 - usd / self.max_usd)
        return max(0.0, min(ratios))

    def exhausted(self) -> bool:
        return self.enabled and self.remaining_ratio() <= 0.0


_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Whitespace differences must not defeat the cache."""
    return _SPACES.sub(" ", text).strip()


def cache_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(normalize(p) for p in parts).encode()).hexdigest()


class AnswerCache:
    """LRU of judge answers in memory, optionally backed by one JSON file per key on disk."""

    def __init__(self, size: int, directory: str | None = None) -> None:
        self.size = size
        self.directory = Path(directory) if directory else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._items: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        if self.size > 0:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
        if self.directory is not None:
            try:
                value = json.loads((self.directory / f"{key}.json").read_text())
            except (OSError, ValueError):
                return None
            self._remember(key, value)
            return value
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._remember(key, value)
        if self.directory is not None:
            path = self.directory / f"{key}.json"
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                tmp.write_text(json.dumps(value))
                tmp.replace(path)
            except OSError:
                tmp.unlink(missing_ok=True)

    def _remember(self, key: str, value: dict[str, Any]) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
