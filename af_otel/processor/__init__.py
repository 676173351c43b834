"""The emit side: the span processor, the exporter form, the util-genai completion hook and the
explicit API. The only package that imports ``opentelemetry.sdk``."""

from af_otel.processor.api import LLMCall, llm_call, run
from af_otel.processor.exporter import ReceiptSpanExporter, RunTagger
from af_otel.processor.hook import ReceiptCompletionHook, completion_hook, load_completion_hook
from af_otel.processor.processor import ReceiptSpanProcessor

__all__ = [
    "LLMCall",
    "ReceiptCompletionHook",
    "ReceiptSpanExporter",
    "ReceiptSpanProcessor",
    "RunTagger",
    "completion_hook",
    "llm_call",
    "load_completion_hook",
    "run",
]
