"""``otel-agent-eval serve``: the OTLP receiver (HTTP and gRPC) in front of one pipeline."""
