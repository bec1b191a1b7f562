"""OTLP/HTTP request bodies are bounded whatever the headers say: raw sockets against a real ``serve``.

A negative or non-numeric ``Content-Length`` or chunk size used to make the server read
until the client closed (four 100 MiB connections pushed RSS to 460 MiB); now each is a
400 and the connection is closed, and a body over ``max_request_bytes`` is refused
without being read to its end.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from otel_agent_eval.config import Settings
from otel_agent_eval.serve.server import EvalServer, ServeOptions

LIMIT = 64 * 1024
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=0, grpc_port=None, admin_port=None,
                                                            max_request_bytes=LIMIT, http_idle_seconds=1))
    server.start()
    yield server.ports["http"]
    server.stop(drain_seconds=1)


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
