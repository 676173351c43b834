"""``af-otel demo``: a scripted tool-using agent, instrumented the way a user would, exported as
OTLP JSON lines plus a local store, so that every other subcommand has something real to read.

The agent is the real ``openai`` client, its HTTP faked by a scripted model (no network), traced
by the official ``opentelemetry-instrumentation-genai-openai`` with content capture off; af_otel's
completion hook mints each receipt and `ReceiptSpanProcessor` wraps the batch processor that
writes the file. With capture off, af_otel's default puts no prompt text in the trace either: the
commits' payloads and the run's base go to the store, the spans carry hashes and addresses. The
agent passes tools and ``parallel_tool_calls=False``, and genai-openai records neither
``tool_choice`` nor ``parallel_tool_calls``; the processor's wire tap sees the request body the client sent, so every receipt is minted from
it (``af.receipt.source = wire``) and the calls read back ``verified``. One more call goes through
the instrumentation set up without the hook: its span holds nothing to mint from, and its receipt
comes from the wire alone. A tampered copy of the file shows what ``verify`` says of tampering.
Needs the
``test`` extra (openai, the instrumentation, the OTLP JSON file exporter):
``pip install 'af-otel[test]'``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import Any, Final

from af_otel import names
from af_otel.cli.pipeline import json_lines_provider
from af_otel.cli.readback import demo_readback
from af_otel.model.fields import order_fields
from af_otel.processor import completion_hook, run
from af_otel.reader.sources.decoders import attributes
from af_otel.store.base import encode_json
from af_otel.store.items import CHUNK_REF, ITEM_REF, is_item_ref
from af_otel.store.local import LocalStore

DEFAULT_OUT: Final = "af-otel-demo"
RUN_ID: Final = "demo-run-1"
# A second service calls the model through an instrumentation set up without af_otel's hook and
# with content capture off: the span reaches the processor with nothing to mint a receipt from,
# and the wire tap's copy of the body the client sent is what its receipt is minted from.
UNHOOKED_RUN_ID: Final = "demo-run-2"
UNHOOKED_QUESTION: Final = "Translate the summary into French."
# The tampered copy: one word of one recorded message changed, in the commit event of this epoch.
TAMPERED_EPOCH: Final = 3
TAMPER: Final = ("umbrella", "sunglasses")
QUESTIONS: Final = (
    "What's the weather in Paris?",
    "And in Oslo? Should I pack an umbrella?",
    "Summarize both in one line.",
)
TOOLS: Final = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
FORECASTS: Final = {"Paris": "sunny, 21C", "Oslo": "rain, 9C"}
SYSTEM: Final = "You are a terse travel assistant. Use tools for facts."
# The session this run resumes: af_otel stores it once as the run's base (af.run.base).
EARLIER: Final = [
    {"role": "user", "content": "I'm travelling next week."},
    {"role": "assistant", "content": "Noted. Where to?"},
]


def hourly(city: str) -> str:
    """The tool's answer: a 24-hour table, big enough that its commit goes to the store."""
    summary = FORECASTS.get(city, "unknown")
    rows = [
        f"{hour:02d}:00 {summary}, wind {3 + hour % 5} m/s, humidity {60 + hour % 30}%"
        for hour in range(24)
    ]
    return f"{city}: {summary}\n" + "\n".join(rows)


@dataclass(frozen=True, slots=True)
class DemoCall:
    """One LLM call as the demo exported it."""

    run_id: str
    epoch: int
    parent: int
    state: str
    messages: int
    commits: int
    gaps: tuple[str, ...]
    unrecorded: tuple[str, ...] = ()  # af.receipt.unrecorded: fields the record cannot show
    source: str = ""  # af.receipt.source: wire or instrumentation


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo wrote: the trace file, its tampered copy, the store, and the calls."""

    out: Path
    traces: Path
    store: Path
    run_id: str
    spans: int
    calls: tuple[DemoCall, ...] = field(default=())
    tampered: Path | None = None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a scripted tool-using agent and export its traces and store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default ./{DEFAULT_OUT})"
    )
    parser.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    result = run_demo(Path(args.out))
    print_result(result)
    # The reader checks what was just written, and the tampered copy; then the next commands.
    return demo_readback(result.out)


def _scripted_model(request: Any) -> Any:
    """The fake provider: asks for the weather tool once per city, then answers in text."""
    httpx2 = import_module("httpx2")
    body = json.loads(request.content)
    messages = body["messages"]
    last = messages[-1]
    asked = [m for m in messages if m["role"] == "user"]
    city = next((c for c in FORECASTS if c in str(asked[-1].get("content"))), None)
    if last["role"] == "user" and city is not None:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{len(messages)}",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
                }
            ],
        }
        finish = "tool_calls"
    else:
        seen = [m["content"] for m in messages if m["role"] == "tool"]
        message = {
            "role": "assistant",
            "content": "; ".join(s.partition("\n")[0] for s in seen) or "Nothing to report.",
        }
        finish = "stop"
    return httpx2.Response(
        200,
        json={
            "id": f"chatcmpl-{len(messages)}",
            "object": "chat.completion",
            "created": 1_800_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": 20 * len(messages),
                "completion_tokens": 12,
                "total_tokens": 20 * len(messages) + 12,
            },
        },
    )


def _agent(client: Any, tool: Callable[[str], str]) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, *EARLIER]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        while True:
            reply = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=messages,
                tools=TOOLS,
                parallel_tool_calls=False,
                temperature=0.2,
                seed=7,
            )
            choice = reply.choices[0].message
            messages.append(choice.model_dump(exclude_none=True))
            if not choice.tool_calls:
                break
            for call in choice.tool_calls:
                city = json.loads(call.function.arguments)["city"]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": tool(city)})


def run_demo(out: Path) -> DemoResult:
    """Run the agent once; the trace file is written anew, the store is reused (content-addressed)."""
    # Optional packages (the test extra): imported here so that other subcommands never need them.
    try:
        httpx2 = import_module("httpx2")
        openai = import_module("openai")
        instrumentation = import_module("opentelemetry.instrumentation.genai.openai")
        import_module("opentelemetry.exporter.otlp.json.file")
    except ImportError as exc:
        raise SystemExit(
            f"af-otel demo needs the test extra: pip install 'af-otel[test]' ({exc})"
        ) from exc

    out.mkdir(parents=True, exist_ok=True)
    traces = out / "traces.jsonl"
    store = out / "store"
    traces.unlink(missing_ok=True)
    provider = json_lines_provider(traces, store=store, service_name="af-otel-demo")
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider, completion_hook=completion_hook)
    try:
        client = openai.OpenAI(
            api_key="demo",
            http_client=httpx2.Client(transport=httpx2.MockTransport(_scripted_model)),
        )
        tracer = provider.get_tracer("af_otel.demo")
        base = {
            "messages": [{"role": "system", "content": SYSTEM}, *EARLIER],
            "tools": TOOLS,
            "model": "gpt-4o-mini",
            "provider": "openai",
        }
        with (
            run(RUN_ID, base=_as_request(base)),
            tracer.start_as_current_span("invoke_agent travel-assistant"),
        ):
            _agent(client, hourly)
        # The same client, now instrumented as another service would be: no af_otel hook.
        instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=provider, completion_hook=_NoHook())
        with (
            run(UNHOOKED_RUN_ID),
            tracer.start_as_current_span("invoke_agent translator"),
        ):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": UNHOOKED_QUESTION}]
            )
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    tampered = out / "tampered.jsonl"
    tamper_copy(traces, tampered, store, RUN_ID, TAMPERED_EPOCH, *TAMPER)
    return replace(_summarize(out, traces, store), tampered=tampered)


class _NoHook:
    """A completion hook that records nothing: the instrumentation as set up without af_otel."""

    def on_completion(self, **_: Any) -> None:
        return None


def tamper_copy(
    source: Path, target: Path, store: Path, run_id: str, epoch: int, old: str, new: str
) -> None:
    """Copy ``source`` to ``target`` with ``old`` replaced by ``new`` in what ``run_id``'s call
    ``epoch`` committed: a recorded message edited after the fact. An inline value is edited in
    place; a payload in the store is edited into a new blob and the copy points at it, as someone
    who can write to both the trace and the store would do."""
    blobs = LocalStore(store)
    edited = 0
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        document = json.loads(line)
        for span, attrs in _spans(document):
            if attrs.get(names.RUN_ID) != run_id or attrs.get(names.EPOCH) != epoch:
                continue
            for event in span.get("events", []):
                for item in event.get("attributes", []):
                    text = item["value"].get("stringValue") or ""
                    if item["key"] == names.COMMIT_VALUE and text:
                        changed = _tampered_text(blobs, text, old, new)
                    elif item["key"] == names.COMMIT_REF and text:
                        payload = blobs.get(text).decode("utf-8")
                        changed = _tampered_text(blobs, payload, old, new)
                        if changed is not None:
                            changed = blobs.put(changed.encode("utf-8"))
                    else:
                        continue
                    if changed is not None:
                        item["value"]["stringValue"] = changed
                        edited += 1
        lines.append(json.dumps(document, separators=(",", ":")))
    if not edited:
        raise SystemExit(f"af-otel demo: no commit of {run_id} epoch {epoch} holds {old!r}")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _spans(document: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], Mapping[str, Any]]]:
    """Each span of one OTLP JSON line, as the JSON object itself (to read, or edit in place),
    with its attributes decoded by the reader's rule."""
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                yield span, attributes(span.get("attributes"), "attributes")


def _tampered_text(blobs: LocalStore, text: str, old: str, new: str) -> str | None:
    """``text`` (a commit's payload) with ``old`` replaced by ``new``, or None when it holds no
    ``old``. A payload whose messages are stored one by one (``{"af.ref": ...}``, chunks as
    ``{"af.refs": ...}``) is edited where the message is: the edited message becomes a new blob,
    and the references up to the payload are rewritten to point at it."""
    if old in text:
        return text.replace(old, new)
    try:
        value = json.loads(text)
    except ValueError:
        return None
    changed, edited = _tampered_value(blobs, value, old, new)
    return json.dumps(changed, separators=(",", ":"), ensure_ascii=False) if edited else None


def _tampered_value(blobs: LocalStore, value: Any, old: str, new: str) -> tuple[Any, bool]:
    """``value`` with ``old`` replaced by ``new`` in every string, following store references
    (`_tampered_text`); and whether anything changed."""
    if is_item_ref(value):
        key = ITEM_REF if ITEM_REF in value else CHUNK_REF
        held, edited = _tampered_value(blobs, blobs.get_json(value[key]), old, new)
        return ({key: blobs.put(encode_json(held))} if edited else value), edited
    if isinstance(value, str):
        return value.replace(old, new), old in value
    if isinstance(value, list):
        pairs = [_tampered_value(blobs, item, old, new) for item in value]
        return [item for item, _ in pairs], any(edited for _, edited in pairs)
    if isinstance(value, dict):
        found = {key: _tampered_value(blobs, item, old, new) for key, item in value.items()}
        return {key: item for key, (item, _) in found.items()}, any(
            edited for _, edited in found.values()
        )
    return value, False


def _as_request(base: dict[str, Any]) -> dict[str, Any]:
    """The base in af_otel's request shape (messages with parts), as the instrumentation records it."""
    messages = [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
        for m in base["messages"]
    ]
    return {**base, "messages": messages}


def _summarize(out: Path, traces: Path, store: Path) -> DemoResult:
    """What the file holds, span by span as written (the reader proper is ``af-otel served``)."""
    spans = 0
    calls: list[DemoCall] = []
    for line in traces.read_text(encoding="utf-8").splitlines():
        for span, attrs in _spans(json.loads(line)):
            spans += 1
            if names.RECEIPT_STATE not in attrs:
                continue
            events = [e for e in span.get("events", []) if e.get("name") == names.COMMIT_EVENT]
            calls.append(
                DemoCall(
                    run_id=str(attrs.get(names.RUN_ID, "")),
                    epoch=int(attrs.get(names.EPOCH, 0)),
                    parent=int(attrs.get(names.EPOCH_PARENT, 0)),
                    state=str(attrs[names.RECEIPT_STATE]),
                    messages=int(attrs.get(names.RECEIPT_MESSAGES_COUNT, 0)),
                    commits=len(events),
                    gaps=tuple(attrs.get(names.GAPS) or ()),
                    unrecorded=tuple(attrs.get(names.RECEIPT_UNRECORDED) or ()),
                    source=str(attrs.get(names.RECEIPT_SOURCE, "")),
                )
            )
    order = {RUN_ID: 0, UNHOOKED_RUN_ID: 1}
    calls.sort(key=lambda call: (order.get(call.run_id, 2), call.run_id, call.epoch))
    return DemoResult(out, traces, store, RUN_ID, spans, tuple(calls))


def print_result(result: DemoResult) -> None:
    blobs = [p for p in result.store.rglob("*") if p.is_file()] if result.store.exists() else []
    runs = sorted({call.run_id for call in result.calls})
    print(
        f"af-otel demo: {len(result.calls)} LLM calls in {result.spans} spans, "
        f"runs {', '.join(repr(r) for r in runs)}"
    )
    print(f"  traces   {result.traces}  ({result.traces.stat().st_size:,} bytes, OTLP JSON lines)")
    print(
        f"  store    {result.store}  ({len(blobs)} blobs, {sum(p.stat().st_size for p in blobs):,} bytes)"
    )
    print("  prompts not in the trace: capture is off, so commit payloads went to the store")
    if result.tampered is not None:
        old, new = TAMPER
        print(
            f"  tampered {result.tampered}  (a copy: {old!r} -> {new!r} in the commit of "
            f"{result.run_id} epoch {TAMPERED_EPOCH})"
        )
    print(f"  {'run':<11} epoch  parent  receipt    source           messages  commits  gaps")
    for call in result.calls:
        gaps = ", ".join(call.gaps) or "-"
        print(
            f"  {call.run_id:<11} {call.epoch:>5}  {call.parent:>6}  {call.state:<9}  "
            f"{call.source or '-':<15}  {call.messages:>8}  {call.commits:>7}  {gaps}"
        )
    wired = sum(call.source == names.SOURCE_WIRE for call in result.calls)
    if wired:
        print(
            f"  {wired} receipts minted from the request body the client sent (the wire tap): "
            "they hold the travel agent's parallel_tool_calls=False, which genai-openai does not record"
        )
    unrecorded = order_fields(name for call in result.calls for name in call.unrecorded)
    if unrecorded:
        partial = sum(bool(call.unrecorded) for call in result.calls)
        print(
            f"  {partial} calls read back reconstructed, not verified: their record does not "
            f"show {', '.join(unrecorded)} (unrecorded-field)"
        )
