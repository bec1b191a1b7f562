"""What became of one export request (``Outcome``), and the bounded decompression every request goes through."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from ..formats.otlp import OTLPDecodeError
from ..formats.zstd import decompress_zstd


@dataclass(frozen=True)
class Outcome:
    """What became of one export request, whatever its transport.

    ``status``: ``ok``, ``partial`` (some items rejected: ``rejected``), ``overloaded``
    and ``draining`` (refused whole: retry after ``retry_after`` seconds), ``invalid``,
    ``too_large``, ``unsupported`` (content type or encoding), ``unauthenticated``;
    HTTP only, refused before the request reaches ``receive``: ``connection_limit``
    (503, retry) and ``invalid_http`` (unparseable: 400), ``incomplete`` (408).
    ``response`` is the OTLP response message for ``ok`` and ``partial``.
    """

    status: str
    message: str = ""
    rejected: int = 0
    retry_after: int = 0
    response: Any = None

    @property
    def accepted(self) -> bool:
        return self.status in ("ok", "partial")


class TooLarge(Exception):
    pass


class Unsupported(Exception):
    pass


_ALIASES = {"x-gzip": "gzip", "zlib": "deflate"}
"""RFC 9110's alias for gzip; the Collector's ``compression: zlib`` sends ``Content-Encoding: zlib`` (a zlib stream,
HTTP's ``deflate``)."""


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``Content-Encoding`` gzip, deflate or zstd, stopping at ``limit`` bytes of output (a zip bomb is refused, not
    inflated)."""
    if encoding in ("", "identity"):
        return body
    encoding = _ALIASES.get(encoding, encoding)
    if encoding == "zstd":  # the Collector's otlphttp exporter offers it (compression: zstd)
        out = decompress_zstd(body, limit, "zstd body")
        if len(out) > limit:
            raise TooLarge("request body too large after decompression")
        return out
    if encoding not in ("gzip", "deflate"):
        raise Unsupported(f"unsupported Content-Encoding {encoding!r}; use gzip, deflate (zlib), zstd or none")
    parts: list[bytes] = []
    size, rest = 0, body
    while True:  # gzip: every member, as gzip -d and Go's reader (the Collector's) read them; deflate: one stream
        decompressor = zlib.decompressobj((16 if encoding == "gzip" else 0) + zlib.MAX_WBITS)
        try:
            part = decompressor.decompress(rest, limit + 1 - size)
        except zlib.error as exc:
            raise OTLPDecodeError(f"invalid {encoding} body: {exc}") from exc
        size += len(part)
        parts.append(part)
        if size > limit:
            raise TooLarge("request body too large after decompression")
        if not decompressor.eof:  # zlib returns what it has of a stream cut short, without an error
            raise OTLPDecodeError(f"invalid {encoding} body: truncated (the compressed stream does not end)")
        rest = decompressor.unused_data
        if encoding == "gzip":
            rest = rest.lstrip(b"\0")  # zero padding after the last member, as gzip -d accepts
        if not rest:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if encoding == "deflate":  # never dropped unread: those bytes were sent as part of the request
            raise OTLPDecodeError(f"invalid deflate body: {len(rest)} bytes after the end of the compressed stream")
