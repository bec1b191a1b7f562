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
        enabled = gc.isenabled()
        gc.disable()
        try:
            loop.run_until_complete(read())
            assert gc.collect() == 0
        finally:
            if enabled:
                gc.enable()
    finally:
        loop.close()
