"""af_otel: receipts for LLM calls on OpenTelemetry spans."""
