"""Command line: ``otel-agent-eval demo | evaluate``. A thin shell over the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .config import ConfigError
from .offline import DEFAULT_MAX_BUFFERED_RECORDS

if TYPE_CHECKING:
    from .config import Settings


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with the command's flags over them; each ``--threshold``
    overrides the environment's threshold for its evaluator only."""
    from .config import Settings, check_thresholds, parse_thresholds

    overrides = {"evaluators": args.evaluators, "expectations_file": args.expectations}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    settings = Settings.load(**overrides)
    if not args.threshold:
        return settings
    chosen: dict[str, float] = {}
    for text in args.threshold:
        try:
            chosen.update(check_thresholds(parse_thresholds(text)))
        except ValueError as exc:
            raise ConfigError(f"--threshold {text!r}: {exc}") from None
    return Settings.load(**overrides, thresholds={**settings.thresholds, **chosen})


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    port = None if args.metrics_port < 0 else args.metrics_port
    run_demo(traces=args.traces, rate=args.rate, metrics_port=port, linger=args.linger, sample_rate=args.sample_rate)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    import functools
    import gc

    from .evaluators import build_configured_evaluators
    from .offline import (
        Gate,
        evaluate_files,
        evaluate_files_parallel,
        print_text,
        to_json,
    )

    try:
        from .otlp import OTLPDecodeError
    except ImportError:
        return _missing_otlp_extra("evaluate")

    settings = _settings(args)
    # A batch job that allocates millions of long-lived objects and makes no cycles of
    # note: the cyclic collector's full passes cost up to a third of the run otherwise.
    gc.set_threshold(100_000, 50, 1000)
    judge = None
    try:
        gates = [Gate.parse(g) for g in args.gate]
        if args.jobs > 1 and len(args.files) > 1:
            build = functools.partial(build_configured_evaluators, settings)
            report, _ = evaluate_files_parallel(args.files, args.jobs, build, gates, max_buffered_records=args.max_buffered_records)
        else:
            evaluators, judge = build_configured_evaluators(settings)
            report, _ = evaluate_files(args.files, evaluators, gates, judge_concurrency=judge.settings.concurrency if judge else 1,
                                       max_buffered_records=args.max_buffered_records)
    except (OSError, ValueError, OTLPDecodeError) as exc:
        print(f"otel-agent-eval evaluate: {exc}", file=sys.stderr)
        return 2
    finally:
        if judge is not None:
            judge.close()
    if args.format == "json":
        _write_json(to_json(report))
    else:
        print_text(report, sys.stdout)
    return 1 if report.failed_gates() else 0


def _write_json(document: object) -> None:
    """Indented JSON on stdout: with orjson when installed (ten times faster on large reports)."""
    try:
        import orjson
    except ImportError:
        import json

        json.dump(document, sys.stdout, indent=2)
        print()
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.buffer.flush()


def _missing_otlp_extra(command: str) -> int:
    print(f"otel-agent-eval {command}: needs the otlp extra (protobuf, gRPC, OTLP exporters): "
          "pip install 'otel-agent-eval[otlp]'", file=sys.stderr)
    return 2


def _serve(args: argparse.Namespace) -> int:
    try:
        from .server import ServeOptions, serve
    except ImportError:
        return _missing_otlp_extra("serve")

    def port(value: int) -> int | None:
        return None if value < 0 else value

    settings = _settings(args)
    try:
        options = ServeOptions(
            host=args.host, http_port=port(args.http_port), grpc_port=port(args.grpc_port),
            admin_port=port(args.admin_port if args.admin_port is not None else (settings.prometheus_port or 9464)),
            drain_seconds=args.drain_seconds, high_water=args.high_water, retry_after_seconds=args.retry_after,
            max_http_connections=args.max_http_connections,
            export_endpoint=args.export_endpoint, export_protocol=args.export_protocol,
        )
    except ValueError as exc:
        print(f"otel-agent-eval serve: {exc}", file=sys.stderr)
        return 2
    return serve(settings, options)


def _mcp(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise ConfigError("the mcp command needs the mcp package: pip install 'otel-agent-eval[mcp]'")
    from .mcp_server import run

    run(port=args.port, host=args.host)
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-agent-eval", description="Online evaluation of LLM agents through OpenTelemetry")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a scripted agent workload with the processor attached")
    demo.add_argument("--traces", type=int, default=150, help="agent traces to run (default 150)")
    demo.add_argument("--rate", type=float, default=40.0, help="agent traces per second (default 40; 0 = as fast as possible)")
    demo.add_argument("--metrics-port", type=int, default=9464, help="serve /metrics here (default 9464; 0 = a free port; -1 = off)")
    demo.add_argument("--linger", type=float, default=0.0, help="keep /metrics up this many seconds after the run")
    demo.add_argument("--sample-rate", type=float, default=None, help="share of agent traces evaluated (default: OTEL_AGENT_EVAL_SAMPLE_RATE or 1.0)")
    demo.set_defaults(func=_demo)
    evaluate = commands.add_parser("evaluate", help="assemble and evaluate exported OTLP traces (JSON, JSON lines, protobuf, gzip)")
    evaluate.add_argument("files", nargs="+", help="OTLP trace files")
    evaluate.add_argument("--format", choices=("text", "json"), default="text")
    evaluate.add_argument("--evaluators", default=None, help="comma-separated built-in evaluators (default: OTEL_AGENT_EVAL_EVALUATORS or all deterministic)")
    evaluate.add_argument("--expectations", default=None,
                          help="JSON file of expectation rules: expected tools, retry keys, fallbacks, facts, thresholds")
    evaluate.add_argument("--threshold", action="append", default=[], metavar="EVALUATOR=VALUE",
                          help="pass threshold of one evaluator, over OTEL_AGENT_EVAL_THRESHOLDS (repeatable)")
    evaluate.add_argument("--gate", action="append", default=[], metavar="EVALUATOR=MIN_PASS_RATE",
                          help="exit 1 when the evaluator's pass rate is below this (repeatable)")
    evaluate.add_argument("--jobs", type=int, default=1, metavar="N",
                          help="spread the files over N processes, each with 1/N of the judge budget (default 1)")
    evaluate.add_argument("--max-buffered-records", type=_positive_int, default=DEFAULT_MAX_BUFFERED_RECORDS, metavar="N",
                          help="span and log records held in memory while reading; beyond, spilled to temporary files "
                               f"(default {DEFAULT_MAX_BUFFERED_RECORDS:,})")
    evaluate.set_defaults(func=_evaluate)
    serve = commands.add_parser("serve", help="OTLP receiver (HTTP 4318, gRPC 4317) evaluating agent traces from any app")
    serve.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    serve.add_argument("--http-port", type=int, default=4318, help="OTLP/HTTP port (default 4318; 0 = a free port; -1 = off)")
    serve.add_argument("--grpc-port", type=int, default=4317, help="OTLP/gRPC port (default 4317; 0 = a free port; -1 = off)")
    serve.add_argument("--admin-port", type=int, default=None,
                       help="/metrics, /healthz, /readyz (default OTEL_AGENT_EVAL_PROMETHEUS_PORT or 9464; -1 = off)")
    serve.add_argument("--drain-seconds", type=float, default=30.0, help="on SIGTERM, evaluate and export buffered traces within this (default 30)")
    serve.add_argument("--high-water", type=float, default=0.8,
                       help="refuse requests (429 / RESOURCE_EXHAUSTED) above this share of OTEL_AGENT_EVAL_MAX_INTAKE_SPANS (default 0.8)")
    serve.add_argument("--retry-after", type=int, default=1, help="seconds clients are told to wait when refused (default 1)")
    serve.add_argument("--max-http-connections", type=int, default=64,
                       help="OTLP/HTTP connections served at once; beyond, 503 and close (default 64)")
    serve.add_argument("--export-endpoint", default=None,
                       help="OTLP endpoint for results (default: OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]ENDPOINT; unset: /metrics only)")
    serve.add_argument("--export-protocol", choices=("http/protobuf", "grpc"), default=None,
                       help="default: OTEL_EXPORTER_OTLP_PROTOCOL or http/protobuf")
    serve.add_argument("--evaluators", default=None, help="comma-separated built-in evaluators (default: OTEL_AGENT_EVAL_EVALUATORS)")
    serve.add_argument("--expectations", default=None,
                       help="JSON file of expectation rules: expected tools, retry keys, fallbacks, facts, thresholds")
    serve.add_argument("--threshold", action="append", default=[], metavar="EVALUATOR=VALUE",
                       help="pass threshold of one evaluator, over OTEL_AGENT_EVAL_THRESHOLDS (repeatable)")
    serve.set_defaults(func=_serve)
    mcp = commands.add_parser("mcp", help="MCP server with evaluation tools (stdio, or streamable HTTP with --port)")
    mcp.add_argument("--port", type=int, default=None, help="serve streamable HTTP at http://HOST:PORT/mcp (default: stdio)")
    mcp.add_argument("--host", default="127.0.0.1", help="address to bind with --port (default 127.0.0.1)")
    mcp.set_defaults(func=_mcp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"otel-agent-eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
