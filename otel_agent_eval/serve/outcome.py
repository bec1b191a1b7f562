"""What became of one export request (``Outcome``), and the bounded decompression every request goes through."""

from __future__ import annotations

import zlib
from collections.abc import Callable
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
    """``Content-Encoding`` gzip, deflate, zstd, snappy or lz4 (every compression the Collector's ``otlphttp``
    exporter offers), stopping at ``limit`` bytes of output (a zip bomb is refused, not inflated)."""
    if encoding in ("", "identity"):
        return body
    encoding = _ALIASES.get(encoding, encoding)
    if encoding == "zstd":  # the Collector's otlphttp exporter offers it (compression: zstd)
        out = decompress_zstd(body, limit, "zstd body")
        if len(out) > limit:
            raise TooLarge("request body too large after decompression")
        return out
    if encoding in ("snappy", "x-snappy-framed"):
        return _snappy(body, limit, framed=encoding == "x-snappy-framed" or body.startswith(SNAPPY_STREAM_IDENTIFIER))
    if encoding == "lz4":  # the format the Collector's lz4 writes: LZ4 frames
        return _streams(body, limit, encoding, _codec("lz4.frame", encoding).LZ4FrameDecompressor, RuntimeError)
    if encoding not in ("gzip", "deflate"):
        raise Unsupported(f"unsupported Content-Encoding {encoding!r}; use gzip, deflate (zlib), zstd, snappy, lz4 "
                          "or none")
    wbits = (16 if encoding == "gzip" else 0) + zlib.MAX_WBITS
    return _streams(body, limit, encoding, lambda: zlib.decompressobj(wbits), zlib.error)


def _streams(body: bytes, limit: int, encoding: str, new_stream: Callable[[], Any],
             errors: type[Exception]) -> bytes:
    """Every compressed stream of ``body`` one after the other (gzip members, as ``gzip -d`` and Go's reader, the
    Collector's, read them; lz4 frames), at most ``limit + 1`` bytes of output made; deflate: exactly one stream."""
    parts: list[bytes] = []
    size, rest = 0, body
    while True:
        stream = new_stream()
        try:
            part = stream.decompress(rest, max_length=limit + 1 - size)
        except errors as exc:
            raise OTLPDecodeError(f"invalid {encoding} body: {exc}") from exc
        size += len(part)
        parts.append(part)
        if size > limit:
            raise TooLarge("request body too large after decompression")
        if not stream.eof:  # zlib and lz4 return what they have of a stream cut short, without an error
            raise OTLPDecodeError(f"invalid {encoding} body: truncated (the compressed stream does not end)")
        rest = stream.unused_data
        if encoding == "gzip":
            rest = rest.lstrip(b"\0")  # zero padding after the last member, as gzip -d accepts
        if not rest:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if encoding == "deflate":  # never dropped unread: those bytes were sent as part of the request
            raise OTLPDecodeError(f"invalid deflate body: {len(rest)} bytes after the end of the compressed stream")


SNAPPY_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
"""The first chunk of snappy's framing format. The Collector sends ``Content-Encoding: snappy`` in either format
(framed before v0.125, the block format since; framed again as ``x-snappy-framed``) and its receiver tells them apart
by these bytes: so does serve."""


def _snappy(body: bytes, limit: int, *, framed: bool) -> bytes:
    """A snappy block, or a framed stream, its declared size checked against ``limit`` before anything is inflated."""
    cramjam = _codec("cramjam", "snappy")
    try:
        size = _framed_snappy_size(body, limit, cramjam) if framed else cramjam.snappy.decompress_raw_len(body)
        if size > limit:
            raise TooLarge("request body too large after decompression")
        return bytes(cramjam.snappy.decompress(body) if framed else cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise OTLPDecodeError(f"invalid snappy body: {exc}") from exc


def _framed_snappy_size(body: bytes, limit: int, cramjam: Any) -> int:
    """What a framed snappy stream declares it holds, read from its chunk headers (O(chunks), nothing inflated);
    stops once past ``limit``. Checksums are the decoder's to check."""
    view, pos, size = memoryview(body), 0, 0
    while pos < len(body) and size <= limit:
        start = pos + 4
        kind, pos = body[pos], start + int.from_bytes(view[pos + 1:start], "little")
        if pos > len(body):
            raise OTLPDecodeError("invalid snappy body: truncated (the last chunk ends past the body)")
        if kind == 0x00:  # compressed: a 4-byte checksum, then a snappy block that states its length
            size += cramjam.snappy.decompress_raw_len(view[start + 4:pos])
        elif kind == 0x01:  # uncompressed: a 4-byte checksum, then the data
            size += pos - start - 4
        elif kind < 0x80:  # reserved, unskippable (the stream identifier and padding are 0xff and 0xfe)
            raise OTLPDecodeError(f"invalid snappy body: reserved chunk type {kind:#04x}")
    return size


def _codec(module: str, encoding: str) -> Any:
    """The library that reads ``encoding``, from the otlp extra; without it the encoding is refused (415) saying so."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unsupported(f"Content-Encoding {encoding} needs the otlp extra (pip install 'otel-agent-eval[otlp]'): "
                          f"{exc}") from exc
