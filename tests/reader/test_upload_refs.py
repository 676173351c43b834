"""util-genai's real upload hook, chained after af_otel's, writing to a local fsspec directory: the
reader reads its refs under ``--upload-base`` and holds them to the call's record; a ref whose file
is missing, or whose content is not the request on record, is `upload-ref-unresolved`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.cli import main
from af_otel.cli.pipeline import json_lines_provider
from af_otel.processor import ReceiptCompletionHook, run
from af_otel.reader.sources.uploads import UnreadableUpload, read_upload
from af_otel.store import LocalStore
from tests.processor.fakes import instrumented_openai, weather_agent


@pytest.fixture(params=[False, True], ids=["record", "wire"])
def uploaded(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, Path]:
    """traces.jsonl, its store and the upload directory of a 2-turn tool agent whose calls the
    af_otel hook minted (capture off) and the upload hook then uploaded; with the wire tap off
    (the view is the hook's record) and on (the view is the body the client sent)."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", uploads.as_uri())
    monkeypatch.setenv("AF_OTEL_CHAIN_HOOK", "upload")
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    if request.param:
        (tmp_path / "wire").touch()  # tells the tests which view they read
    provider = json_lines_provider(
        traces, store=LocalStore(store), service_name="up", wire=request.param
    )
    hook = ReceiptCompletionHook()
    try:
        with instrumented_openai(provider, completion_hook=hook) as client, run("uploaded"):
            weather_agent(client, turns=2)
    finally:
        chained = hook._chained()
        assert chained is not None
        chained.shutdown()  # every upload written
        provider.shutdown()
    return traces, store, uploads


def verdicts(
    capsys: pytest.CaptureFixture[str], traces: Path, store: Path, *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    code = main(["verify", str(traces), "--store", str(store), "--json", *extra])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return code, [line for line in lines if line.get("type") != "summary"]


def test_refs_that_resolve_to_the_record_add_nothing(
    uploaded: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each call's uploaded messages, system and tools are its request on record: the verdicts
    are those of a read without --upload-base, and no call carries the gap."""
    traces, store, uploads = uploaded
    assert len(list(uploads.glob("*_inputs.json"))) == 4
    code, plain = verdicts(capsys, traces, store)
    code_up, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert code == code_up == 0
    assert len(checked) == 4
    assert [v["status"] for v in checked] == [v["status"] for v in plain]
    assert [v["gaps"] for v in checked] == [v["gaps"] for v in plain]
    assert all(names.GAP_UPLOAD_REF not in v["gaps"] for v in checked)
    # Where the view came from: the hook's record, or the body the wire tap saw.
    wire = (uploads.parent / "wire").exists()
    assert {v["source"] for v in checked} == {"wire" if wire else "instrumentation"}


def test_a_dropped_upload_is_named(
    uploaded: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A ref whose file is not under the base (an upload the full queue dropped) puts the gap on
    that call alone; the verdict stays what the record proves."""
    traces, store, uploads = uploaded
    dropped = sorted(uploads.glob("*_inputs.json"))[0]
    dropped.unlink()
    _, plain = verdicts(capsys, traces, store)
    code, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert code == 0
    flagged = [v for v in checked if names.GAP_UPLOAD_REF in v["gaps"]]
    assert len(flagged) == 1
    assert [v["status"] for v in checked] == [v["status"] for v in plain]


def test_an_upload_that_is_not_the_request_is_named(
    uploaded: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An uploaded copy whose text differs from the request on record is named, for that call."""
    traces, store, uploads = uploaded
    target = sorted(uploads.glob("*_inputs.json"))[-1]
    messages = json.loads(target.read_text(encoding="utf-8"))
    messages[-1]["parts"] = [{"type": "text", "content": "something else"}]
    target.write_text(json.dumps(messages) + "\n", encoding="utf-8")
    _, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert [names.GAP_UPLOAD_REF in v["gaps"] for v in checked].count(True) == 1


def test_an_upload_that_is_not_json_is_named_not_fatal(
    uploaded: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A data problem of one call's upload is that call's gap; the read goes on (exit 0)."""
    traces, store, uploads = uploaded
    sorted(uploads.glob("*_inputs.json"))[1].write_text("{cut sho", encoding="utf-8")
    code, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert code == 0
    assert [names.GAP_UPLOAD_REF in v["gaps"] for v in checked].count(True) == 1


def test_refs_are_read_under_the_base_only(tmp_path: Path) -> None:
    """Only the ref's file name is read, under the base: a ref pointing elsewhere cannot make the
    reader open another file; jsonl uploads read in index order; a file that is not the hook's
    JSON raises naming it (the caller names it on its call)."""
    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "secret_inputs.json").write_text('[{"role": "user"}]\n', encoding="utf-8")
    assert read_upload(base.as_uri(), (tmp_path / "secret_inputs.json").as_uri()) is None
    lines = ['{"role": "b", "index": 1}', '{"role": "a", "index": 0}']
    (base / "x_inputs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_upload(base.as_uri(), "s3://elsewhere/x_inputs.jsonl") == [
        {"role": "a"},
        {"role": "b"},
    ]
    (base / "bad_inputs.json").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(UnreadableUpload, match=r"bad_inputs\.json"):
        read_upload(base.as_uri(), "memory://bad_inputs.json")


def test_the_upload_hook_alone_its_dropped_upload_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upload hook as the instrumentation's only hook, under the processor, content capture
    off: no call has a receipt of its content, so the uploads are shown as its content (the
    record lacks it) with nothing to check them against, the verdicts stay what they were, and a
    missing upload is still named on its call."""
    from opentelemetry.util.genai._upload.completion_hook import UploadCompletionHook

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    provider = json_lines_provider(traces, store=LocalStore(store), service_name="up", wire=False)
    hook = UploadCompletionHook(base_path=uploads.as_uri())
    try:
        with instrumented_openai(provider, completion_hook=hook) as client, run("upload-only"):
            weather_agent(client, turns=1)
    finally:
        hook.shutdown()
        provider.shutdown()
    _, plain = verdicts(capsys, traces, store)
    _, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert len(checked) == len(plain) == 2
    for before, after in zip(plain, checked, strict=True):
        assert before["status"] == after["status"] == "reconstructed"
        assert after["reason"] == before["reason"]
        assert names.GAP_NO_CONVERSATION in before["gaps"]
        assert set(after["gaps"]) == set(before["gaps"]) - {names.GAP_NO_CONVERSATION}
    main(
        ["served", str(traces), "--store", str(store), "--json", "--upload-base", uploads.as_uri()]
    )
    views = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [len(v["messages"]) for v in views] == [2, 4]
    assert all(v["from_uploads"] == ["system", "messages", "tools"] for v in views)
    sorted(uploads.glob("*_inputs.json"))[0].unlink()
    _, checked = verdicts(capsys, traces, store, "--upload-base", uploads.as_uri())
    assert [names.GAP_UPLOAD_REF in v["gaps"] for v in checked].count(True) == 1


@pytest.mark.parametrize("base", ["nosuchprotocol://x", "file:///nonexistent/af-otel-uploads"])
def test_a_base_that_cannot_be_read_stops_the_read(
    uploaded: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], base: str
) -> None:
    """An --upload-base that names nothing readable exits 2 naming it, instead of naming every
    upload missing."""
    traces, store, _ = uploaded
    code = main(["verify", str(traces), "--store", str(store), "--upload-base", base])
    assert code == 2
    assert base in capsys.readouterr().err


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_ITEMS = st.lists(
    st.dictionaries(st.text(max_size=6).filter(lambda k: k != "index"), _JSON, max_size=4),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(items=_ITEMS, jsonl=st.booleans(), order=st.randoms(use_true_random=False))
def test_an_upload_reads_back_in_either_format(
    items: list[dict[str, Any]], jsonl: bool, order: Any
) -> None:
    """Whatever the parts, a file in the hook's json format (one array) or jsonl (one element a
    line with its index, in any order) reads back as the list the hook was given."""
    import fsspec

    name = f"{uuid.uuid4().hex}_inputs.{'jsonl' if jsonl else 'json'}"
    if jsonl:
        lines = [json.dumps({**item, "index": i}) for i, item in enumerate(items)]
        order.shuffle(lines)
    else:
        lines = [json.dumps(items)]
    memory = fsspec.filesystem("memory")
    path = f"/af-otel-upload-props/{name}"
    memory.pipe(path, ("\n".join(lines) + "\n").encode("utf-8"))
    try:
        found = read_upload("memory://af-otel-upload-props", f"s3://anywhere/{name}")
    finally:
        memory.rm(path)
    if jsonl and not items:
        assert found in (None, [])  # an empty jsonl file holds no line at all
    else:
        assert found == items
