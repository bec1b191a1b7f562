"""Who may talk to ``serve``: TLS (optionally mutual) and bearer tokens, both re-read when their files change.

The spans ``serve`` accepts drive paid judge calls and the pass rates alerts watch,
so the receiver must not take them from anyone who can reach the port. Everything
here is file based, like the Collector's ``configtls`` and ``bearertokenauth``:
certificates and tokens are rotated by replacing the files (a Kubernetes Secret
update), and the server picks them up on the next handshake or request, without
a restart. A file is re-read when its modification time or size changes, checked
at most once a second.
"""

from __future__ import annotations

import hmac
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_CHECK_EVERY_SECONDS = 1.0


class WatchedFiles(Generic[T]):
    """A value loaded from files, reloaded when any of them changes (mtime or size), checked at most once a second.

    A reload that fails (a half-written file during rotation) keeps the previous value
    and is retried at the next check.
    """

    def __init__(self, paths: tuple[str, ...], load: Callable[[], T]) -> None:
        self._paths = paths
        self._load = load
        self._lock = threading.Lock()
        self._stamp = self._stamps()
        self._value = load()  # errors at startup are the operator's to see
        self._checked = time.monotonic()
        self.reloads = 0

    def _stamps(self) -> tuple[tuple[int, int], ...]:
        out = []
        for path in self._paths:
            try:
                st = os.stat(path)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((-1, -1))
        return tuple(out)

    def get(self) -> T:
        now = time.monotonic()
        if now - self._checked < _CHECK_EVERY_SECONDS:
            return self._value
        with self._lock:
            if now - self._checked < _CHECK_EVERY_SECONDS:
                return self._value
            self._checked = now
            stamp = self._stamps()
            if stamp != self._stamp:
                try:
                    self._value = self._load()
                    self._stamp = stamp
                    self.reloads += 1
                except (OSError, ValueError, ssl.SSLError):
                    pass  # keep serving with the previous value; retried next check
        return self._value


@dataclass(frozen=True)
class TLSFiles:
    """``--tls-cert-file`` / ``--tls-key-file``, and ``--tls-client-ca-file`` for mutual TLS."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def read(self) -> tuple[bytes, bytes, bytes | None]:
        with open(self.cert_file, "rb") as c, open(self.key_file, "rb") as k:
            cert, key = c.read(), k.read()
        ca = None
        if self.client_ca_file:
            with open(self.client_ca_file, "rb") as f:
                ca = f.read()
        return cert, key, ca

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p)


def _ssl_context(files: TLSFiles, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert_file, files.key_file)
    if files.client_ca_file and require_client_cert:
        context.load_verify_locations(cafile=files.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def reloading_ssl_context(files: TLSFiles, *, require_client_cert: bool) -> ssl.SSLContext:
    """An ``SSLContext`` for asyncio servers that switches each new handshake to the freshest files.

    The switch happens in the SNI callback, which OpenSSL calls on every ClientHello
    (with ``None`` when the client sends no server name), so rotation needs no restart.
    """
    current = WatchedFiles(files.paths, lambda: _ssl_context(files, require_client_cert))
    base = _ssl_context(files, require_client_cert)

    def pick(ssl_object: ssl.SSLObject, server_name: str | None, _context: ssl.SSLContext) -> None:
        ssl_object.context = current.get()

    base.sni_callback = pick  # type: ignore[assignment]
    return base


def grpc_server_credentials(files: TLSFiles) -> Any:
    """gRPC credentials that fetch the certificate again when its files change (gRPC's own reload hook)."""
    import grpc

    def configuration() -> Any:
        cert, key, ca = files.read()
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    watched = WatchedFiles(files.paths, configuration)
    served = [watched.get()]

    def fetch() -> Any:
        latest = watched.get()
        if latest is served[0]:
            return None  # unchanged: gRPC keeps the current one
        served[0] = latest
        return latest

    return grpc.dynamic_ssl_server_credentials(served[0], fetch, require_client_authentication=bool(files.client_ca_file))


def _read_tokens(path: str) -> tuple[bytes, ...]:
    with open(path, "rb") as f:
        tokens = tuple(line.strip() for line in f.read().splitlines() if line.strip())
    if not tokens:
        raise ValueError(f"bearer token file {path} holds no token")
    return tokens


class BearerTokens:
    """Tokens from ``--bearer-token-file`` (one per line, so a rotation can accept old and new for a while)."""

    def __init__(self, path: str) -> None:
        self._tokens = WatchedFiles((path,), lambda: _read_tokens(path))

    def check(self, authorization: str | bytes | None) -> str | None:
        """None when ``authorization`` (the header or metadata value) carries a valid token, else the refusal reason.

        Reasons: ``missing`` (no header), ``malformed`` (not ``Bearer <token>``), ``invalid``.
        Every token is compared in constant time, so timing tells nothing about how close a guess was.
        """
        if not authorization:
            return "missing"
        raw = authorization.encode("latin-1", "replace") if isinstance(authorization, str) else authorization
        scheme, _, token = raw.strip().partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return "malformed"
        token = token.strip()
        valid = False
        for expected in self._tokens.get():
            valid |= hmac.compare_digest(token, expected)
        return None if valid else "invalid"
