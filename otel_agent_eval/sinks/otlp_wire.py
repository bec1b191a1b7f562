"""The protobuf wire format's building blocks, for the sinks that write OTLP bytes directly
(``otlp_attributes.py``, ``otlp_direct.py``): varints, length-delimited fields and fixed-width numbers."""

from __future__ import annotations

import struct

SMALL = [bytes((n,)) for n in range(128)]
"""The one-byte varints, 0..127: most lengths and tags, indexed instead of encoded."""
pack_double = struct.Struct("<d").pack
pack_fixed64 = struct.Struct("<Q").pack
pack_fixed32 = struct.Struct("<I").pack


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a base-128 varint."""
    if n < 128:
        return SMALL[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (SMALL[n] if n < 128 else varint(n)) + payload


def text(tag: bytes, value: str) -> bytes:
    """A string field: ``value`` in UTF-8, length-delimited."""
    return field(tag, value.encode("utf-8"))
