"""Where results go: OpenTelemetry (spans + log events) and Prometheus."""
