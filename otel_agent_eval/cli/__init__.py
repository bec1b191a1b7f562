"""The command line (``otel-agent-eval``): demo, evaluate, serve, experiment, mcp."""

from .main import main

__all__ = ["main"]
