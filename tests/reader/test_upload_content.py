"""Uploaded content as the call's content: the real openai client against the loopback server that
logs every body (tests/wire/server.py), the real genai-openai instrumentation with content capture
off, af_otel's completion hook loaded by util-genai's own loader, the upload hook chained after it
because its base path is set, and af_otel writing no content anywhere (``content=none``). The
record then holds receipts and sizes only; the uploads are the content, and `verify` holds them
to the receipts: intact they verify, edited they are damage, missing they are the named gap."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import openai
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.completion_hook import load_completion_hook

from af_otel import names
from af_otel.cli import main
from af_otel.cli.pipeline import json_lines_provider
from af_otel.processor import run
from tests.processor.fakes import WEATHER_TOOL
from tests.wire.server import WireServer

SECRET_SYSTEM = "Zebracorn-upload-7731: answer as the travel desk would."
SECRET_USER = "Quokkalith-upload-4420: is it warm in Lima?"


@contextmanager
def openai_on_wire(provider: TracerProvider, hook: Any) -> Iterator[tuple[openai.OpenAI, Any]]:
    """The real genai-openai instrumentation with ``hook``, and a client of the loopback server."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    with WireServer() as server:
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider, completion_hook=hook)
        base = f"http://127.0.0.1:{server.port}/v1"
        client = openai.OpenAI(api_key="test", base_url=base, max_retries=0)
        try:
            yield client, server
        finally:
            client.close()
            instrumentor.uninstrument()


def chat_agent(client: openai.OpenAI, tools: bool, turns: int = 3) -> None:
    """A conversation of ``turns`` questions; with ``tools`` the model asks for the weather tool
    and gets its result before each answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SECRET_SYSTEM}]
    extra: dict[str, Any] = {"tools": [WEATHER_TOOL]} if tools else {}
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{SECRET_USER} ({turn})"})
        while True:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, temperature=0.2, seed=7, **extra
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})


@dataclass(frozen=True)
class Recorded:
    traces: Path
    store: Path
    uploads: str  # the --upload-base URL
    bodies: list[dict[str, Any]]  # what the server received, in arrival order

    def ref_of(self, epoch: int, key: str = "gen_ai.input.messages_ref") -> str:
        """The file name the upload hook stamped on the span of ``epoch``."""
        for line in self.traces.read_text(encoding="utf-8").splitlines():
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
                        if attrs.get(names.EPOCH, {}).get("intValue") in (epoch, str(epoch)):
                            return str(attrs[key]["stringValue"]).rsplit("/", 1)[-1]
        raise AssertionError(f"no span of epoch {epoch}")


def record(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tools: bool,
    base: str,
    agent_done: Callable[[], None] = lambda: None,
    *,
    content: str = "none",
    capture: str | None = None,
    wire: bool = False,
) -> Recorded:
    """The agent recorded as the module docstring says, uploading under ``base``;
    ``agent_done`` is called once the agent ends, before the uploads are flushed. ``content``
    is af_otel's content setting, ``capture`` the instrumentation's (None: off)."""
    if capture is None:
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    else:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
    monkeypatch.delenv("AF_OTEL_CHAIN_HOOK", raising=False)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "af_otel")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", base)
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    provider = json_lines_provider(
        traces, store=store, service_name="up", wire=wire, content=content
    )
    hook = load_completion_hook()  # util-genai's loader: af_otel's entry point, wrapped
    try:
        with openai_on_wire(provider, hook) as (client, server), run("uploaded"):
            chat_agent(client, tools)
        agent_done()
    finally:
        hook._wrapped.shutdown()  # util-genai's safe wrapper around af_otel's: uploads flushed
        provider.shutdown()
    return Recorded(traces, store, base, [r.body for r in server.requests])


@pytest.fixture(params=[False, True], ids=["chat", "tools"])
def recorded(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Recorded:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    return record(tmp_path, monkeypatch, request.param, uploads.as_uri())


def verdicts(
    capsys: pytest.CaptureFixture[str], rec: Recorded, *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    code = main(["verify", str(rec.traces), "--store", str(rec.store), "--json", *extra])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return code, [line for line in lines if line.get("type") != "summary"]


def served(
    capsys: pytest.CaptureFixture[str], rec: Recorded, uploads: bool = True
) -> list[dict[str, Any]]:
    extra = ["--upload-base", rec.uploads] if uploads else []
    main(["served", str(rec.traces), "--store", str(rec.store), "--json", *extra])
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def _texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each message's role and text, wherever its shape keeps it (view parts or wire body)."""
    out = []
    for message in messages:
        parts = message.get("parts")
        if parts is None:
            text = message.get("content") or ""
        else:
            text = "".join(
                str(p.get("content") if p.get("type") == "text" else p.get("response") or "")
                for p in parts
                if p.get("type") in ("text", "tool_call_response")
            )
        out.append((str(message["role"]), str(text)))
    return out


def test_the_uploads_are_the_content_and_verify(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --upload-base the record holds no content (every call reconstructed, named);
    with it each call's uploads are its request, the receipt proves them: a plain chat verifies,
    the tool agent is short of verified only by the fields genai-openai does not record. Every
    view's messages are the body the server received, and its output is the uploaded answer."""
    tools = "tools" in recorded.bodies[0]
    code, plain = verdicts(capsys, recorded)
    assert code == 0
    assert len(plain) == len(recorded.bodies) >= 3
    assert all(names.GAP_NO_CONVERSATION in v["gaps"] for v in plain)
    # Dials not on record are not "not set": the request set temperature and seed.
    for view in served(capsys, recorded, uploads=False):
        assert view["params"] is None
        said = " ".join(
            g["detail"] for g in view["gaps"] if g["kind"] == names.GAP_PROVIDER_DEFAULTS
        )
        assert "temperature" not in said
        assert "seed" not in said
    code, checked = verdicts(capsys, recorded, "--upload-base", recorded.uploads)
    assert code == 0
    for verdict in checked:
        assert names.GAP_NO_CONVERSATION not in verdict["gaps"]
        assert names.GAP_UPLOAD_REF not in verdict["gaps"]
        if tools:
            assert verdict["status"] == "reconstructed"
            assert verdict["reason"].startswith("every receipt field recomputes")
            assert names.GAP_UNRECORDED in verdict["gaps"]
        else:
            assert verdict["status"] == "verified", verdict
    views = served(capsys, recorded)
    assert len(views) == len(recorded.bodies)
    for view, body in zip(views, recorded.bodies, strict=True):
        assert "messages" in view["from_uploads"]
        assert _texts(view["messages"]) == _texts(body["messages"])
        assert view["params"] == {"seed": 7, "temperature": 0.2}
        assert [m["role"] for m in view["output"]] == ["assistant"]


def test_an_edited_upload_is_damage(
    recorded: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Bytes of an upload that are not what the receipt proves make that call damaged (exit 1),
    never a gap; the other calls stand."""
    last = len(recorded.bodies)
    target = tmp_path / "uploads" / recorded.ref_of(last)
    messages = json.loads(target.read_text(encoding="utf-8"))
    messages[1]["parts"][0]["content"] = "Is it cold in Oslo?"
    target.write_text(json.dumps(messages) + "\n", encoding="utf-8")
    code, checked = verdicts(capsys, recorded, "--upload-base", recorded.uploads)
    assert code == 1
    damaged = [v for v in checked if v["status"] == "damaged"]
    assert [v["epoch"] for v in damaged] == [last]
    assert damaged[0]["field"].startswith("messages")
    assert names.GAP_UPLOAD_REF not in damaged[0]["gaps"]


def test_an_edited_upload_damages_the_calls_whose_check_rests_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edit to a middle call's upload damages that call, and the next, whose receipt counts
    the messages it kept from that (now altered) rebuild, as a damaged stored blob does; the
    call before stands."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, False, uploads.as_uri())
    target = uploads / rec.ref_of(2)
    messages = json.loads(target.read_text(encoding="utf-8"))
    messages[1]["parts"][0]["content"] = "Is it cold in Oslo?"
    target.write_text(json.dumps(messages) + "\n", encoding="utf-8")
    code, checked = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert code == 1
    assert [(v["epoch"], v["status"]) for v in checked] == [
        (1, "verified"),
        (2, "damaged"),
        (3, "damaged"),
    ]
    assert {v["field"] for v in checked[1:]} == {"messages.kept"}


def test_a_deleted_upload_is_the_gap(
    recorded: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ref whose file is gone names the gap on its call, which fills nothing and reads as the
    record alone does (reconstructed, never damaged). The calls before it keep their uploads'
    verdicts; the calls that grew from it keep their messages unknown too, as their receipts
    count the messages they kept from it, which are no longer on record."""
    _, whole = verdicts(capsys, recorded, "--upload-base", recorded.uploads)
    (tmp_path / "uploads" / recorded.ref_of(2)).unlink()
    code, checked = verdicts(capsys, recorded, "--upload-base", recorded.uploads)
    assert code == 0
    for before, after in zip(whole, checked, strict=True):
        if after["epoch"] < 2:
            assert after == before
            continue
        assert after["status"] == "reconstructed"
        assert names.GAP_NO_CONVERSATION in after["gaps"]
        assert (names.GAP_UPLOAD_REF in after["gaps"]) == (after["epoch"] == 2)
    views = served(capsys, recorded)
    second = next(v for v in views if v["epoch"] == 2)
    assert second["messages"] is None
    assert "from_uploads" not in second
    assert "gen_ai.input.messages_ref" in next(
        g["detail"] for g in second["gaps"] if g["kind"] == names.GAP_UPLOAD_REF
    )


def test_a_deleted_output_is_the_gap_and_the_request_still_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output ref is read like the input refs: missing, it is the gap on its call; no
    receipt covers an output, so the request's verdict stands."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, False, uploads.as_uri())
    (uploads / rec.ref_of(1, "gen_ai.output.messages_ref")).unlink()
    code, checked = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert code == 0
    first = next(v for v in checked if v["epoch"] == 1)
    assert first["status"] == "verified"
    assert names.GAP_UPLOAD_REF in first["gaps"]
    assert all(names.GAP_UPLOAD_REF not in v["gaps"] for v in checked if v["epoch"] != 1)
    views = served(capsys, rec)
    assert next(v for v in views if v["epoch"] == 1).get("output") is None
    assert all(v["output"] for v in views if v["epoch"] != 1)


class GatedMemory(MemoryFileSystem):
    """fsspec's memory filesystem whose writes of uploads wait for a gate, as a slow remote store
    would: the upload hook's one-slot queue stays full while the first upload waits."""

    protocol = ("afgated",)
    gate = threading.Event()

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        return super()._strip_protocol(str(path).removeprefix("afgated://"))

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and "one_off_test" not in path:
            self.gate.wait(timeout=60)
        return super()._open(path, mode, *args, **kwargs)


def test_an_upload_the_full_queue_dropped_is_a_gap_never_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upload hook stamps its refs even when its full queue dropped the upload: each such
    call gets the gap, none is damaged, and the upload that was written is read through fsspec's
    memory protocol (the same files, under another base)."""
    fsspec.register_implementation("afgated", GatedMemory, clobber=True)
    folder = f"af-otel-uploads-{uuid.uuid4().hex}"
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_MAX_QUEUE_SIZE", "1")
    GatedMemory.gate.clear()
    memory = fsspec.filesystem("memory")
    memory.mkdir(f"/{folder}")
    try:
        rec = record(tmp_path, monkeypatch, True, f"afgated://{folder}", GatedMemory.gate.set)
        written = memory.ls(f"/{folder}", detail=False)
        assert len(written) == 1  # the first call's input messages; the rest were dropped
        code, checked = verdicts(capsys, rec, "--upload-base", f"memory://{folder}")
        assert code == 0
        assert len(checked) == len(rec.bodies)
        assert not [v for v in checked if v["status"] == "damaged"]
        assert all(names.GAP_UPLOAD_REF in v["gaps"] for v in checked)
    finally:
        GatedMemory.gate.set()
        memory.rm(f"/{folder}", recursive=True)


def test_an_output_that_is_not_the_spans_is_the_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With capture on the span holds the output too: an upload that is not it is the gap on its
    call, the verdicts stand; intact uploads equal the span's output and add nothing."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, False, uploads.as_uri(), capture="SPAN_ONLY")
    _, whole = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert all(names.GAP_UPLOAD_REF not in v["gaps"] for v in whole)
    target = uploads / rec.ref_of(2, "gen_ai.output.messages_ref")
    output = json.loads(target.read_text(encoding="utf-8"))
    output[0]["parts"][0]["content"] = "It is freezing."
    target.write_text(json.dumps(output) + "\n", encoding="utf-8")
    code, checked = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert code == 0
    assert [v["status"] for v in checked] == [v["status"] for v in whole]
    assert [v["epoch"] for v in checked if names.GAP_UPLOAD_REF in v["gaps"]] == [2]


@pytest.mark.parametrize("content", ["auto", "none"])
def test_with_capture_off_nothing_uploaded_lands_on_the_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    """Never more exposed than the instrumentation: with capture off and both hooks, the trace
    holds refs, receipts and sizes, and no word of the prompt, which only the uploads (and, under
    ``content=auto``, af_otel's store) hold."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, True, uploads.as_uri(), content=content)
    trace = rec.traces.read_text(encoding="utf-8")
    assert "gen_ai.input.messages_ref" in trace
    assert names.RECEIPT_DIGEST in trace
    uploaded = "".join(p.read_text(encoding="utf-8") for p in uploads.iterdir())
    for secret in (SECRET_SYSTEM, SECRET_USER, "sunny", "Weather for a city"):
        assert secret in uploaded  # the test can see the text where it is
        assert secret not in trace, secret
    assert rec.store.exists() == (content == "auto")


def test_a_call_minted_from_the_wire_is_not_filled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A receipt minted from the body the client sent is not the instrumentation's copy, which
    may differ from it with nothing altered (a tool's ``strict`` flag genai-openai does not
    record): such calls are not filled from the uploads, and read as without them."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, True, uploads.as_uri(), wire=True)
    code, plain = verdicts(capsys, rec)
    code_up, checked = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert code == code_up == 0
    assert {v["source"] for v in checked} == {"wire"}
    assert checked == plain
    assert all("from_uploads" not in v for v in served(capsys, rec))


def test_the_report_and_serve_show_the_uploads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --upload-base` and `serve`'s evidence (``upload_base``) read the uploads as
    `verify` does: the epochs verify, say which parts came from the files and show the output."""
    from af_otel.web.evidence import Evidence

    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, False, uploads.as_uri())
    page = tmp_path / "report.html"
    args = [str(rec.traces), "--store", str(rec.store), "--upload-base", rec.uploads]
    assert main(["report", *args, "-o", str(page)]) == 0
    capsys.readouterr()
    html = page.read_text(encoding="utf-8")
    assert html.count("Read from the upload hook") == len(rec.bodies)
    assert "it is mild." in html  # the loopback server's answer, in the uploaded output
    shown = Evidence(file=rec.traces, store=str(rec.store), upload_base=rec.uploads).epoch(
        "uploaded", 2
    )
    assert shown.verdict is not None
    assert shown.verdict.status == "verified"
    assert shown.view.output is not None
    assert "messages" in shown.view.from_uploads


def test_jsonl_uploads_verify_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upload hook's jsonl format (one element a line, with its index) reads the same."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT", "jsonl")
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    rec = record(tmp_path, monkeypatch, False, uploads.as_uri())
    assert all(p.suffix == ".jsonl" for p in uploads.iterdir())
    code, checked = verdicts(capsys, rec, "--upload-base", rec.uploads)
    assert code == 0
    assert [v["status"] for v in checked] == ["verified"] * len(rec.bodies)
