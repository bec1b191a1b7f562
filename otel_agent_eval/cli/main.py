"""Command line: ``otel-agent-eval demo | evaluate | serve | experiment | mcp``. A thin shell over the library."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import DEFAULT_EVALUATORS, ConfigError
from .evaluate import DEFAULT_MAX_BUFFERED_RECORDS

if TYPE_CHECKING:
    from ..config import Settings
    from ..experiments.stats_ci import Gate


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with the command's flags over them; each ``--threshold``
    overrides the environment's threshold for its evaluator only."""
    from ..config import Settings, check_thresholds, parse_thresholds

    if os.getcwd() not in sys.path:  # module:Class evaluators and --task modules next to the user, as with `python -m`
        sys.path.insert(0, os.getcwd())
    overrides = {"evaluators": args.evaluators, "expectations_file": args.expectations}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    settings = Settings.load(given_as={"evaluators": "--evaluators", "expectations_file": "--expectations"},
                             **overrides)
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

    from ..formats.otlp import (  # protobuf without the otlp extra: an OTLPDecodeError that says so
        STDIN,
        OTLPDecodeError,
    )
    from ..pipeline.build import evaluation
    from .evaluate import batch_collector, evaluate_files, evaluate_files_parallel, print_text, report_json

    settings = _settings(args)
    batch_collector()
    judge = None
    try:
        gates = _gates(args)
        if args.jobs > 1 and len(args.files) > 1 and STDIN in args.files:
            raise ValueError("--jobs: standard input ('-') is read by this process only: use --jobs 1 with '-'")
        if args.jobs > 1 and len(args.files) > 1:
            build = functools.partial(evaluation, settings)
            report, _ = evaluate_files_parallel(args.files, args.jobs, build, gates, max_buffered_records=args.max_buffered_records)
        else:
            evaluators, judge = evaluation(settings)
            report, _ = evaluate_files(args.files, evaluators, gates, judge_concurrency=judge.settings.concurrency if judge else 1,
                                       max_buffered_records=args.max_buffered_records)
    except (OSError, ValueError, OTLPDecodeError) as exc:
        print(f"otel-agent-eval evaluate: {exc}", file=sys.stderr)
        return 2
    finally:
        if judge is not None:
            judge.close()
    if args.format == "json":
        sys.stdout.flush()
        sys.stdout.buffer.write(report_json(report))  # not `+ b"\n"`: a copy of the whole report
        sys.stdout.buffer.write(b"\n")
        sys.stdout.buffer.flush()
    else:
        print_text(report, sys.stdout)
    return 1 if report.failed_gates() else 0


def _gates(args: argparse.Namespace) -> list[Gate]:
    if not (args.gate or args.gate_lower_bound):
        return []  # without importing experiments (and the SDK that its runner needs)
    from ..experiments.stats_ci import Gate

    return [Gate.parse(g) for g in args.gate] + [Gate.parse(g, lower_bound=True) for g in args.gate_lower_bound]


def _experiment(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..evaluators.registry import UnknownEvaluator, import_spec
    from ..experiments.core import (
        case_evaluators,
        compare,
        failed_gates,
        load_dataset,
        print_text,
        progress_bar,
        run_experiment,
    )

    settings = _settings(args)
    try:
        gates = _gates(args)
        if args.concurrency < 1:
            raise ValueError(f"--concurrency {args.concurrency}: must be at least 1")
        cases = load_dataset(args.dataset)
        baseline = json.loads(Path(args.compare).read_text()) if args.compare else None
        task = import_spec(args.task)
    except UnknownEvaluator as exc:
        print(f"otel-agent-eval experiment: --task {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"otel-agent-eval experiment: {exc}", file=sys.stderr)
        return 2
    from ..pipeline.build import evaluation

    built = evaluation(settings)  # a bad evaluator spec fails before any case runs
    try:
        report = run_experiment(cases, task, case_evaluators(built.factory), concurrency=args.concurrency,
                                progress=progress_bar(sys.stderr))
    finally:
        built.close()
    comparison = compare(baseline, report) if baseline is not None else None
    failures = failed_gates(report, gates)
    if args.format == "json":
        json.dump({**report.to_json(), "comparison": comparison, "failed_gates": failures}, sys.stdout, indent=2)
        print()
    else:
        print_text(report, sys.stdout, comparison)
        for failure in failures:
            print(f"GATE FAILED: {failure}")
    return 1 if failures else 0


def _missing_otlp_extra(command: str) -> int:
    print(f"otel-agent-eval {command}: needs the otlp extra (protobuf, gRPC, OTLP exporters): "
          "pip install 'otel-agent-eval[otlp]'", file=sys.stderr)
    return 2


def _serve(args: argparse.Namespace) -> int:
    try:
        from ..serve.server import ServeOptions, serve
    except ImportError:
        return _missing_otlp_extra("serve")

    from ..serve.security import TLSFiles

    def port(value: int) -> int | None:
        return None if value < 0 else value

    if bool(args.tls_cert_file) != bool(args.tls_key_file) or (args.tls_client_ca_file and not args.tls_cert_file):
        print("otel-agent-eval serve: --tls-cert-file and --tls-key-file go together (and --tls-client-ca-file needs them)",
              file=sys.stderr)
        return 2

    settings = _settings(args)
    try:
        options = ServeOptions(
            host=args.host, http_port=port(args.http_port), grpc_port=port(args.grpc_port),
            admin_port=port(args.admin_port if args.admin_port is not None else (settings.prometheus_port or 9464)),
            drain_seconds=args.drain_seconds, high_water=args.high_water, retry_after_seconds=args.retry_after,
            max_http_connections=args.max_http_connections,
            tls=TLSFiles(args.tls_cert_file, args.tls_key_file, args.tls_client_ca_file) if args.tls_cert_file else None,
            bearer_token_file=args.bearer_token_file,
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
    evaluate = commands.add_parser("evaluate", help="assemble and evaluate exported OTLP traces (JSON, JSON lines, protobuf; gzip, zstd)")
    evaluate.add_argument("files", nargs="+", help="OTLP trace files; - reads standard input (a pipe too)")
    _output_and_gate_flags(evaluate)
    _evaluator_flags(evaluate)
    evaluate.add_argument("--jobs", type=int, default=1, metavar="N",
                          help="spread the files over N processes, each with 1/N of the judge budget (default 1)")
    evaluate.add_argument("--max-buffered-records", type=_positive_int, default=DEFAULT_MAX_BUFFERED_RECORDS, metavar="N",
                          help="span and log records held in memory while reading; beyond, spilled to temporary files "
                               f"(default {DEFAULT_MAX_BUFFERED_RECORDS:,})")
    evaluate.set_defaults(func=_evaluate)
    serve = commands.add_parser("serve", help="OTLP receiver (HTTP 4318, gRPC 4317) evaluating agent traces from any app")
    env = os.environ
    serve.add_argument("--host", default=env.get("OTEL_AGENT_EVAL_SERVE_HOST", "127.0.0.1"),
                       help="address to bind (env OTEL_AGENT_EVAL_SERVE_HOST; default 127.0.0.1, loopback: "
                            "pass 0.0.0.0 to accept from other hosts)")
    serve.add_argument("--tls-cert-file", default=env.get("OTEL_AGENT_EVAL_SERVE_TLS_CERT_FILE"),
                       help="PEM certificate (chain) for TLS on every port; re-read when it changes (env OTEL_AGENT_EVAL_SERVE_TLS_CERT_FILE)")
    serve.add_argument("--tls-key-file", default=env.get("OTEL_AGENT_EVAL_SERVE_TLS_KEY_FILE"),
                       help="PEM private key of --tls-cert-file (env OTEL_AGENT_EVAL_SERVE_TLS_KEY_FILE)")
    serve.add_argument("--tls-client-ca-file", default=env.get("OTEL_AGENT_EVAL_SERVE_TLS_CLIENT_CA_FILE"),
                       help="PEM CA(s): OTLP clients must present a certificate they signed (mutual TLS; "
                            "env OTEL_AGENT_EVAL_SERVE_TLS_CLIENT_CA_FILE)")
    serve.add_argument("--bearer-token-file", default=env.get("OTEL_AGENT_EVAL_SERVE_BEARER_TOKEN_FILE"),
                       help="file of accepted tokens, one per line: OTLP requests and /metrics need 'Authorization: Bearer "
                            "<token>'; re-read when it changes (env OTEL_AGENT_EVAL_SERVE_BEARER_TOKEN_FILE)")
    serve.add_argument("--http-port", type=int, default=4318, help="OTLP/HTTP port (default 4318; 0 = a free port; -1 = off)")
    serve.add_argument("--grpc-port", type=int, default=4317, help="OTLP/gRPC port (default 4317; 0 = a free port; -1 = off)")
    serve.add_argument("--admin-port", type=int, default=None,
                       help="/metrics, /healthz, /readyz (default OTEL_AGENT_EVAL_PROMETHEUS_PORT or 9464; -1 = off)")
    serve.add_argument("--drain-seconds", type=float, default=30.0, help="on SIGTERM, evaluate and export buffered traces within this (default 30)")
    serve.add_argument("--high-water", type=float, default=0.8,
                       help="refuse requests (429 / RESOURCE_EXHAUSTED) above this share of OTEL_AGENT_EVAL_MAX_INTAKE_SPANS (default 0.8)")
    serve.add_argument("--retry-after", type=int, default=1, help="seconds clients are told to wait when refused (default 1)")
    serve.add_argument("--max-http-connections", type=int, default=64,
                       help="OTLP/HTTP connections served at once; beyond, requests get 503 (default 64)")
    serve.add_argument("--export-endpoint", default=None,
                       help="OTLP endpoint for results (default: OTEL_EXPORTER_OTLP_[TRACES_|LOGS_]ENDPOINT; unset: /metrics only)")
    serve.add_argument("--export-protocol", choices=("http/protobuf", "grpc"), default=None,
                       help="default: OTEL_EXPORTER_OTLP_PROTOCOL or http/protobuf")
    _evaluator_flags(serve)
    serve.set_defaults(func=_serve)
    experiment = commands.add_parser("experiment", help="run an agent task over a dataset of cases, evaluate every run, "
                                                        "report pass rates with 95% confidence intervals")
    experiment.add_argument("dataset", help="JSON-lines file of cases: id, input, expected_tools, facts, expected_output, ...")
    experiment.add_argument("--task", required=True, metavar="MODULE:FUNCTION",
                            help="the agent: called with each Case; what it emits as OpenTelemetry spans is evaluated")
    experiment.add_argument("--concurrency", type=int, default=1, help="cases run at once (default 1)")
    experiment.add_argument("--compare", default=None, metavar="BASELINE.json",
                            help="a saved --format json run: per-evaluator differences (two-proportion test) and flipped cases")
    _output_and_gate_flags(experiment)
    _evaluator_flags(experiment)
    experiment.set_defaults(func=_experiment)
    mcp = commands.add_parser("mcp", help="MCP server with evaluation tools (stdio, or streamable HTTP with --port)")
    mcp.add_argument("--port", type=int, default=None, help="serve streamable HTTP at http://HOST:PORT/mcp (default: stdio)")
    mcp.add_argument("--host", default="127.0.0.1", help="address to bind with --port (default 127.0.0.1)")
    mcp.set_defaults(func=_mcp)
    return parser


def _evaluator_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evaluators", default=None,
                        help="comma-separated evaluators: built-in or judge names, installed ones (entry points), "
                             "module:Class or module:function (default: OTEL_AGENT_EVAL_EVALUATORS, else "
                             f"{','.join(DEFAULT_EVALUATORS)})")
    parser.add_argument("--expectations", default=None,
                        help="JSON file of expectation rules: expected tools, retry keys, fallbacks, facts, thresholds")
    parser.add_argument("--threshold", action="append", default=[], metavar="EVALUATOR=VALUE",
                        help="pass threshold of one evaluator, over OTEL_AGENT_EVAL_THRESHOLDS (repeatable)")


def _output_and_gate_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--gate", action="append", default=[], metavar="EVALUATOR=MIN_PASS_RATE",
                        help="exit 1 when the evaluator's pass rate is below this (repeatable)")
    parser.add_argument("--gate-lower-bound", action="append", default=[], metavar="EVALUATOR=MIN",
                        help="exit 1 when the lower bound of the pass rate's Wilson 95%% interval is below this (repeatable)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"otel-agent-eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head` stopped reading: no traceback (the way the Python docs give for SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not raise again
        return 1
