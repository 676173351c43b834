"""Gemini ``generateContent`` and ``streamGenerateContent`` (the Gemini API's
``POST .../models/{model}:generateContent``, Vertex AI's ``.../publishers/google/models/{model}:...``)
read into the normalized request.

The model is the path's (the body names none). ``systemInstruction`` is the system; each of
``contents`` is a message, role ``model`` read as ``assistant`` (``user`` stays, also for a turn of
function responses, as the API sends it). Parts: ``text`` as ``text`` (``thought: true`` as
``reasoning``), ``functionCall`` as ``tool_call`` (its ``args`` the arguments, its ``id`` only where
sent), ``functionResponse`` as ``tool_call_response`` keeping the function ``name`` (the API pairs a
response with its call by name), ``inlineData`` as ``blob`` and ``fileData`` as ``uri``; a
``thoughtSignature`` stays on its part as ``signature``, and any other part or part key is kept as
sent. Function declarations are tools (``parameters`` or ``parametersJsonSchema`` as their
``parameters``); a tool
of another kind (``googleSearch``, ``codeExecution``, ...) is a tool of that type. Settings:
``toolConfig.functionCallingConfig`` is the ``tool_choice``; ``generationConfig``'s sampling dials
take their normalized names, ``responseMimeType`` with ``responseSchema`` or
``responseJsonSchema`` is the response format and ``thinkingConfig`` the thinking, as sent; any
other generation setting, ``safetySettings`` and ``toolConfig.retrievalConfig`` are named unread.
``cachedContent`` is content the server holds (the call's held history). Keys are read in either
proto JSON spelling (``system_instruction`` as ``systemInstruction``), as the API reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from af_otel.model import Request
from af_otel.wire.endpoint import Endpoint, Unwritable, Writer
from af_otel.wire.shapes import WireRead, unread

PROVIDER: Final = "gcp.gemini"
VERTEX: Final = "gcp.vertex_ai"
# generationConfig key -> params key (rule 5 of af_otel.model.request).
PARAMS: Final = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "candidateCount": "choice_count",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop_sequences",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "seed": "seed",
    "thinkingConfig": "thinking",
}
FORMAT_KEYS: Final = ("responseMimeType", "responseSchema", "responseJsonSchema")
PLACED: Final = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "cachedContent"}
)
DROPPED: Final = frozenset({"labels", "model"})  # bookkeeping; the model is the path's
_TEXT_KEYS: Final = frozenset({"text", "thought", "thoughtSignature"})


# A Vertex AI endpoint (a tuned or deployed model), named by its resource name: what the client
# is handed as the model and keeps as it is (google-genai sends ``{version}/{resource}:...``).
_VERTEX_ENDPOINT: Final = re.compile(r"/(projects/[^/]+/locations/[^/]+/endpoints/[^/]+)")
# A Vertex AI publisher model's publisher (``publishers/{publisher}/models/``): Google's models are
# named bare, as the client takes them; another publisher's (``meta``, ``mistralai``, ...) as
# ``{publisher}/{model}``, which the client also takes, so that its path can be written again.
_PUBLISHER: Final = re.compile(r"/publishers/([^/]+)/$")
GOOGLE: Final = "google"


def model_of(path: bytes) -> tuple[str, str] | None:
    """The model a request path names and the provider it is served by: the Gemini API
    (``/v1beta/models/{model}:...``, also ``tunedModels/``) or Vertex AI (``.../publishers/...``
    in any API version and project spelling; an endpoint's resource name,
    ``projects/{p}/locations/{l}/endpoints/{id}``, is the model of a call sent to it)."""
    text = unquote(path.split(b"?", 1)[0].decode("latin-1"))
    head, colon, _ = text.rpartition(":")
    if not colon:
        return None
    for marker in ("/models/", "/tunedModels/"):
        at = head.rfind(marker)
        if at >= 0:
            name = head[at + len(marker) :]
            provider = VERTEX if "/publishers/" in head or "/projects/" in head else PROVIDER
            publisher = _PUBLISHER.search(head[: at + 1])
            if name and publisher is not None and publisher.group(1) != GOOGLE:
                name = f"{publisher.group(1)}/{name}"  # the publisher is model-visible routing
            return (name, provider) if name else None
    endpoint = _VERTEX_ENDPOINT.search(head)
    if endpoint is not None and endpoint.end() == len(head):
        return endpoint.group(1), VERTEX
    return None


def names_model(recorded: str, sent: Request) -> bool:
    """Whether a model as a Vertex AI client is handed it names the model its path does: the
    client takes ``{model}``, ``{publisher}/{model}``, ``publishers/{publisher}/models/{model}``
    and a ``projects/.../publishers/...`` resource for one model, and an instrumentation records
    the name as handed, not the path's (``{model}`` after its ``/models/``). The segments before
    the model are not compared: the request keeps the path's model alone."""
    if sent.provider != VERTEX or not sent.model or sent.model.startswith("projects/"):
        return recorded == sent.model
    publisher, _, bare = sent.model.rpartition("/")
    if publisher and recorded == sent.model:
        return True
    head, _, model = recorded.rpartition("/")
    if model != bare:
        return False
    resource = f"publishers/{publisher or GOOGLE}/models"
    if not publisher and "/" not in head:
        return head in ("", GOOGLE)
    return head == resource or head.endswith(f"/{resource}")


def camel(raw: Any) -> Any:
    """An object's keys in the API's JSON spelling: the API reads proto field names in either
    spelling (``system_instruction`` or ``systemInstruction``), and google-genai sends some of each
    (``parameters_json_schema`` in a function declaration)."""
    if not isinstance(raw, Mapping):
        return raw
    return {_camel_key(k): v for k, v in raw.items()}


def _camel_key(key: str) -> str:
    if "_" not in key:
        return key
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _declaration(raw: Any) -> dict[str, Any]:
    """A function declaration as a function tool: its JSON-schema parameters
    (``parametersJsonSchema``) are its ``parameters`` as much as an OpenAPI-subset ``parameters``
    (the API takes one or the other; the schema's own spelling shows which)."""
    declaration = camel(raw)
    schema = declaration.pop("parametersJsonSchema", None)
    if schema is not None and declaration.get("parameters") is None:
        declaration["parameters"] = schema
    return {"type": "function", **declaration}


def _modality(mime: Any) -> str:
    return str(mime).split("/", 1)[0] if isinstance(mime, str) and mime else ""


def _part(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    raw = camel(raw)
    signature = raw.get("thoughtSignature")
    part = _content_part(raw)
    if signature is not None:
        part["signature"] = signature
    return part


def _content_part(raw: Mapping[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in raw.items() if k not in _TEXT_KEYS}
    if isinstance(raw.get("text"), str):
        kind = "reasoning" if raw.get("thought") else "text"
        return {"type": kind, "content": raw["text"], **rest}
    if isinstance(call := raw.get("functionCall"), Mapping):
        extra = {k: v for k, v in rest.items() if k != "functionCall"}
        part = {"type": "tool_call", "id": call.get("id"), "name": call.get("name")}
        part["arguments"] = call.get("args")
        return {**part, **_beyond(call, {"id", "name", "args"}), **extra}
    if isinstance(answer := raw.get("functionResponse"), Mapping):
        extra = {k: v for k, v in rest.items() if k != "functionResponse"}
        part = {"type": "tool_call_response", "id": answer.get("id"), "name": answer.get("name")}
        part["response"] = answer.get("response")
        return {**part, **_beyond(answer, {"id", "name", "response"}), **extra}
    if isinstance(blob := camel(raw.get("inlineData")), Mapping):
        extra = {k: v for k, v in rest.items() if k != "inlineData"}
        mime = blob.get("mimeType")
        part = {"type": "blob", "mime_type": mime, "modality": _modality(mime)}
        return {**part, "content": blob.get("data"), **_beyond(blob, {"mimeType", "data"}), **extra}
    if isinstance(file := camel(raw.get("fileData")), Mapping):
        extra = {k: v for k, v in rest.items() if k != "fileData"}
        mime = file.get("mimeType")
        part = {"type": "uri", "mime_type": mime, "modality": _modality(mime)}
        return {
            **part,
            "uri": file.get("fileUri"),
            **_beyond(file, {"mimeType", "fileUri"}),
            **extra,
        }
    # executableCode, codeExecutionResult, toolCall, ...: the part's own key is its type.
    kind = next((k for k, v in raw.items() if isinstance(v, Mapping)), "part")
    return {"type": kind, **rest}


def _beyond(inner: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    """An inner object's keys beyond those its part spells otherwise (``willContinue``,
    ``scheduling``, ``displayName``, ...): kept, so nothing the model is shown is left out."""
    return {k: v for k, v in inner.items() if k not in known}


ROLES: Final = {"model": "assistant"}


def _message(raw: Mapping[str, Any]) -> dict[str, Any]:
    role = raw.get("role") or "user"  # the API reads a content without a role as the user's
    return {"role": ROLES.get(role, role), "parts": [_part(p) for p in raw.get("parts") or ()]}


def _tools(raw: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for entry in raw or ():
        for kind, value in camel(entry).items():
            if kind == "functionDeclarations":
                tools += [_declaration(d) for d in value or ()]
            else:  # googleSearch, codeExecution, retrieval, urlContext, ...: a tool of its own kind
                inner = value if isinstance(value, Mapping) else {"value": value}
                tools.append({"type": kind, "name": kind, **inner})
    return tools


def _settings(body: Mapping[str, Any], loose: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    config = camel(body.get("generationConfig"))
    if isinstance(config, Mapping):
        params = {PARAMS[k]: v for k, v in config.items() if k in PARAMS and v is not None}
        response_format = {k: config[k] for k in FORMAT_KEYS if config.get(k) is not None}
        if response_format:
            params["response_format"] = response_format
        loose += [
            f"generationConfig.{k}"
            for k, v in config.items()
            if v is not None and k not in PARAMS and k not in FORMAT_KEYS
        ]
    tool_config = camel(body.get("toolConfig"))
    if isinstance(tool_config, Mapping):
        choice = tool_config.get("functionCallingConfig")
        if choice is not None:
            params["tool_choice"] = choice
        loose += [
            f"toolConfig.{k}"
            for k, v in tool_config.items()
            if v is not None and k != "functionCallingConfig"
        ]
    return params


def read_path(body: Mapping[str, Any], path: bytes) -> WireRead | None:
    """The body sent to ``path`` read into a request; None when the path names no model."""
    found = model_of(path)
    if found is None:
        return None
    model, provider = found
    body = camel(body)
    loose: list[str] = []
    params = _settings(body, loose)
    system = body.get("systemInstruction")
    if isinstance(system, Mapping):
        system = [_part(p) for p in camel(system).get("parts") or ()]
    elif isinstance(system, str):
        system = [{"type": "text", "content": system}]
    request = {
        "model": model,
        "provider": provider,
        "system": system,
        "messages": [_message(m) for m in body.get("contents") or ()],
        "tools": _tools(body.get("tools")),
        "params": params,
    }
    if "safetySettings" in body and body["safetySettings"] is not None:
        loose.append("safetySettings")
    cached = body.get("cachedContent")
    found_unread = unread(body, PLACED | {"safetySettings"}, DROPPED)
    return WireRead(
        request,
        tuple(sorted({*found_unread, *loose})),
        f"cachedContent {cached}" if isinstance(cached, str) and cached else None,
    )


# -- the writer: the inverse of the reader (docs/receipt-spec.md §14) ----------------------------

ITEMS: Final = "contents"
_WRITE_PARAMS: Final = {target: key for key, target in PARAMS.items()}
_INNER: Final = {"tool_call": "functionCall", "tool_call_response": "functionResponse"}
# The part's key of the inner object's value, and the inner object's own key for it.
_INNER_VALUE: Final = {"tool_call": ("arguments", "args"), "tool_call_response": ("response",) * 2}
_FILES: Final = {"blob": ("inlineData", "data", "content"), "uri": ("fileData", "fileUri", "uri")}


def _write_part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    out: dict[str, Any] = {}
    known = {"type", "content", "signature"}
    if kind in ("text", "reasoning"):
        out = {"text": part.get("content", "")} | ({"thought": True} if kind == "reasoning" else {})
        out |= {k: v for k, v in part.items() if k not in known}
    elif kind in _INNER:
        inner = {"id": part["id"]} if part.get("id") is not None else {}
        source, target = _INNER_VALUE[kind]
        inner |= {"name": part.get("name"), target: part.get(source)}
        skip = {"type", "id", "name", source, "signature"}
        inner |= {k: v for k, v in part.items() if k not in skip}
        out = {_INNER[kind]: inner}
    elif kind in _FILES:
        key, value, source = _FILES[kind]
        skip = {"type", "mime_type", "modality", source, "signature"}
        inner = {"mimeType": part.get("mime_type"), value: part.get(source)}
        out = {key: inner | {k: v for k, v in part.items() if k not in skip}}
    else:  # a part kept as sent (executableCode, ...): its own key is its type
        out = {k: v for k, v in part.items() if k not in {"type", "signature"}}
    if "signature" in part:
        out["thoughtSignature"] = part["signature"]
    return out


def write_elements(message: Mapping[str, Any]) -> list[Any]:
    """One normalized message as the one content of ``contents`` it reads from."""
    role = "model" if message["role"] == "assistant" else message["role"]
    return [{"role": role, "parts": [_write_part(p) for p in message.get("parts", ())]}]


def _write_tools(tools: Any) -> list[dict[str, Any]]:
    """Function tools as one ``functionDeclarations`` entry each run of them, other tools as
    the entry of their own kind."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        kind = tool.get("type", "function")
        if kind == "function":
            declaration = {k: v for k, v in tool.items() if k != "type"}
            if out and "functionDeclarations" in out[-1]:
                out[-1]["functionDeclarations"].append(declaration)
            else:
                out.append({"functionDeclarations": [declaration]})
            continue
        inner = {k: v for k, v in tool.items() if k not in {"type", "name"}}
        out.append({kind: inner["value"] if set(inner) == {"value"} else inner})
    return out


def write_rest(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of the body but ``contents`` (the model is the path's, `write_path`)."""
    params = dict(request.get("params") or {})
    body: dict[str, Any] = {}
    if request.get("system"):
        body["systemInstruction"] = {"parts": [_write_part(p) for p in request["system"]]}
    if request.get("tools"):
        body["tools"] = _write_tools(request["tools"])
    if "tool_choice" in params:
        body["toolConfig"] = {"functionCallingConfig": params.pop("tool_choice")}
    config = dict(params.pop("response_format", None) or {})
    if set(params) - set(_WRITE_PARAMS):
        raise Unwritable(
            f"settings a Gemini request has no key for: {sorted(set(params) - set(_WRITE_PARAMS))}"
        )
    config = {_WRITE_PARAMS[k]: v for k, v in params.items()} | config
    if config:
        body["generationConfig"] = config
    return body


def _writer(operation: str) -> Writer:
    def write_path(request: Mapping[str, Any]) -> str:
        """The path the body goes to: the Gemini API's, or Vertex AI's with its project and
        location left as ``{project}`` and ``{location}`` (the record holds neither), or for a
        Vertex AI endpoint its resource name (the model, which holds both)."""
        model = request.get("model")
        if request.get("provider") == VERTEX and _VERTEX_ENDPOINT.fullmatch(f"/{model}"):
            return f"/v1beta1/{model}:{operation}"
        if request.get("provider") == VERTEX:
            publisher, _, bare = str(model).rpartition("/")
            where = "/v1beta1/projects/{project}/locations/{location}/publishers/"
            return f"{where}{publisher or GOOGLE}/models/{bare}:{operation}"
        return f"/v1beta/models/{model}:{operation}"

    return Writer(ITEMS, write_elements, write_rest, path=write_path)


# The providers' own hosts: the Gemini API's one name, Vertex AI's regional ones.
HOSTS: Final = {
    PROVIDER: re.compile(r"generativelanguage\.googleapis\.com"),
    VERTEX: re.compile(r"(?:[a-z0-9-]+-)?aiplatform\.googleapis\.com"),
}
ENDPOINTS: Final = (
    Endpoint(
        "gemini.stream_generate_content",
        (b":streamGenerateContent",),
        PROVIDER,
        read_path=read_path,
        writer=_writer("streamGenerateContent?alt=sse"),
        hosts=HOSTS,
    ),
    Endpoint(
        "gemini.generate_content",
        (b":generateContent",),
        PROVIDER,
        read_path=read_path,
        writer=_writer("generateContent"),
        hosts=HOSTS,
    ),
)
