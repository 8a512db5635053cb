"""The chat without a language model: a first ``scripts/run`` still shows memory working.

With no LLM configured (no ``llm.base_url``, no API key), ``membridge run`` and ``chat`` put
:class:`MemoryOnlyLLM` where the model would be. It drives the very same agent loop and tools a
model would: a statement is saved with ``memory_write`` (today's daily memory, as the model would
save it), a question is answered with ``memory_search``'s best matches, plainly labelled as search
results, never dressed up as an AI answer. The conversation is stored as usual, so a real model
configured later sees it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .llm import NOT_CONFIGURED, LLMClient, LLMError, LLMResponse, Message, ToolCall
from .wiring.worker import SUMMARY_PROMPT

#: Said once when the chat starts, so nobody takes the replies for a model's.
BANNER = ("No language model is connected: I save what you tell me and answer questions with memory search "
          "results. For real answers set OPENAI_API_KEY, or llm.base_url in config.yaml (e.g. Ollama: "
          "http://localhost:11434/v1).")
SEARCH_LABEL = "Memory search results (no language model is connected, so this is not an AI answer):"
NOTHING_FOUND = "Memory search found nothing for that (no language model is connected, so I can only search)."
SHOWN_RESULTS = 5
SNIPPET_CHARS = 300

_QUESTION_WORDS = frozenset(
    ["what", "who", "whom", "whose", "when", "where", "why", "how", "which", "do", "does", "did", "is", "are", "was", "were", "can", "could", "should", "would", "will", "have", "has", "any"]
)
_CJK_QUESTION = re.compile(r"(吗|呢|什么|谁|哪|几|怎么|为什么|多少)[。.!！]?$")


def is_question(text: str) -> bool:
    """A question mark, a leading question word, or a Chinese question ending."""
    stripped = text.strip()
    first = stripped.split(maxsplit=1)[0].lower() if stripped else ""
    return stripped.endswith(("?", "？")) or first in _QUESTION_WORDS or bool(_CJK_QUESTION.search(stripped))


class MemoryOnlyLLM(LLMClient):
    """Stands in for the model: one tool call per message, then its result in plain words."""

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] = ()) -> LLMResponse:
        if not tools:  # a flush summary or a Deep Dream: only a model can write those
            if messages and messages[0].get("content") == SUMMARY_PROMPT:
                return LLMResponse("NONE")  # what the user said is already in daily memory
            raise LLMError("config", NOT_CONFIGURED)
        last = messages[-1]
        if last.get("role") == "tool":
            return LLMResponse(_describe(_called_tool(messages), str(last.get("content") or "")))
        text = str(last.get("content") or "")
        if is_question(text):
            return _call("memory_search", {"query": text[:1000]})
        return _call("memory_write", {"text": text})


def _call(name: str, arguments: dict[str, Any]) -> LLMResponse:
    return LLMResponse("", [ToolCall("memory-only-1", name, json.dumps(arguments, ensure_ascii=False))])


def _called_tool(messages: Sequence[Message]) -> str:
    """The name of the tool whose result ends ``messages`` (from the assistant message before it)."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            return str(call["function"]["name"])
    return ""


def _describe(tool: str, output: str) -> str:
    """The tool's result as the reply: where a note was saved, or the labelled search results."""
    if tool == "memory_write":
        if output.startswith("saved to "):
            return f"Saved to today's memory ({output.removeprefix('saved to ')})."
        return f"I could not save that: {output}"
    try:
        results = json.loads(output).get("results", [])
    except (json.JSONDecodeError, AttributeError):
        return f"The memory search failed: {output}"
    if not results:
        return NOTHING_FOUND
    lines = [SEARCH_LABEL]
    for number, hit in enumerate(results[:SHOWN_RESULTS], 1):
        snippet = " ".join(str(hit["text"]).split())
        snippet = snippet if len(snippet) <= SNIPPET_CHARS else snippet[: SNIPPET_CHARS - 1] + "…"
        when = f"{hit['date']}, " if hit.get("date") else ""
        lines.append(f"{number}. {snippet} ({when}{hit['path']}:{hit['line']}, score {hit['score']:.2f})")
    return "\n".join(lines)
