"""One configuration surface: argument > environment > default for every option, in every form;
bad arguments raise naming the argument, bad environment values warn once and fall back; strict
mode only on request; the store says where it is; trusted gateways lift cache-transform."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor, completion_hook
from af_otel.processor import settings as settings_module
from af_otel.processor.settings import Settings, resolve_settings
from af_otel.store import LocalStore, Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.fakes import _openai_reply, instrumented_openai
from tests.processor.helpers import af, chat, llm_spans, user

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "processor.md"
VARIABLES = (
    "AF_OTEL_CONTENT",
    "AF_OTEL_STORE",
    "AF_OTEL_STRIP_CONTENT",
    "AF_OTEL_INLINE_LIMIT",
    "AF_OTEL_TRUSTED_HOSTS",
    "AF_OTEL_KEY",
    "AF_OTEL_KEY_FILE",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in VARIABLES:
        if variable != "AF_OTEL_STORE":
            monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.setattr(settings_module, "_noted", set())


def test_defaults(tmp_path: Path) -> None:
    """With nothing set: auto content, no stripping, 1 KiB inline, plain receipts, no gateway."""
    made = resolve_settings(store=tmp_path)
    assert (made.content, made.strip_instrumentation_content, made.inline_limit) == (
        "auto",
        False,
        names.DEFAULT_INLINE_LIMIT,
    )
    assert (made.key, made.trusted_hosts) == (None, frozenset())


ENVIRONMENT = {
    "AF_OTEL_CONTENT": ("store", "content", "store"),
    "AF_OTEL_STRIP_CONTENT": ("true", "strip_instrumentation_content", True),
    "AF_OTEL_INLINE_LIMIT": ("77", "inline_limit", 77),
    "AF_OTEL_TRUSTED_HOSTS": (" GW.example.com, proxy.local ", "trusted_hosts", None),
    "AF_OTEL_KEY": ("sesame", "key", b"sesame"),
    "AF_OTEL_TRUSTED_SCOPE": (" openinference.instrumentation.langchain ", "trusted_scope", None),
}
ARGUMENTS: dict[str, Any] = {
    "content": "none",
    "strip_instrumentation_content": False,
    "inline_limit": 5,
    "trusted_hosts": ["other.example"],
    "key": b"argument-key",
    "trusted_scope": "opentelemetry.instrumentation.openai_v2",
}


@pytest.mark.parametrize("variable", sorted(ENVIRONMENT))
@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_environment_over_default_and_argument_over_environment(
    variable: str, form: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each variable configures both forms; the matching argument overrides it."""
    raw, option, want = ENVIRONMENT[variable]
    if want is None:
        want = (
            frozenset({"gw.example.com", "proxy.local"})
            if option == "trusted_hosts"
            else raw.strip()
        )
    monkeypatch.setenv(variable, raw)
    build: Any = ReceiptSpanProcessor if form == "processor" else ReceiptSpanExporter
    inner: Any = SimpleSpanProcessor(InMemorySpanExporter()) if form == "processor" else None
    inner = inner if inner is not None else InMemorySpanExporter()
    from_env = build(inner, store=store).engine.settings
    assert getattr(from_env, option) == want
    argument = ARGUMENTS[option]
    from_argument = build(inner, store=store, **{option: argument}).engine.settings
    expected = frozenset(argument) if option == "trusted_hosts" else argument
    assert getattr(from_argument, option) == expected


def test_store_from_environment_and_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AF_OTEL_STORE names the store; store= overrides it."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "env-store"))
    assert resolve_settings().store.url == (tmp_path / "env-store").as_uri()  # type: ignore[union-attr]
    chosen = resolve_settings(store=tmp_path / "arg-store").store
    assert chosen.url == (tmp_path / "arg-store").as_uri()  # type: ignore[union-attr]


def test_key_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AF_OTEL_KEY_FILE holds the key when AF_OTEL_KEY is unset."""
    (tmp_path / "key").write_text("from-file\n")
    monkeypatch.setenv("AF_OTEL_KEY_FILE", str(tmp_path / "key"))
    assert resolve_settings(store=tmp_path).key == b"from-file"


BAD_ARGUMENTS = [
    ("content", "inlin", "'auto', 'inline', 'store', 'none'"),
    ("content", 3, "'auto', 'inline', 'store', 'none'"),
    ("inline_limit", -1, "whole number of bytes"),
    ("inline_limit", True, "whole number of bytes"),
    ("inline_limit", "1k", "whole number of bytes"),
    ("strip_instrumentation_content", "yes please", "True or False"),
    ("trusted_hosts", ["https://gw.example/v1"], "not a host name"),
    ("trusted_hosts", 42, "host names"),
    ("key", b"", "non-empty"),
    ("store", 42, "a Store, a directory or an fsspec URL"),
    ("store", "", "empty store URL"),
]


@pytest.mark.parametrize(("option", "value", "allowed"), BAD_ARGUMENTS)
@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_bad_argument_raises_naming_it(
    form: str, option: str, value: object, allowed: str, tmp_path: Path
) -> None:
    """A typo in code fails at construction, naming the argument and what it accepts."""
    build: Any = ReceiptSpanProcessor if form == "processor" else ReceiptSpanExporter
    inner: Any = SimpleSpanProcessor(InMemorySpanExporter())
    if form == "exporter":
        inner = InMemorySpanExporter()
    options: dict[str, Any] = {"store": tmp_path, option: value}
    with pytest.raises(ValueError, match=re.escape(allowed)) as raised:
        build(inner, **options)
    assert str(raised.value).startswith(f"{option}=") or str(raised.value).startswith(option)


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_a_misspelt_option_is_refused(tmp_path: Path, form: str) -> None:
    """An option nobody takes raises TypeError naming it, as a keyword argument would."""
    build: Any = ReceiptSpanProcessor if form == "processor" else ReceiptSpanExporter
    inner: Any = SimpleSpanProcessor(InMemorySpanExporter())
    with pytest.raises(TypeError, match="'contnet'"):
        build(inner, store=tmp_path, contnet="store")


def test_a_bad_key_is_not_echoed(tmp_path: Path) -> None:
    """The key's own value never appears in the error."""
    with pytest.raises(ValueError, match="key") as raised:
        resolve_settings(store=tmp_path, key=bytearray())
    assert "bytearray" not in str(raised.value)


BAD_ENVIRONMENT = [
    ("AF_OTEL_CONTENT", "inlin", "content", "auto"),
    ("AF_OTEL_INLINE_LIMIT", "-3", "inline_limit", names.DEFAULT_INLINE_LIMIT),
    ("AF_OTEL_STRIP_CONTENT", "maybe", "strip_instrumentation_content", False),
    ("AF_OTEL_TRUSTED_HOSTS", "gw.example/v1", "trusted_hosts", frozenset()),
]


@pytest.mark.parametrize(("variable", "raw", "option", "fallback"), BAD_ENVIRONMENT)
def test_bad_environment_warns_once_and_falls_back(
    variable: str,
    raw: str,
    option: str,
    fallback: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deployed application keeps running on a bad variable: one warning, the default."""
    monkeypatch.setenv(variable, raw)
    with caplog.at_level(logging.WARNING, logger="af_otel"):
        first = resolve_settings(store=tmp_path)
        second = resolve_settings(store=tmp_path)
    assert getattr(first, option) == getattr(second, option) == fallback
    warnings = [r for r in caplog.records if variable in r.getMessage()]
    assert len(warnings) == 1


def test_bad_store_variable_falls_back_to_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An AF_OTEL_STORE that cannot be opened warns and uses ./.af_otel/store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AF_OTEL_STORE", "file://elsewhere/store")
    with caplog.at_level(logging.WARNING, logger="af_otel"):
        made = resolve_settings()
    assert made.store is not None
    assert made.store.url == (tmp_path / ".af_otel" / "store").as_uri()
    assert any("AF_OTEL_STORE" in r.getMessage() for r in caplog.records)


@given(st.text(max_size=12))
def test_any_environment_value_resolves_without_raising(raw: str) -> None:
    """Whatever a variable holds, resolving never raises (it warns and falls back)."""
    variables = ("AF_OTEL_CONTENT", "AF_OTEL_INLINE_LIMIT", "AF_OTEL_STRIP_CONTENT")
    saved = {v: settings_module.os.environ.get(v) for v in variables}
    try:
        for variable in variables:
            if "\x00" not in raw:
                settings_module.os.environ[variable] = raw
        made = resolve_settings(store=Path("/nonexistent/never-written"))
        assert made.content in settings_module.CONTENT_MODES
        assert made.inline_limit >= 0
    finally:
        for variable, value in saved.items():
            if value is None:
                settings_module.os.environ.pop(variable, None)
            else:
                settings_module.os.environ[variable] = value


def test_write_mode_follows_the_span() -> None:
    """auto: inline where the span carries the request, the store elsewhere; explicit modes hold."""
    auto = Settings(store=None)
    assert (auto.write_mode(True), auto.write_mode(False)) == ("inline", "store")
    for mode in ("inline", "store", "none"):
        fixed = Settings(store=None, content=mode)  # type: ignore[arg-type]
        assert fixed.write_mode(True) == fixed.write_mode(False) == mode


def test_every_variable_is_in_the_one_table() -> None:
    """docs/processor.md has one configuration table naming every variable the settings read."""
    text = DOCS.read_text(encoding="utf-8")
    constants = [
        value
        for name, value in vars(settings_module).items()
        if name.startswith("ENV_") and isinstance(value, str)
    ]
    assert set(VARIABLES) <= set(constants)
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    for variable in constants:
        assert f"`{variable}`" in table, variable


# -- the store says where it is ----------------------------------------------------------------


def test_first_write_says_where_the_store_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first payload written logs the store's location at INFO, once."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "told"))
    made = make_pipeline(None, content="store")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="af_otel"):
        chat(made.tracer, [user("one")])
        chat(made.tracer, [user("one"), user("two")])
    made.provider.shutdown()
    told = [r for r in caplog.records if r.levelno == logging.INFO and "store" in r.getMessage()]
    assert len(told) == 1
    assert (tmp_path / "told").as_uri() in told[0].getMessage()


# -- trusted hosts -------------------------------------------------------------------------------


def _gateway_call(pipeline: Pipeline) -> dict[str, Any]:
    """One real openai call through a gateway host, instrumented by genai-openai with the hook."""
    with instrumented_openai(pipeline.provider, completion_hook=completion_hook):
        client = openai.OpenAI(
            api_key="test",
            base_url="https://llm-gateway.corp.example/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(_openai_reply)),
        )
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    (span,) = llm_spans(pipeline.spans())
    return af(span)


def test_gateway_raises_cache_transform_unless_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call through a gateway is cache-transform; naming the gateway trusted lifts it."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    untrusted = make_pipeline(LocalStore(tmp_path / "a"))
    assert names.GAP_CACHE_TRANSFORM in _gateway_call(untrusted)[names.GAPS]
    monkeypatch.setenv("AF_OTEL_TRUSTED_HOSTS", "LLM-Gateway.corp.example")
    trusted = make_pipeline(LocalStore(tmp_path / "b"))
    assert names.GAP_CACHE_TRANSFORM not in _gateway_call(trusted)[names.GAPS]
    for made in (untrusted, trusted):
        made.provider.shutdown()


# -- strict only on request ----------------------------------------------------------------------

USER_TEST = textwrap.dedent(
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import af_otel
    from af_otel.processor import engine


    def broken(*args, **kwargs):
        raise RuntimeError("af_otel internal failure (planted)")


    def test_my_app(monkeypatch):
        monkeypatch.setattr(engine.Engine, "enrich", broken)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(exporter)))
        tracer = provider.get_tracer("app")
        for _ in range(3):
            span = tracer.start_span(
                "chat m",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "m",
                    "gen_ai.input.messages": '[{"role": "user", "parts": []}]',
                },
            )
            span.end()
        assert len(exporter.get_finished_spans()) == 3
    """
)


def test_an_applications_own_pytest_run_never_sees_af_otel_errors(tmp_path: Path) -> None:
    """A user's test suite (no AF_OTEL_STRICT) in which af_otel fails internally passes, and the
    failure is logged once, not raised through span.end()."""
    (tmp_path / "test_user_app.py").write_text(USER_TEST, encoding="utf-8")
    env = {
        key: value
        for key, value in settings_module.os.environ.items()
        if key not in ("AF_OTEL_STRICT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")
    }
    env["AF_OTEL_STORE"] = str(tmp_path / "store")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "log_level=WARNING",
            "-rA",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_user_app.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed" in output
    assert output.count("af_otel: internal error in ReceiptSpanProcessor.on_end") == 1, output
