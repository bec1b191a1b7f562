"""Throttles and memory for the judge: token buckets, the hourly budget, the circuit breaker, the answer cache.

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


class Reservation:
    """Tokens and USD held by one judge call in flight, until ``HourlyBudget.settle``."""

    __slots__ = ("tokens", "usd", "open")

    def __init__(self, tokens: float, usd: float) -> None:
        self.tokens = tokens
        self.usd = usd
        self.open = True


class HourlyBudget:
    """Tokens and estimated USD spent over the last hour, in one-minute slots.

    A call ``reserve``s its estimate before it is sent and ``settle``s with the
    real usage after; a call is refused once spent plus reserved reaches the
    budget. So, whatever the concurrency, the budget is overshot by at most
    one call (and by how much calls exceed their estimates).
    """

    SLOT_SECONDS = 60.0

    def __init__(self, max_tokens: int = 0, max_usd: float = 0.0, clock: Clock = time.monotonic) -> None:
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.clock = clock
        self._slots: deque[list[float]] = deque()  # [slot start, tokens, usd]
        self._reserved = [0.0, 0.0]  # tokens, usd of calls in flight
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.max_tokens or self.max_usd)

    def _expire(self, now: float) -> None:
        while self._slots and now - self._slots[0][0] >= 3600.0:
            self._slots.popleft()

    def reserve(self, tokens: float, usd: float) -> Reservation | None:
        """Hold an estimate for a call about to be sent; None when the budget is spent (spent + reserved)."""
        reservation = Reservation(tokens, usd)
        if not self.enabled:
            return reservation
        with self._lock:
            tokens_spent, usd_spent = self._spent_locked()
            if self._ratio(tokens_spent + self._reserved[0], usd_spent + self._reserved[1]) <= 0.0:
                return None
            self._reserved[0] += tokens
            self._reserved[1] += usd
        return reservation

    def settle(self, reservation: Reservation, tokens: float = 0, usd: float = 0.0) -> None:
        """Release the reservation and record the real usage (none if the call failed before an answer). Idempotent."""
        if not self.enabled or not reservation.open:
            return
        with self._lock:
            if not reservation.open:
                return
            reservation.open = False
            self._reserved[0] -= reservation.tokens
            self._reserved[1] -= reservation.usd
            self._add(tokens, usd)

    def spend(self, tokens: int, usd: float) -> None:
        """Record usage that had no reservation."""
        if not self.enabled:
            return
        with self._lock:
            self._add(tokens, usd)

    def _add(self, tokens: float, usd: float) -> None:
        if not tokens and not usd:
            return
        now = self.clock()
        self._expire(now)
        if not self._slots or now - self._slots[-1][0] >= self.SLOT_SECONDS:
            self._slots.append([now, 0.0, 0.0])
        self._slots[-1][1] += tokens
        self._slots[-1][2] += usd

    def _spent_locked(self) -> tuple[float, float]:
        self._expire(self.clock())
        return sum(s[1] for s in self._slots), sum(s[2] for s in self._slots)

    def spent(self) -> tuple[float, float]:
        with self._lock:
            return self._spent_locked()

    def _ratio(self, tokens: float, usd: float) -> float:
        ratios = []
        if self.max_tokens:
            ratios.append(1.0 - tokens / self.max_tokens)
        if self.max_usd:
            ratios.append(1.0 - usd / self.max_usd)
        return max(0.0, min(ratios))

    def remaining_ratio(self) -> float:
        """The tighter of the token and USD budgets, as a share left in [0, 1]; 1 without a budget."""
        if not self.enabled:
            return 1.0
        return self._ratio(*self.spent())

    def exhausted(self) -> bool:
        """Spent, or about to be by the calls in flight."""
        if not self.enabled:
            return False
        with self._lock:
            tokens, usd = self._spent_locked()
            return self._ratio(tokens + self._reserved[0], usd + self._reserved[1]) <= 0.0


class CircuitBreaker:
    """Fail fast while the judge is down, then let one probe call decide.

    ``closed``: calls go through; ``failures`` consecutive failures open it.
    ``open``: calls are refused for ``cooldown`` seconds. Then ``half_open``:
    the first caller is the probe, the others are refused until it reports;
    success closes the breaker, failure opens it again. ``failures=0`` disables it.
    """

    CLOSED, OPEN, HALF_OPEN = 0, 1, 2
    STATE_NAMES = ("closed", "open", "half_open")

    def __init__(self, failures: int, cooldown: float, clock: Clock = time.monotonic) -> None:
        self.failures = failures
        self.cooldown = cooldown
        self.clock = clock
        self.state = self.CLOSED
        self.consecutive = 0
        self._opened_at = 0.0
        self._probing = False
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """May a call go out now? A True in ``half_open`` makes the caller the probe: it must ``record``."""
        if not self.failures or self.state == self.CLOSED:
            return True
        with self._lock:
            if self.state == self.OPEN and self.clock() - self._opened_at >= self.cooldown:
                self.state = self.HALF_OPEN
                self._probing = False
            if self.state == self.HALF_OPEN and not self._probing:
                self._probing = True
                return True
            return self.state == self.CLOSED

    def record(self, ok: bool | None) -> None:
        """The outcome of an allowed call: True (the judge answered), False (unavailable, timed out), None (not sent)."""
        if not self.failures:
            return
        with self._lock:
            if self.state == self.HALF_OPEN:
                if ok is None:
                    self._probing = False  # the probe never reached the judge: the next caller probes
                elif ok:
                    self.state, self.consecutive = self.CLOSED, 0
                else:
                    self._open()
            elif ok:
                self.consecutive = 0
            elif ok is False:
                self.consecutive += 1
                if self.state == self.CLOSED and self.consecutive >= self.failures:
                    self._open()

    def _open(self) -> None:
        self.state = self.OPEN
        self._opened_at = self.clock()
        self._probing = False

    def current(self) -> int:
        """The state as the gauge shows it: an open breaker whose cool-down has passed is half-open."""
        if self.state == self.OPEN and self.clock() - self._opened_at >= self.cooldown:
            return self.HALF_OPEN
        return self.state

    def retry_in(self) -> float:
        """Seconds until the next probe may go (0 unless open)."""
        return max(0.0, self.cooldown - (self.clock() - self._opened_at)) if self.state == self.OPEN else 0.0


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
