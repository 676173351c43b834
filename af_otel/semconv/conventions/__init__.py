"""The instrumentation families af_otel reads, one module each."""
