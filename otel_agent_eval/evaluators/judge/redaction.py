"""Redaction of text before it leaves the process for the judge.

Built-in patterns catch the usual secrets and personal data in agent traces;
a user function runs after them for anything domain specific. Both apply to
every text sent (system and user messages), so nothing bypasses them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Redact = Callable[[str], str]

# Order matters: tokens and keys first, so an e-mail-looking fragment inside a key is not half-replaced.
BUILTIN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("BEARER_TOKEN", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*")),
    ("API_KEY", re.compile(r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{16,}\b")),
    ("API_KEY", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),  # AWS access key ids
    ("API_KEY", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),  # GitHub tokens
    ("API_KEY", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")),  # Slack tokens
    ("EMAIL", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    # 14-19 digits, optionally in groups, that pass the Luhn check (payment card numbers;
    # 13-digit millisecond timestamps stay).
    ("CARD_NUMBER", re.compile(r"(?<![\w.])\d(?:[ \-]?\d){13,18}(?![\w.])")),
    # +33 1 23 45 67 89, (555) 123-4567, +1-555-123-4567: 8 to 15 digits (E.164) in groups;
    # ISO dates and IPv4 addresses excluded.
    ("PHONE", re.compile(r"(?<![\w.+\-])(?:\+\d{1,3}[ .\-]?)?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]\d{1,4}){1,6}(?![\w.])")),
)


@dataclass(frozen=True)
class Redactor:
    """Built-in patterns (when ``builtin``) then the user's function."""

    builtin: bool = True
    user: Redact | None = None
    patterns: Sequence[tuple[str, re.Pattern[str]]] = BUILTIN_PATTERNS

    def __call__(self, text: str) -> str:
        return self.redact(text)[0]

    def redact(self, text: str) -> tuple[str, int]:
        """The redacted text and how many replacements the built-in patterns made."""
        count = [0]
        if self.builtin:
            for label, pattern in self.patterns:
                text = pattern.sub(lambda m, label=label: _replace(m, label, count), text)
        if self.user is not None:
            text = self.user(text)
        return text, count[0]


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def _replace(match: re.Match[str], label: str, count: list[int]) -> str:
    found = match.group(0)
    if label == "PHONE" and not _phone_like(found):
        return found  # amounts, versions, dates, addresses: not a phone number
    if label == "CARD_NUMBER" and not _luhn_valid(found):
        return found  # an order or tracking number
    count[0] += 1
    return f"[{label}]"


def _phone_like(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return 8 <= digits <= 15 and not _ISO_DATE.fullmatch(text) and not _IPV4.fullmatch(text)


def _luhn_valid(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0
