#!/usr/bin/env bash
# Sets up a virtualenv with the test extras, lints with ruff and runs the whole test suite.
# Usage: bash scripts/run-tests.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# A user's evaluator package (entry point otel_agent_eval.evaluators), run by tests/evaluators/test_evaluators_by_name.py.
.venv/bin/python -m pip install -q -e tests/data/plugin_pkg
# The JavaScript OTLP exporter for tests/serve/test_server_burst.py (skipped without it).
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix tests/js --no-audit --no-fund --silent || echo "npm ci failed: the JavaScript exporter test will be skipped" >&2
fi
# Lint before the tests (ruff pinned in the `test` extra, configured in pyproject.toml): a finding fails the run.
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
