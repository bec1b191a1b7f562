"""Importers: OTLP (protobuf, JSON, Collector file-exporter lines) and Langfuse exports -> ``SpanRecord``s."""
