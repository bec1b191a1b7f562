"""Reading a request body leaves no reference cycle behind: the body is freed when the request ends.

The end of the body used to come out of ``asyncio.wait_for`` as ``StopAsyncIteration``; the
exception stayed in wait_for's task, and its traceback held the reading frame and every chunk,
in a cycle only the cyclic collector frees. serve runs that collector rarely
(``server_collector``), so the bodies of many requests stayed in memory (+3-5 MiB in
``benchmarks/serve_ingest.py``'s memory run).
"""

from __future__ import annotations

import asyncio
import gc

from starlette.requests import Request

from otel_agent_eval.serve import otlp_http
from otel_agent_eval.serve.otlp_http import read_body


def test_a_body_read_to_its_end_makes_no_garbage_cycle() -> None:
    async def read() -> None:
        messages = [{"type": "http.request", "body": b"x" * 100_000, "more_body": True},
                    {"type": "http.request", "body": b"y" * 100_000, "more_body": False}]

        async def receive() -> dict:
            return messages.pop(0)

        scope = {"type": "http", "method": "POST", "path": "/v1/traces", "headers": []}
        assert await read_body(Request(scope, receive), 1 << 20, 5.0) == b"x" * 100_000 + b"y" * 100_000

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(read())  # first use: imports and the loop's own one-off objects
        gc.collect()
        # Only what this read leaves behind counts: threads of earlier tests may make cycles of
        # their own meanwhile, so the collected objects are kept and searched, not just counted.
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            loop.run_until_complete(read())
            gc.collect()
            left = [obj for obj in gc.garbage if _from_reading(obj)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert left == []
    finally:
        loop.close()


def _from_reading(obj: object) -> bool:
    """A frame or coroutine of the body reader's module, or the exception that ended a body."""
    if isinstance(obj, StopAsyncIteration):
        return True
    code = getattr(obj, "f_code", None) or getattr(obj, "cr_code", None)
    return code is not None and code.co_filename == otlp_http.__file__
