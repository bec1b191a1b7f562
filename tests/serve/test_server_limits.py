"""OTLP/HTTP request bodies are bounded whatever the headers say: raw sockets against a real ``serve``.

A negative or non-numeric ``Content-Length`` or chunk size used to make the server read
until the client closed (four 100 MiB connections pushed RSS to 460 MiB); now each is a
400 and the connection is closed, and a body over ``max_request_bytes`` is refused
without being read to its end.
"""

from __future__ import annotations

import socket
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from otel_agent_eval.config import Settings
from otel_agent_eval.serve.server import EvalServer, ServeOptions
from tests.serve.server_process import wait_for

LIMIT = 64 * 1024
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[EvalServer]:
    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None,
                                                            max_request_bytes=LIMIT, http_idle_seconds=1))
    server.start()
    yield server
    server.stop(drain_seconds=1)


@pytest.fixture(scope="module")
def port(server: EvalServer) -> int:
    return server.ports["http"]


def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` (never a complete valid request) and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):  # a server waiting for more body would time this out
            answer += chunk
    return answer


@pytest.mark.parametrize("header", [b"Content-Length: -5", b"Content-Length: abc", b"Content-Length: 0x10"])
def test_bad_content_length_is_a_400_and_the_connection_closes(port: int, header: bytes) -> None:
    answer = _exchange(port, HEAD + header + b"\r\n\r\n" + b"x" * 100)
    assert answer.startswith(b"HTTP/1.1 400 "), answer


@pytest.mark.parametrize("size_line", [b"-5", b"zz", b"-FFFFFFFF"])
def test_bad_chunk_size_is_a_400_and_the_connection_closes(port: int, size_line: bytes) -> None:
    answer = _exchange(port, HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + size_line + b"\r\nhello\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer


def test_declared_length_over_the_limit_is_refused_before_reading(port: int) -> None:
    # 10 GB announced, nothing sent: the answer comes at once, from the header alone.
    answer = _exchange(port, HEAD + b"Content-Length: 10000000000\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert b"connection: close" in answer.lower()


def test_chunked_body_over_the_limit_is_refused_without_reading_to_the_end(port: int) -> None:
    """An endless chunked body: the server answers 413 once it has passed the limit and closes,
    while the client still has (in this case infinitely) more to send."""
    chunk = b"4000\r\n" + b"a" * 0x4000 + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        sent, answer = 0, b""
        sock.settimeout(0.05)
        while not answer and sent < 100 * LIMIT:
            try:
                sock.sendall(chunk)
                sent += 0x4000
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
    assert answer.startswith(b"HTTP/1.1 413 "), (sent, answer)
    # read no further than the limit plus what sat in the socket buffers, not 100x the limit
    assert sent < 40 * LIMIT, sent



def test_a_client_stalled_mid_body_is_answered_and_closed(port: int) -> None:
    """Half a body, then silence: after ``http_idle_seconds`` the server answers 408 and closes."""
    answer = _exchange(port, HEAD + b"Content-Length: 1000\r\n\r\n" + b"x" * 10)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_silent_connection_is_closed(port: int) -> None:
    assert _exchange(port, b"") == b""


def test_connections_have_tcp_nodelay() -> None:
    """asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP; without it each response
    waits for the client's delayed ACK (~40 ms per request)."""
    from tests.serve.server_process import wait_for

    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None))
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.ports["http"]), timeout=10):
            connections = server._http.server.server_state.connections  # type: ignore[union-attr]
            wait_for(lambda: len(connections) == 1, 10, "the connection accepted")
            accepted = next(iter(connections)).transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.stop(drain_seconds=1)


def test_requests_uvicorn_refuses_itself_are_counted(server: EvalServer) -> None:
    """The 400s h11 answers itself are counted once per request: before any app runs (an unparseable
    length) as ``invalid_http``; a chunk size that breaks the body the app is reading, by the app, as
    ``incomplete``."""
    def outcomes() -> dict:
        return {k: v for k, v in server.server_stats.requests.snapshot().items() if k[2] in ("invalid_http", "incomplete")}

    before = outcomes()
    port = server.ports["http"]
    _exchange(port, HEAD + b"Content-Length: -5\r\n\r\n")
    _exchange(port, HEAD + b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n")
    time.sleep(0.5)  # let the app that was reading the chunked body see the connection go
    after = outcomes()
    added = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert added == {("http", "unknown", "invalid_http"): 1, ("http", "traces", "incomplete"): 1}, added


def test_concurrent_clients_beyond_the_connection_cap_are_refused_retryably_and_every_refusal_counted() -> None:
    """Eight real clients at once against a cap of two: those over the cap get 503 + ``Retry-After``,
    reconnect and retry until accepted; the server counts exactly the refusals the clients saw."""
    import http.client
    import random
    import threading

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    clients, cap = 8, 2
    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None,
                                                            max_http_connections=cap, http_idle_seconds=5))
    server.start()
    body = ExportTraceServiceRequest().SerializeToString()
    start = threading.Barrier(clients)
    seen: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.ports["http"], timeout=10)
        connection.connect()
        start.wait()  # every client connected: more connections open than the cap
        for _ in range(200):
            connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
            with lock:
                seen.append(response.status)
            if response.status == 200:
                break
            assert response.status == 503 and response.getheader("Retry-After") == "1"
            connection.close()  # the server let this connection go: a new one for the retry
            time.sleep(random.uniform(0.01, 0.2))
            connection = http.client.HTTPConnection("127.0.0.1", server.ports["http"], timeout=10)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        server.stop(drain_seconds=1)
    refused = seen.count(503)
    assert seen.count(200) == clients and refused >= clients - cap, seen
    counted = {k[2]: v for k, v in server.server_stats.requests.snapshot().items()}
    assert counted == {"ok": clients, "connection_limit": refused}, (counted, seen)


def test_rpcs_grpc_refuses_over_its_concurrency_cap_are_counted() -> None:
    """gRPC answers RPCs over ``maximum_concurrent_rpcs`` (4 x ``grpc_workers``) with ``RESOURCE_EXHAUSTED``
    without calling our handler: the server counts each one as ``rpc_limit``, exactly as the clients saw them."""
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=None, grpc_port=0, admin_port=None,
                                                            grpc_workers=1))
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.ports['grpc']}")
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    body = ExportTraceServiceRequest().SerializeToString()
    try:
        with server._offer_lock:  # the first RPC waits here, on the only worker; the next ones queue behind it
            calls = [export.future(body, timeout=30) for _ in range(8)]
            wait_for(lambda: sum(c.done() for c in calls) >= 4, 20, "the RPCs over the cap refused")
        codes = [c.exception().code() if c.exception() else grpc.StatusCode.OK for c in calls]
    finally:
        channel.close()
        server.stop(drain_seconds=1)
    refused = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert refused == 8 - 4 and codes.count(grpc.StatusCode.OK) == 4, codes
    counted = {k[2]: v for k, v in server.server_stats.requests.snapshot().items()}
    assert counted == {"ok": 4, "rpc_limit": refused}, counted


def test_grpc_messages_over_the_limit_are_counted_as_too_large() -> None:
    """gRPC's core refuses a message over ``max_request_bytes`` (``RESOURCE_EXHAUSTED``) before any handler
    runs; the server counts each such RPC as ``too_large``, as OTLP/HTTP counts its 413s. With the real gRPC
    exporter: the batch that fits is counted ``ok`` and nothing else, the one that does not is counted once per
    attempt (the exporter retries ``RESOURCE_EXHAUSTED`` until its timeout)."""
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass
    small = list(spans.get_finished_spans())
    spans.clear()
    with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", "payload": "x" * 2 * LIMIT}):
        pass
    large = list(spans.get_finished_spans())

    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=None, grpc_port=0, admin_port=None,
                                                            max_request_bytes=LIMIT))
    server.start()

    def counted() -> dict[str, int]:
        return {k[2]: v for k, v in server.server_stats.requests.snapshot().items()}

    try:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{server.ports['grpc']}", insecure=True, timeout=2)
        assert exporter.export(small) == SpanExportResult.SUCCESS
        wait_for(lambda: counted() == {"ok": 1}, 10, "the batch that fits counted ok")
        assert exporter.export(large) == SpanExportResult.FAILURE
        exporter.shutdown()
        wait_for(lambda: counted().get("too_large", 0) >= 1, 10, "the batch over the limit counted")
        attempts = counted()["too_large"]
        channel = grpc.insecure_channel(f"127.0.0.1:{server.ports['grpc']}")
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\x0a" + b"\xff" * 4 + b"x" * LIMIT, timeout=10)  # one raw RPC over the limit: counted exactly once
        channel.close()
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        wait_for(lambda: counted().get("too_large", 0) == attempts + 1, 10, "the raw RPC counted")
        time.sleep(0.2)
        assert counted() == {"ok": 1, "too_large": attempts + 1}, counted()
    finally:
        server.stop(drain_seconds=1)


def _compressors() -> dict[str, Any]:
    """Content-Encoding -> a compressor, as the Collector's otlphttp exporter sends it (snappy: the block format, what
    it sends since v0.125; framed before, and as x-snappy-framed)."""
    import gzip
    import zlib

    import cramjam
    import lz4.frame
    import zstandard

    return {"deflate": zlib.compress, "gzip": gzip.compress, "zstd": zstandard.ZstdCompressor().compress,
            "snappy": lambda b: bytes(cramjam.snappy.compress_raw(b)),
            "x-snappy-framed": lambda b: bytes(cramjam.snappy.compress(b)), "lz4": lz4.frame.compress}


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "zstd", "snappy", "x-snappy-framed", "lz4"])
def test_a_compressed_body_cut_short_is_invalid_not_partly_read(encoding: str) -> None:
    """zlib (and zstandard's and lz4's stream readers) hand back what they have of a stream cut short, without an
    error: a body cut at a message boundary would have been taken as a smaller request (spans lost, 200 to the
    client)."""
    from otel_agent_eval.formats.otlp_json import OTLPDecodeError
    from otel_agent_eval.serve.outcome import TooLarge, decompress

    raw = b"0123456789" * 1000
    whole = _compressors()[encoding](raw)
    assert decompress(whole, encoding, LIMIT) == raw
    with pytest.raises(OTLPDecodeError, match="truncated|invalid snappy body"):
        decompress(whole[:-12], encoding, LIMIT)
    with pytest.raises(TooLarge):
        decompress(whole, encoding, len(raw) - 1)


def test_snappy_in_either_format_and_lz4_frames_as_the_collector_reads_them() -> None:
    """``Content-Encoding: snappy`` is the block format or a framed stream, told apart by the stream identifier (the
    Collector's receiver does the same: it sent framed snappy under that name before v0.125); lz4 bodies may hold
    several frames. Checksums are checked, and anything after the data is an error, not dropped."""
    import random

    import cramjam
    import lz4.frame

    from otel_agent_eval.formats.otlp_json import OTLPDecodeError
    from otel_agent_eval.serve.outcome import decompress

    first, second = b"a" * 5000 + bytes(range(256)), b"b" * 70_000  # the second spans two 64 KiB snappy chunks
    framed = bytes(cramjam.snappy.compress(first + second))
    assert decompress(framed, "snappy", 1 << 20) == first + second
    assert decompress(framed, "x-snappy-framed", 1 << 20) == first + second
    noise = random.Random(0).randbytes(70_000)  # incompressible: stored in uncompressed chunks
    assert decompress(bytes(cramjam.snappy.compress(noise)), "snappy", 1 << 20) == noise
    assert decompress(bytes(cramjam.snappy.compress_raw(first)), "snappy", LIMIT) == first
    corrupt = bytearray(framed)
    corrupt[-100] ^= 0xFF
    with pytest.raises(OTLPDecodeError, match="invalid snappy body"):
        decompress(bytes(corrupt), "snappy", 1 << 20)
    with pytest.raises(OTLPDecodeError, match="reserved chunk type 0x02"):
        decompress(framed + b"\x02\x00\x00\x00", "snappy", 1 << 20)
    frames = lz4.frame.compress(first) + lz4.frame.compress(second)
    assert decompress(frames, "lz4", 1 << 20) == first + second
    with pytest.raises(OTLPDecodeError, match="invalid lz4 body"):
        decompress(lz4.frame.compress(first) + b"not lz4!", "lz4", LIMIT)


@pytest.mark.parametrize("encoding", ["snappy", "x-snappy-framed", "lz4"])
def test_a_snappy_or_lz4_bomb_is_refused_without_being_inflated(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 MiB of zeros. Snappy: the sizes it declares (the block's, each chunk's) are read and refused before
    anything is inflated (cramjam's decoder, which allocates outside tracemalloc's view, is never called); lz4: at
    most the limit is inflated."""
    import cramjam
    import lz4.frame

    from otel_agent_eval.serve.outcome import TooLarge, decompress

    zeros = bytes(1 << 20)
    if encoding == "lz4":
        compressor = lz4.frame.LZ4FrameCompressor()
        bomb = compressor.begin() + b"".join(compressor.compress(zeros) for _ in range(256)) + compressor.flush()
    elif encoding == "snappy":  # a block saying 256 MiB (its length, a little-endian base-128 varint), then data
        bomb = bytes([0x80, 0x80, 0x80, 0x80, 0x01]) + bytes(cramjam.snappy.compress_raw(zeros))[3:]
    else:  # a framed stream of 4 096 compressed 64 KiB chunks of zeros
        stream = bytes(cramjam.snappy.compress(zeros))
        bomb = stream[:10] + stream[10:] * 256
    del zeros
    inflated: list[str] = []
    for name in ("decompress", "decompress_raw"):
        real = getattr(cramjam.snappy, name)
        monkeypatch.setattr(cramjam.snappy, name,
                            lambda data, _real=real, _name=name: inflated.append(_name) or _real(data))
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            decompress(bomb, encoding, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MiB held while refusing it"
    assert inflated == []


def test_snappy_and_lz4_without_their_libraries_are_a_415_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from otel_agent_eval.serve.outcome import Unsupported, decompress

    monkeypatch.setitem(sys.modules, "cramjam", None)
    monkeypatch.setitem(sys.modules, "lz4.frame", None)
    for encoding in ("snappy", "lz4"):
        with pytest.raises(Unsupported, match=rf"Content-Encoding {encoding} needs the otlp extra"):
            decompress(b"x", encoding, LIMIT)


def test_every_gzip_member_is_read_and_nothing_after_a_stream_is_dropped() -> None:
    """A gzip body of several members (concatenated gzip files, as ``gzip -d`` and the Collector's Go reader
    read them) was read to the end of its first member, the rest dropped with a 200; bytes after a deflate
    stream were dropped the same way. Now every member counts toward the limit, and extra bytes are an error."""
    import gzip
    import zlib

    from otel_agent_eval.formats.otlp_json import OTLPDecodeError
    from otel_agent_eval.serve.outcome import TooLarge, decompress

    first, second = b"a" * 5000, b"b" * 7000
    members = gzip.compress(first) + gzip.compress(second)
    assert decompress(members, "gzip", LIMIT) == first + second
    assert decompress(members + bytes(10), "gzip", LIMIT) == first + second  # zero padding, as gzip -d takes it
    with pytest.raises(TooLarge):
        decompress(members, "gzip", len(first) + len(second) - 1)
    with pytest.raises(OTLPDecodeError, match="truncated"):
        decompress(members[:-12], "gzip", LIMIT)
    with pytest.raises(OTLPDecodeError, match="invalid gzip body"):
        decompress(gzip.compress(first) + b"not gzip", "gzip", LIMIT)
    with pytest.raises(OTLPDecodeError, match="8 bytes after the end"):
        decompress(zlib.compress(first) + b"trailing", "deflate", LIMIT)


def test_a_zstd_bomb_is_refused_without_being_inflated() -> None:
    """1 GiB of zeros in a 32 KiB zstd body: refused at the limit (decompressed 1 KiB of input at a time,
    each step at most 32 MiB), never held whole."""
    import zstandard

    from otel_agent_eval.serve.outcome import TooLarge, decompress

    compressor, zeros = zstandard.ZstdCompressor().compressobj(), bytes(1 << 20)
    bomb = b"".join(compressor.compress(zeros) for _ in range(1024)) + compressor.flush()  # never 1 GiB held here
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            decompress(bomb, "zstd", LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MiB held while refusing it"
