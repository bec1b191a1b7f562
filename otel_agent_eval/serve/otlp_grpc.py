"""OTLP/gRPC: ``TraceService/Export`` and ``LogsService/Export`` as a thin mapping of ``EvalServer.receive``.

The methods are registered with no deserializer, so the request bytes go through
the same ``receive`` (and the same decoder) as OTLP/HTTP's; gRPC itself bounds
the message size (``max_request_bytes``) and handles compression. TLS comes from
files gRPC re-reads when they change (``server_security.grpc_server_credentials``).
"""

from __future__ import annotations

import weakref
from concurrent import futures
from typing import TYPE_CHECKING, Any

from .otlp_http import PROTOBUF
from .security import grpc_server_credentials

if TYPE_CHECKING:
    from .outcome import Outcome
    from .server import EvalServer

_SERVICES = {
    "traces": "opentelemetry.proto.collector.trace.v1.TraceService",
    "logs": "opentelemetry.proto.collector.logs.v1.LogsService",
}


def _retry_metadata(code: int, message: str, retry_after: int) -> tuple[tuple[str, bytes], ...]:
    """RetryInfo both where grpc-go reads it (status details) and where the Python exporter does."""
    from google.protobuf.any_pb2 import Any as AnyProto
    from google.rpc import error_details_pb2, status_pb2

    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.seconds = retry_after
    detail = AnyProto()
    detail.Pack(retry)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()), ("google.rpc.retryinfo-bin", retry.SerializeToString()))


def _abort(context: Any, outcome: Outcome) -> None:
    import grpc

    code = {
        "overloaded": grpc.StatusCode.RESOURCE_EXHAUSTED,
        "draining": grpc.StatusCode.UNAVAILABLE,
        "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
        "too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    }.get(outcome.status, grpc.StatusCode.INVALID_ARGUMENT)
    if outcome.retry_after:
        context.set_trailing_metadata(_retry_metadata(code.value[0], outcome.message, outcome.retry_after))
    context.abort(code, outcome.message)


class _RefusalCounter:
    """Counts the RPCs gRPC refuses itself, which no handler of ours would see.

    - Over ``maximum_concurrent_rpcs``: ``RESOURCE_EXHAUSTED``, counted as ``rpc_limit``. gRPC
      decides under its server lock from its count of active RPCs, then asks the interceptors for
      the handler, still under that lock: reading the same two figures here gives the same answer.
      They are gRPC's private state, read defensively (never raising: a gRPC without them just
      leaves these refusals uncounted).
    - A request message over ``max_request_bytes`` (``grpc.max_receive_message_length``):
      ``RESOURCE_EXHAUSTED`` from gRPC's core, and the handler is never called. Each RPC gets its
      own handler here, and one let go without having been called ended without its request
      message: counted as ``too_large``, like OTLP/HTTP's 413. A client that gives up before its
      message has arrived (deadline, cancel), or an RPC cut off mid-message by shutdown, looks the
      same to the server and is counted there too; the OTLP exporters send the message with the
      call, so that is rare.
    """

    def __init__(self, app: EvalServer) -> None:
        self.app = app
        self.server: Any = None

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        signal_name = "traces" if "TraceService" in details.method else "logs"
        state = getattr(self.server, "_state", None)
        cap = getattr(state, "maximum_concurrent_rpcs", None)
        if cap is not None and getattr(state, "active_rpc_count", 0) >= cap:
            self.app.count("grpc", signal_name, "rpc_limit")
            return handler
        return self._watched(handler, signal_name) if hasattr(handler, "_replace") else handler

    def _watched(self, handler: Any, signal_name: str) -> Any:
        """``handler`` for one RPC, counting ``too_large`` if it is let go uncalled (see the class)."""
        behavior = handler.unary_unary
        called = [False]

        def unary_unary(request: bytes, context: Any) -> bytes:
            called[0] = True
            return behavior(request, context)

        def released(app: EvalServer = self.app) -> None:
            if not called[0]:
                app.count("grpc", signal_name, "too_large")

        weakref.finalize(unary_unary, released).atexit = False  # an RPC still held at exit is not a refusal
        return handler._replace(unary_unary=unary_unary)


def grpc_server(app: EvalServer, host: str, port: int) -> tuple[Any, int]:
    """A started-later ``grpc.Server`` with both OTLP services, and the port it bound."""
    import grpc

    def handler(signal_name: str) -> Any:
        def export(request: bytes, context: Any) -> bytes:
            metadata = dict(context.invocation_metadata())
            outcome = app.authenticate("grpc", metadata.get("authorization"))
            if outcome is not None:
                app.count("grpc", signal_name, outcome.status)
            else:
                outcome = app.receive(signal_name, request, PROTOBUF, transport="grpc")
            if not outcome.accepted:
                _abort(context, outcome)
            return outcome.response.SerializeToString()

        return grpc.method_handlers_generic_handler(_SERVICES[signal_name], {"Export": grpc.unary_unary_rpc_method_handler(export)})

    size = app.options.max_request_bytes
    refusals = _RefusalCounter(app)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=app.options.grpc_workers, thread_name_prefix="otel-agent-eval-grpc"),
        handlers=[handler("traces"), handler("logs")],
        interceptors=[refusals],  # duck-typed: gRPC only calls intercept_service
        options=[("grpc.max_receive_message_length", size), ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=app.options.grpc_workers * 4,
    )
    refusals.server = server
    address = f"{'[::]' if host in ('::', '') else host}:{port}"
    tls = app.options.tls
    try:
        bound = server.add_secure_port(address, grpc_server_credentials(tls)) if tls else server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio raises it for a port it cannot bind (older releases returned 0)
        raise OSError("grpcio could not bind it (address in use?)") from exc
    if bound == 0:
        raise OSError("grpcio could not bind it (address in use?)")
    return server, bound
