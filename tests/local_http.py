"""The HTTP plumbing the tests' local OpenAI-compatible servers share: stdlib only.

A ``ThreadingHTTPServer`` on 127.0.0.1 at a free port, in a daemon thread; each POST's
JSON body goes to ``handle(path, headers, body)``, whose ``(status, headers, bytes)`` is
sent back as ``application/json`` unless its headers name another ``content-type`` (a whole
``text/event-stream`` body, for streamed answers). Subclasses say what the API answers:
``tests/fake_openai_server.py`` (a judge: scripted failures, yes/no answers) and
``tests/frameworks/openai_server.py`` (agent frameworks: scripted tool calls, the
Responses API).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = tuple[int, dict[str, str], bytes]


class LocalJSONServer:
    """Start with ``start()`` or ``with``; stop with ``close()`` (``stop()`` is the same)."""

    thread_name = "local-json-server"

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)

    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Response:
        """The answer to one POST (``headers`` lower-cased; an unparsable body arrives as ``{}``)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> LocalJSONServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    stop = close

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: LocalJSONServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, data = server.handle(self.path, headers, body if isinstance(body, dict) else {})
            extra = {k.lower(): v for k, v in extra.items()}
            try:
                self.send_response(status)
                self.send_header("content-type", extra.pop("content-type", "application/json"))
                self.send_header("content-length", str(len(data)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout): nothing to tell it

    return Handler
