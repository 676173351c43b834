"""``af-otel demo`` end to end: the files it writes hold what it reports, read back through the
reader: receipts minted from the wire and a stored base, every call verified (the one made without
af_otel's hook too), a tampered copy that verifies as damaged at the edited epoch and message, and next commands that
run as printed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from af_otel import names, read_spans, served_views, verify
from af_otel.cli import EXIT_PIPE, main
from af_otel.cli.demo import RUN_ID, TAMPER, TAMPERED_EPOCH, UNHOOKED_RUN_ID, tamper_copy
from af_otel.reader import ServedView, VerdictStatus
from af_otel.store import LocalStore
from af_otel.store.base import encode_json
from af_otel.store.items import CHUNK_REF, ITEM_REF, load_items
from tests.reader.recordings import one_character_changed


@dataclass(frozen=True)
class Demo:
    out: Path
    code: int
    printed: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One run of ``af-otel demo --out DIR``, content capture off as by default."""
    out = tmp_path_factory.mktemp("demo") / "af-otel-demo"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        patch.delenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", raising=False)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["demo", "--out", str(out)])
    return Demo(out, code, printed.getvalue())


def views_of(path: Path, store: Path) -> dict[tuple[str | None, int], ServedView]:
    return {(v.run_id, v.epoch): v for v in served_views(read_spans(path), store=store)}


def test_demo_writes_traces_and_store(demo: Demo) -> None:
    """The demo exports OTLP JSON lines with receipts minted from the wire and a stored base, no
    prompt text on any span (no commit payload inline either), and exits 0."""
    assert demo.code == 0
    assert "6 LLM calls" in demo.printed
    spans = [
        span
        for line in (demo.out / "traces.jsonl").read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    calls = []
    for span in spans:
        attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
        assert "gen_ai.input.messages" not in attrs
        for event in span.get("events", []):
            assert names.COMMIT_VALUE not in {a["key"] for a in event.get("attributes", [])}
        if names.RECEIPT_STATE in attrs:
            calls.append(attrs)
    states = {
        (c[names.RUN_ID]["stringValue"], c[names.RECEIPT_STATE]["stringValue"]) for c in calls
    }
    assert states == {(RUN_ID, "minted"), (UNHOOKED_RUN_ID, "minted")}
    assert {c[names.RECEIPT_SOURCE]["stringValue"] for c in calls} == {names.SOURCE_WIRE}
    base = calls[0][names.RUN_BASE]["stringValue"]
    stored = LocalStore(demo.out / "store").get_json(base)
    assert isinstance(stored, dict)
    assert len(stored["messages"]) == 3


def test_every_call_reads_back_verified_from_the_wire(demo: Demo) -> None:
    """Read back, every call is verified: the receipts were minted from the bodies the client
    sent, so nothing is unrecorded and the agent's parallel_tool_calls=False (which genai-openai
    does not record) is in the served view; the call made without af_otel's hook verifies too.
    The demo prints each verdict and says where the receipts came from."""
    views = views_of(demo.out / "traces.jsonl", demo.out / "store")
    assert len(views) == 6
    for (run_id, epoch), view in views.items():
        assert verify(view).status is VerdictStatus.VERIFIED, (run_id, epoch, verify(view).reason)
        assert view.unrecorded == ()
        assert names.GAP_CACHE_TRANSFORM not in view.gap_kinds
        assert f"{run_id} epoch {epoch}: verified" in demo.printed
    hooked = [v for key, v in views.items() if key[0] == RUN_ID]
    assert len(hooked) == 5
    assert all(v.params is not None and v.params["parallel_tool_calls"] is False for v in hooked)
    assert "6 receipts minted from the request body the client sent (the wire tap)" in demo.printed


def test_the_tampered_copy_is_damaged_where_it_was_edited(demo: Demo) -> None:
    """In the tampered copy, epochs before the edit verify; the edited epoch is damaged at
    ``messages.added`` and at the message holding the edited word; later epochs, which carry
    that message, are damaged too. The demo prints the damaged line."""
    store = demo.out / "store"
    original = views_of(demo.out / "traces.jsonl", store)
    tampered = views_of(demo.out / "tampered.jsonl", store)
    old, new = TAMPER
    edited = tampered[(RUN_ID, TAMPERED_EPOCH)]
    assert edited.messages is not None
    where = [i for i, m in enumerate(edited.messages) if new in json.dumps(m, default=list)]
    assert len(where) == 1
    before = original[(RUN_ID, TAMPERED_EPOCH)].messages
    assert before is not None
    assert old in json.dumps(before[where[0]], default=list)
    for (run_id, epoch), view in tampered.items():
        verdict = verify(view)
        if run_id != RUN_ID or epoch < TAMPERED_EPOCH:
            assert verdict.status is VerdictStatus.VERIFIED
        else:
            assert verdict.status is VerdictStatus.DAMAGED
            assert verdict.message_index == where[0]
            if epoch == TAMPERED_EPOCH:
                assert verdict.field == "messages.added"
    line = next(
        x for x in demo.printed.splitlines() if f"{RUN_ID} epoch {TAMPERED_EPOCH}: damaged" in x
    )
    assert f"messages.added differs at message {where[0]}" in line


def test_tampering_follows_stored_message_references(tmp_path: Path) -> None:
    """A commit whose payload names its messages by store reference (a message, and a chunk of
    messages) is tampered where the word is: new blobs, references rewritten up to the copy's
    commit, the original blobs and file untouched."""
    store = LocalStore(tmp_path / "store")
    old, new = TAMPER
    said = [{"role": "user", "parts": [{"type": "text", "content": f"turn {i}"}]} for i in range(2)]
    word = {"role": "user", "parts": [{"type": "text", "content": f"an {old}?"}]}
    chunk = store.put(encode_json([{ITEM_REF: store.put(encode_json(m))} for m in said]))
    payload = [{CHUNK_REF: chunk}, {ITEM_REF: store.put(encode_json(word))}]
    inline = [{"role": "user", "parts": [{"type": "text", "content": "nothing here"}]}]
    payload_in_chunk = [
        {CHUNK_REF: store.put(encode_json([{ITEM_REF: store.put(encode_json(word))}]))}
    ]

    def commit(key: str, value: str) -> dict[str, Any]:
        return {
            "name": names.COMMIT_EVENT,
            "attributes": [{"key": key, "value": {"stringValue": value}}],
        }

    def span(epoch: int, *events: dict[str, Any]) -> dict[str, Any]:
        attributes = [
            {"key": names.RUN_ID, "value": {"stringValue": RUN_ID}},
            {"key": names.EPOCH, "value": {"intValue": str(epoch)}},
        ]
        return {"name": "chat", "attributes": attributes, "events": list(events)}

    spans = [
        span(1, commit(names.COMMIT_VALUE, json.dumps(inline))),
        span(2, commit(names.COMMIT_REF, store.put(encode_json(payload)))),
        span(3, commit(names.COMMIT_VALUE, json.dumps(payload_in_chunk))),
    ]
    source, target = tmp_path / "traces.jsonl", tmp_path / "tampered.jsonl"
    document = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    source.write_text(json.dumps(document) + "\n", encoding="utf-8")
    before = source.read_bytes()
    held = sorted(p.name for p in (tmp_path / "store").rglob("*") if p.is_file())
    with pytest.raises(SystemExit, match="epoch 1"):
        tamper_copy(source, target, tmp_path / "store", RUN_ID, 1, old, new)
    for epoch in (2, 3):
        tamper_copy(source, target, tmp_path / "store", RUN_ID, epoch, old, new)
        copied = json.loads(target.read_text(encoding="utf-8"))
        event = copied["resourceSpans"][0]["scopeSpans"][0]["spans"][epoch - 1]["events"][0]
        text = event["attributes"][0]["value"]["stringValue"]
        value = store.get_json(text) if epoch == 2 else json.loads(text)
        assert isinstance(value, list)
        messages = load_items(store, value)
        assert messages[-1] == json.loads(json.dumps(word).replace(old, new))
        if epoch == 2:
            assert messages[:2] == said
            assert value[0] == {CHUNK_REF: chunk}  # the untouched chunk is shared, not copied
    assert source.read_bytes() == before
    still = sorted(p.name for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert set(held) <= set(still)  # write-once: the originals stay


def test_the_next_commands_run_as_printed(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo ends with the commands to try, each naming the demo's store; each runs: verify
    exits 0 on the trace and 1 on the tampered copy, the others 0."""
    printed = demo.printed.splitlines()
    start = printed.index("next, try:")
    commands = [line.strip() for line in printed[start + 1 :]]
    assert commands
    assert all(c.startswith("af-otel ") for c in commands)
    assert {shlex.split(c)[1] for c in commands} == {"verify", "served", "gaps", "report"}
    served = next(shlex.split(c) for c in commands if shlex.split(c)[1] == "served")
    assert served[-4:] == ["--run", RUN_ID, "--epoch", str(TAMPERED_EPOCH)]
    for command in commands:
        argv = shlex.split(command)[1:]
        assert argv[argv.index("--store") + 1] == str(demo.out / "store")
        code = main(argv)
        out, err = capsys.readouterr()
        expected = 1 if argv[0] == "verify" and "tampered" in argv[1] else 0
        assert code == expected, (command, out, err)


def test_a_closed_pipe_ends_the_demo_quietly(tmp_path: Path) -> None:
    """``af-otel demo | head -1``: the reader goes away; the demo exits 141, no traceback."""
    command = Path(sys.executable).with_name("af-otel")
    err, code = closed_pipe_run([str(command), "demo", "--out", str(tmp_path / "demo")])
    assert code == EXIT_PIPE
    assert err == ""


def closed_pipe_run(argv: list[str]) -> tuple[str, int]:
    """Run ``argv`` with its stdout a pipe closed before anything is written: every write meets
    a reader gone away. Returns stderr and the exit status."""
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": ""},
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        err = process.stderr.read().decode()
        return err, process.wait(timeout=120)


def _blobs_read(store: LocalStore, path: Path) -> list[str]:
    """Every blob the verdicts of ``path`` read: the bases and payloads its spans name, and the
    chunks and messages their stored lists name, each once."""
    found: dict[str, None] = {}

    def walk(value: Any) -> None:
        items = value.get("messages") if isinstance(value, dict) else value
        for item in items if isinstance(items, list) else []:
            ref = item.get(ITEM_REF, item.get(CHUNK_REF)) if isinstance(item, dict) else None
            if isinstance(ref, str) and ref not in found:
                found[ref] = None
                walk(store.get_json(ref))

    for span in read_spans(path):
        refs = [span.attributes.get(names.RUN_BASE)]
        refs += [e.attributes.get(names.COMMIT_REF) for e in span.events]
        for ref in refs:
            if isinstance(ref, str) and ref not in found:
                found[ref] = None
                walk(store.get_json(ref))
    return list(found)


def test_one_character_changed_in_any_blob_the_demo_reads_fails_verify(
    demo: Demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """For every blob the demo's verdicts read (its base, the chunk and messages behind it, each
    commit payload), a copy of the store with one character of that blob changed makes
    `af-otel verify` exit 1 naming the blob; the untouched copy exits 0."""
    traces, store = demo.out / "traces.jsonl", demo.out / "store"
    blobs = _blobs_read(LocalStore(store), traces)
    assert len(blobs) >= 10
    shutil.copytree(store, tmp_path / "untouched")
    assert main(["verify", str(traces), "--store", str(tmp_path / "untouched")]) == 0
    capsys.readouterr()
    codes: dict[str, int] = {}
    for address in blobs:
        copy = tmp_path / address[7:23]
        shutil.copytree(store, copy)
        digits = address.removeprefix("sha256:")
        blob = copy / "sha256" / digits[:2] / digits[2:]
        blob.chmod(0o644)
        blob.write_bytes(one_character_changed(blob.read_bytes()))
        codes[address] = main(["verify", str(traces), "--store", str(copy)])
        out, err = capsys.readouterr()
        assert address in out, (address, out, err)
        assert "damaged" in out
        shutil.rmtree(copy)
    assert codes == dict.fromkeys(blobs, 1)
