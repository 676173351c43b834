"""The emit side: the span processor, the exporter form, the util-genai completion hook and the
explicit API. The only package that imports ``opentelemetry.sdk``."""

from af_otel.processor.processor import ReceiptSpanProcessor

__all__ = ["ReceiptSpanProcessor"]
