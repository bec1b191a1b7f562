"""Scripted runs of real agent frameworks, instrumented with real OpenTelemetry SDKs."""
