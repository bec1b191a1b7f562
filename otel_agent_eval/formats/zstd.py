"""zstd-compressed OTLP: the Collector ``file`` exporter's one compression, and ``Content-Encoding: zstd`` on
serve's OTLP/HTTP (the Collector's otlphttp exporter offers it).

Every frame is read, one after the other, and data that ends inside a frame is an error: zstandard's own stream
reader returns what it has decoded of a frame cut short, silently (nothing, for a one-block frame). The decoder is
the standard library's ``compression.zstd`` (Python 3.14+), else ``zstandard`` (the otlp extra).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from .otlp_json import OTLPDecodeError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
READ_SIZE = 1 << 18
"""Compressed bytes decompressed at a time from a file."""
ZSTD_BLOCK = 128 * 1024
"""The most a zstd block decompresses to; a block takes at least 4 bytes (an RLE block), so ``n`` compressed bytes
decompress to at most ``n // 4 * ZSTD_BLOCK`` (what bounds ``decompress_zstd``'s memory)."""


def zstd_errors() -> tuple[type[Exception], ...]:
    """The zstd decoders' error classes that are installed (none: nothing to catch)."""
    errors = []
    try:
        from compression import zstd  # type: ignore[import-not-found]

        errors.append(zstd.ZstdError)
    except ImportError:
        pass
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def zstd_reader(fileobj: Any, where: str, read_size: int = READ_SIZE) -> ZstdFrames:
    """A raw reader of the zstd data in ``fileobj``, ``read_size`` compressed bytes decompressed at a time."""
    try:
        from compression import zstd  # type: ignore[import-not-found]

        return ZstdFrames(fileobj, zstd.ZstdDecompressor, where, read_size)
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError as exc:
        raise OTLPDecodeError(f"{where}: reading zstd-compressed OTLP needs the otlp extra "
                              f"(pip install 'otel-agent-eval[otlp]'): {exc}") from exc
    return ZstdFrames(fileobj, zstandard.ZstdDecompressor().decompressobj, where, read_size)


def decompress_zstd(data: bytes, limit: int, where: str) -> bytes:
    """``data`` decompressed, every frame; at most ``limit + 1`` bytes of output are kept (a zstd bomb is cut, not
    inflated: callers refuse more than ``limit``), fed 1 KiB at a time so one step makes at most 32 MiB."""
    frames = zstd_reader(io.BytesIO(data), where, read_size=1024)
    out = bytearray()
    step = memoryview(bytearray(8 * ZSTD_BLOCK))
    try:
        while len(out) <= limit:
            n = frames.readinto(step)
            if not n:
                break
            out += step[:n]
    except zstd_errors() as exc:
        raise OTLPDecodeError(f"{where}: invalid zstd data: {exc}") from exc
    return bytes(out[:limit + 1])


class ZstdFrames(io.RawIOBase):
    """Every zstd frame of ``source``, decompressed one after the other (the file exporter writes one frame per
    write when it rotates files, one stream otherwise); an unfinished frame at the end is an error."""

    def __init__(self, source: Any, new_frame: Callable[[], Any], where: str, read_size: int) -> None:
        self._source = source
        self._new_frame = new_frame
        self._where = where
        self._read_size = read_size
        self._frame: Any = None
        self._out = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._out:
            data = self._source.read(self._read_size)
            if not data:
                if self._frame is not None and not self._frame.eof:
                    raise OTLPDecodeError(f"{self._where}: truncated zstd data (it ends inside a frame)")
                return 0
            self._out = memoryview(self._decompress(data))
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._frame is None or self._frame.eof:
                self._frame = self._new_frame()
            out.append(self._frame.decompress(data))
            data = self._frame.unused_data if self._frame.eof else b""
        return b"".join(out)
