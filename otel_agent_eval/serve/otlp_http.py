"""OTLP/HTTP and the admin endpoints on uvicorn + Starlette: a thin mapping of ``EvalServer.receive`` to HTTP.

uvicorn does the HTTP/1.1 work (parsing, chunked bodies, keep-alive, connection
limits, graceful shutdown, TLS); it already answers 400 to a negative or
non-numeric ``Content-Length`` and to an invalid chunk size. What is left here:
reading a body with a size cap whatever the headers say, the OTLP status
mapping (``google.rpc.Status`` bodies, 429/503 + ``Retry-After``), and bearer
tokens. ``/metrics`` is prometheus-client's own ASGI app.

uvicorn's own refusals would bypass our counters: its connection cap
(``limit_concurrency``) answers 503 with an app of its own, and a request h11
cannot parse gets a 400 before any app runs. So the cap is decided here, the
same way (``_ConnectionCap``: 503 + ``Retry-After``, counted as
``connection_limit``), and the 400s are counted by the protocol
(``invalid_http``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import uvicorn
from prometheus_client import make_asgi_app
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .security import TLSFiles, reloading_ssl_context

if TYPE_CHECKING:
    from .outcome import Outcome
    from .server import EvalServer

_logger = logging.getLogger("otel_agent_eval.server")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_GRPC_INVALID_ARGUMENT, _GRPC_RESOURCE_EXHAUSTED, _GRPC_UNAVAILABLE, _GRPC_UNAUTHENTICATED = 3, 8, 14, 16

# Outcome status -> (HTTP status, google.rpc code in the error body).
_HTTP_STATUS = {
    "overloaded": (429, _GRPC_RESOURCE_EXHAUSTED),
    "draining": (503, _GRPC_UNAVAILABLE),
    "invalid": (400, _GRPC_INVALID_ARGUMENT),
    "too_large": (413, _GRPC_INVALID_ARGUMENT),
    "unsupported": (415, _GRPC_INVALID_ARGUMENT),
    "unauthenticated": (401, _GRPC_UNAUTHENTICATED),
    "connection_limit": (503, _GRPC_UNAVAILABLE),
}

Refused = Callable[[str, str], None]
"""Counts one request uvicorn's layer refused: (signal, outcome)."""


class _BodyTooLarge(Exception):
    pass


async def _next_chunk(stream: Any) -> bytes | None:
    """The next chunk of a body, None at its end.

    The end is not let out as ``StopAsyncIteration``: through ``wait_for`` the exception would
    sit in its task, its traceback holding the reading frame and so every chunk of the body, in
    a reference cycle that only the cyclic collector frees (serve's runs rarely: ``server_collector``).
    """
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


async def read_body(request: Request, limit: int, idle_seconds: float) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (declared or actual), never read to the end.

    A declared ``Content-Length`` over the limit is refused before any byte is read; a
    chunked or lying body is counted as it arrives. A client that stops sending for
    ``idle_seconds`` mid-body gets ``asyncio.TimeoutError``.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:  # uvicorn refused the non-numeric ones
        raise _BodyTooLarge()
    chunks, size = [], 0
    stream = request.stream().__aiter__()
    while True:
        chunk = await asyncio.wait_for(_next_chunk(stream), idle_seconds)
        if chunk is None:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge()
        chunks.append(chunk)


def _error(outcome: Outcome, content_type: str) -> Response:
    """An OTLP error response: a ``google.rpc.Status``, as protobuf or JSON like the request."""
    from google.rpc import status_pb2

    code, rpc_code = _HTTP_STATUS[outcome.status]
    headers = {}
    if outcome.retry_after:
        headers["Retry-After"] = str(outcome.retry_after)
    if outcome.status == "unauthenticated":
        headers["WWW-Authenticate"] = 'Bearer realm="otel-agent-eval"'
    if outcome.status in ("too_large", "connection_limit"):
        headers["Connection"] = "close"  # the rest of the body is never read; a connection over the cap is let go
    if content_type == PROTOBUF:
        body = status_pb2.Status(code=rpc_code, message=outcome.message).SerializeToString()
    else:
        content_type, body = JSON, json.dumps({"code": rpc_code, "message": outcome.message}).encode()
    return Response(body, code, headers=headers, media_type=content_type)


def _response(outcome: Outcome, content_type: str) -> Response:
    if not outcome.accepted:
        return _error(outcome, content_type)
    if content_type == JSON:
        from google.protobuf import json_format

        return Response(json_format.MessageToJson(outcome.response, indent=None).encode(), media_type=JSON)
    return Response(outcome.response.SerializeToString(), media_type=PROTOBUF)


def otlp_app(app: EvalServer) -> Starlette:
    """``POST /v1/traces`` and ``/v1/logs``: authenticate, refuse early if overloaded, read the body bounded, receive.

    Decoding runs on a worker thread, so the event loop keeps reading other connections (and
    answering early refusals) while a large request is decoded.
    """
    from .outcome import Outcome

    options = app.options

    async def export(request: Request, signal_name: str) -> Response:
        content_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        refused = app.authenticate("http", request.headers.get("authorization")) or app.refusal()
        if refused is None:
            try:
                body = await read_body(request, options.max_request_bytes, options.http_idle_seconds)
            except _BodyTooLarge:
                refused = Outcome("too_large", f"request body larger than {options.max_request_bytes} bytes")
            except (asyncio.TimeoutError, ClientDisconnect):
                app.count("http", signal_name, "incomplete")
                return Response(b"", 408, headers={"Connection": "close"})
        if refused is not None:
            app.count("http", signal_name, refused.status)
            return _error(refused, content_type)
        encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
        outcome = await run_in_threadpool(app.receive, signal_name, body, content_type, transport="http", encoding=encoding)
        return _response(outcome, content_type)

    async def traces(request: Request) -> Response:
        return await export(request, "traces")

    async def logs(request: Request) -> Response:
        return await export(request, "logs")

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/v1/logs", logs, methods=["POST"])])


class _TokenGuard:
    """An ASGI app behind the bearer token (``/metrics``: scores and volumes are not for everyone)."""

    def __init__(self, app: EvalServer, inner: Any) -> None:
        self.app, self.inner = app, inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization = dict(scope.get("headers") or []).get(b"authorization")
        refused = self.app.authenticate("admin", authorization)
        if refused is not None:
            await _error(refused, "text/plain")(scope, receive, send)
            return
        await self.inner(scope, receive, send)


def admin_app(app: EvalServer) -> Starlette:
    """``/metrics`` (prometheus-client's app, behind the token if one is set), ``/healthz`` and ``/readyz`` (always open)."""

    async def healthz(request: Request) -> Response:
        alive = app.alive() or app.draining
        return PlainTextResponse("ok\n" if alive else "pipeline stopped\n", 200 if alive else 503)

    async def readyz(request: Request) -> Response:
        ready, reason = app.ready()
        return PlainTextResponse(f"{reason}\n", 200 if ready else 503)

    metrics = _TokenGuard(app, make_asgi_app(app.registry))  # an ASGI app: Starlette routes to it as is
    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)])


class _IdleClosingH11(H11Protocol):
    """uvicorn's h11 protocol, with its keep-alive timer armed from the first byte too.

    uvicorn closes a connection idle *between* requests after ``timeout_keep_alive``,
    but not one that connects and sends nothing: without this, a few silent sockets
    would hold every slot of ``limit_concurrency``.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)


def _signal_of(path: str) -> str:
    return {"/v1/traces": "traces", "/v1/logs": "logs"}.get(path, "unknown")


class _ConnectionCap:
    """uvicorn's ``limit_concurrency`` check (connections open, requests running), answered and counted here.

    uvicorn answers its own 503 (no ``Retry-After``, no OTLP status body) and counts
    nothing; with its cap off, this wrapper refuses the same requests: 503 +
    ``Retry-After`` (retried by the OTLP exporters), the connection closed, the
    refusal counted as ``connection_limit``.
    """

    def __init__(self, inner: Any, limit: int, server: Callable[[], uvicorn.Server], refused: Refused,
                 retry_after: int) -> None:
        self.inner, self.limit, self.server, self.refused, self.retry_after = inner, limit, server, refused, retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.server().server_state  # both include this request's own connection and task
        if scope["type"] == "http" and (len(state.connections) > self.limit or len(state.tasks) > self.limit):
            from .outcome import Outcome

            self.refused(_signal_of(scope["path"]), "connection_limit")
            content_type = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1")
            outcome = Outcome("connection_limit", f"more than {self.limit} connections open: retry after {self.retry_after}s",
                              retry_after=self.retry_after)
            await _error(outcome, content_type.split(";", 1)[0].strip().lower())(scope, receive, send)
            return
        await self.inner(scope, receive, send)


def _protocol(refused: Refused) -> type[_IdleClosingH11]:
    """The h11 protocol counting the requests it refuses itself (unparseable: 400) as ``invalid_http``.

    A body that turns unparseable once the app is reading it (a bad chunk size) is counted
    by the app, as ``incomplete``: once per request either way.
    """

    class CountingH11(_IdleClosingH11):
        def send_400_response(self, msg: str) -> None:
            if self.cycle is None or self.cycle.response_complete:  # no app has seen this request
                refused("unknown", "invalid_http")
            super().send_400_response(msg)

    return CountingH11


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Made with ``IPPROTO_TCP`` explicitly: asyncio sets ``TCP_NODELAY`` only
    on sockets whose ``proto`` says TCP, and without it every response waits for a delayed ACK (~40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


THREAD_PREFIX = "otel-agent-eval-"
_UVICORN_LIFECYCLE = frozenset({
    "Started server process [%d]", "Finished server process [%d]", "Shutting down",
    "Waiting for connections to close. (CTRL+C to force quit)",
    "Waiting for background tasks to complete. (CTRL+C to force quit)",
})
"""uvicorn's start and stop lines (the format strings its ``uvicorn.error`` logger uses)."""


def _without_lifecycle_lines(record: logging.LogRecord) -> bool:
    """Drops uvicorn's start and stop lines logged by our servers' threads: serve runs two uvicorn servers,
    so each line came twice, without saying which server, with CTRL+C hints that do not apply (serve's own
    ``listening``, ``draining`` and ``stopped`` lines say it once). Other uvicorn servers in the process keep them."""
    return not (record.msg in _UVICORN_LIFECYCLE and record.threadName.startswith(THREAD_PREFIX))


class UvicornThread:
    """One uvicorn server on its own event loop thread, on a socket bound at construction (so port 0 is known)."""

    def __init__(self, app: Any, host: str, port: int, *, tls: TLSFiles | None, client_cert: bool, max_connections: int,
                 idle_seconds: float, name: str, refused: Refused = lambda signal, outcome: None,
                 retry_after: int = 1) -> None:
        def ssl_factory(config: uvicorn.Config, default: Any) -> Any:
            return reloading_ssl_context(tls, require_client_cert=client_cert)  # type: ignore[arg-type]

        config = uvicorn.Config(
            _ConnectionCap(app, max_connections, lambda: self.server, refused, retry_after),
            http=_protocol(refused), lifespan="off", log_config=None, access_log=False, server_header=False,
            limit_concurrency=None, timeout_keep_alive=idle_seconds,  # type: ignore[arg-type]
            timeout_graceful_shutdown=2, ssl_context_factory=ssl_factory if tls else None,
            ssl_certfile=tls.cert_file if tls else None,
        )
        self.server = uvicorn.Server(config)
        self.socket = _bind(host, port)
        self.port: int = self.socket.getsockname()[1]
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True,
                                        name=f"{THREAD_PREFIX}{name}")
        logging.getLogger("uvicorn.error").addFilter(_without_lifecycle_lines)  # once: a filter is added once

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Graceful: stop accepting, let in-flight requests finish (uvicorn's own shutdown), then close the socket."""
        self.server.should_exit = True
        if self._thread.ident is None:  # never started
            self.socket.close()
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.server.force_exit = True
            self._thread.join(1.0)
        self.socket.close()
