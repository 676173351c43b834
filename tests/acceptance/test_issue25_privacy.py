"""Issue 25, "Privacy is unchanged": nothing of the wire body lands on the span that the
instrumentation would not have put there. With content capture on (`content="auto"`, the default:
commits go inline because the span carries the request content), a body that holds more than the
record (a system prompt and a tool the record leaves out) puts only what the record holds on the
span; the rest goes to the store, and the call still verifies from the wire. Real SDK spans, a
hand-made GenAI span around the real ``openai`` client over ``httpx2`` (a MockTransport answers),
the processor with the tap on by default."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from af_otel.wire import uninstall
from tests.builders import end_attributes, start_attributes, user
from tests.wire.replies import CHAT_REPLY

# Drawn around the code's own constants and the other texts of the call (STYLE: hypothesis draws
# af_otel's string constants): letters only, long enough to be found nowhere else by chance.
SECRETS = st.text(alphabet="QXZJKVWqxzjkvw", min_size=12, max_size=40)


def _everything_on(span: Any) -> str:
    """Every attribute and event attribute value the span carries, as one text."""
    values = [*dict(span.attributes or {}).values()]
    values += [v for event in span.events for v in dict(event.attributes or {}).values()]
    return json.dumps(values, default=str)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(system_text=SECRETS, tool_text=SECRETS, asked=SECRETS)
def test_the_tap_puts_on_the_span_only_what_the_record_holds(
    tmp_path_factory: Any, system_text: str, tool_text: str, asked: str
) -> None:
    tmp = tmp_path_factory.mktemp("privacy")
    system_text, tool_text, asked = f"s {system_text}", f"d {tool_text}", f"u {asked}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=tmp / "store")
    )
    http = httpx2.Client(
        transport=httpx2.MockTransport(lambda _r: httpx2.Response(200, json=CHAT_REPLY))
    )
    client = openai.OpenAI(api_key="sk-test", http_client=http)
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": tool_text,
            "parameters": {"type": "object"},
        },
    }
    try:
        with (
            af_otel.run("acceptance-privacy"),
            provider.get_tracer("app").start_as_current_span(
                "chat gpt-4o", attributes=start_attributes("gpt-4o", "openai")
            ) as span,
        ):
            client.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "system", "content": system_text},
                    {"role": "user", "content": asked},
                ],
                tools=[tool],
                tool_choice="required",
            )
            # The record holds the user's message only: no system prompt, no tools.
            span.set_attributes(
                end_attributes([user(asked)], system=None, tools=None, temperature=None)
            )
        (finished,) = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o"]
        attrs = dict(finished.attributes or {})
        assert attrs[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
        on_span = _everything_on(finished)
        assert asked in on_span  # the record's own content, as the instrumentation put it
        assert system_text not in on_span
        assert tool_text not in on_span
        # The span's af.* attributes and events add no prompt text: what they hold of the
        # record's content is only what the record already holds.
        af_values = json.dumps(
            [v for k, v in attrs.items() if k.startswith("af.")]
            + [
                v
                for e in finished.events
                for k, v in dict(e.attributes or {}).items()
                if k.startswith("af.")
            ],
            default=str,
        )
        assert system_text not in af_values
        assert tool_text not in af_values
        stored = b"".join(p.read_bytes() for p in (tmp / "store").rglob("*") if p.is_file())
        assert orjson.dumps(system_text)[1:-1] in stored
        (view,) = af_otel.served_views(af_otel.read_spans([finished]), store=tmp / "store")
        assert af_otel.verify(view).status == VerdictStatus.VERIFIED, view.gaps
    finally:
        provider.shutdown()
        uninstall()
