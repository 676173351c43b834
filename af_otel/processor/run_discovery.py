"""Which run a call is in when no `af_otel.run` block says: found from what the stack records.

A call outside an `af_otel.run` block takes, in this order (docs/processor.md, "What a call gets"):

1. the span's ``af.run.id`` (the explicit API, the completion hook, a processor of the user's);
2. the conversation: the span's ``gen_ai.conversation.id`` (on a span OpenInference wrote, its
   ``session.id``: OpenInference's `using_session` stamps it on every span it makes), else the one
   util-genai carries on the context of an agent or workflow invocation (every span started inside
   it sees it, including a provider instrumentation's chat span that knows nothing of the agent);
3. the enclosing agent span: the nearest open ``invoke_agent`` / ``invoke_workflow`` /
   ``handle_conversation_turn`` / ``invocation.internal`` span, or a framework's agent span
   (OpenInference ``AGENT``, OpenLLMetry ``agent`` / ``workflow``), above the call. Its conversation
   id when it had one at its start, else the span itself (trace and span id in hex);
4. the trace (the engine's trace-id run).

So two conversations in one trace are two runs, and one conversation over many traces (each turn its
own request) is one. Rule 3 needs each span's start: `Enclosing` remembers, from ``on_start`` to
``on_end``, every open span at or under an agent span with the run it gives, in a table bounded like
the engine's open calls; a span outside every agent span costs one look-up of its parent. The
exporter form sees no start and applies rules 1, 2 (the span's attribute) and 4.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.model.agent_spans import is_agent_span

SpanKey = tuple[int, int]
CONVERSATION_ID: Final = "gen_ai.conversation.id"
# OpenInference's conversation: read only on its own spans (the kind key marks them), since
# `session.id` elsewhere is a user's session (OTel's session conventions), which holds many
# conversations.
OPENINFERENCE_SESSION: Final = "session.id"
OPENINFERENCE_KIND: Final = "openinference.span.kind"
# Open spans at or under an agent span: bounded like the engine's open calls (a span that never
# ends must not hold memory forever; an evicted one's calls fall back to rule 2 or 4).
MAX_ENCLOSED: Final = 65_536


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def conversation(attributes: Mapping[str, Any]) -> str | None:
    """The conversation a span records: ``gen_ai.conversation.id``, else OpenInference's
    ``session.id`` on a span of OpenInference."""
    found = _text(attributes.get(CONVERSATION_ID))
    if found is None and OPENINFERENCE_KIND in attributes:
        return _text(attributes.get(OPENINFERENCE_SESSION))
    return found


def recorded_run(attributes: Mapping[str, Any]) -> str | None:
    """Rules 1 and 2 as the span records them: its ``af.run.id``, else its conversation id."""
    return _text(attributes.get(names.RUN_ID)) or conversation(attributes)


def _ambient_reader() -> Callable[[], str | None]:
    """util-genai's reader of the conversation id on the current context, where it is installed.
    It is util-genai's private module: if it moves, rule 2 still reads the span's attribute."""
    try:
        from opentelemetry.util.genai._conversation_context import (  # noqa: PLC0415 - optional
            get_ambient_conversation_id,
        )
    except Exception:  # not installed, or moved

        def none() -> str | None:
            return None

        return none

    def ambient() -> str | None:
        try:
            return _text(get_ambient_conversation_id())
        except Exception:
            return None

    return ambient


ambient_conversation: Final = _ambient_reader()


def span_run_id(key: SpanKey) -> str:
    """The run an agent span without a conversation id gives its calls: its trace and span id."""
    return f"{key[0]:032x}-{key[1]:016x}"


class Enclosing:
    """The open spans at or under an agent span, each with the run it gives its calls.

    Thread-safe; never raises (the engine's guard is the backstop); a forked child starts empty,
    since the parent's open spans never end there."""

    def __init__(self) -> None:
        self._open: OrderedDict[SpanKey, str] = OrderedDict()
        self._lock = forksafe.lock(self)
        forksafe.on_fork(self, Enclosing._forget_all)

    def start(
        self, key: SpanKey, name: str, attributes: Mapping[str, Any], parent: SpanKey | None
    ) -> None:
        """A span started: remember it when it is an agent span or under one."""
        # Read without the lock: one dict look-up is atomic, and an entry an other thread adds or
        # drops meanwhile is one of another span. Empty (no agent span open): nothing to find.
        opened = self._open
        inherited = opened.get(parent) if opened and parent is not None else None
        if is_agent_span(attributes, name):
            own = conversation(attributes) or ambient_conversation()
            found = own or inherited or span_run_id(key)
        elif inherited is not None:
            found = inherited
        else:
            return
        with self._lock:
            self._open[key] = found
            if len(self._open) > MAX_ENCLOSED:
                self._open.popitem(last=False)

    def run(self, key: SpanKey, attributes: Mapping[str, Any], *, pop: bool = False) -> str | None:
        """Rules 1 to 3 for the call ``key``: None leaves it to the trace. ``pop`` forgets it."""
        with self._lock:
            enclosing = self._open.pop(key, None) if pop else self._open.get(key)
        return recorded_run(attributes) or ambient_conversation() or enclosing

    def end(self, key: SpanKey) -> str | None:
        """A span ended: forget it. The run it gave, when that run was the span itself (an agent
        span without a conversation id), which the engine then frees as it frees a trace's."""
        with self._lock:
            found = self._open.pop(key, None)
        return found if found is not None and found == span_run_id(key) else None

    def _forget_all(self) -> None:
        self._open = OrderedDict()
