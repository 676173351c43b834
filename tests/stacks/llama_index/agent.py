"""A two-tool agent on the real LlamaIndex (``llama-index-core``'s ``FunctionAgent`` over
``llama-index-llms-openai``) under openinference-instrumentation-llama-index, with af_otel's
processor writing OTLP JSON lines; run by the harness in the stack's side venv:

    python agent.py '<json config>'

llama-index-llms-openai pins openai below 3, so the client sends through httpx. The agent streams
its model calls (FunctionAgent's default). Four questions, each a tool call and an answer, the
conversation carried by one workflow ``Context``: 8 model calls.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soa"))
import common  # beside this folder, importable in the side venv


async def _converse(agent: Any, context: Any) -> None:
    for question in common.QUESTIONS:
        await agent.run(question, ctx=context)


def main(config: dict[str, Any]) -> None:
    tracer_provider = common.provider(config)
    import httpx
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.workflow import Context
    from llama_index.llms.openai import OpenAI
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    llm = OpenAI(
        model="gpt-4o-mini",
        api_key="sk-wire",
        api_base="https://api.openai.com/v1",
        temperature=common.TEMPERATURE,
        max_tokens=common.MAX_TOKENS,
        http_client=common.rerouted(httpx, config["port"], asynchronous=False),
        async_http_client=common.rerouted(httpx, config["port"], asynchronous=True),
    )
    agent = FunctionAgent(
        tools=[common.get_weather, common.get_time],
        llm=llm,
        system_prompt=common.INSTRUCTIONS,
        streaming=config.get("streaming", True),
    )
    try:
        asyncio.run(_converse(agent, Context(agent)))
    finally:
        instrumentor.uninstrument()
        tracer_provider.shutdown()
    common.report(
        len(common.QUESTIONS) * 2,
        "llama-index-core",
        "llama-index-llms-openai",
        "openinference-instrumentation-llama-index",
    )


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
