"""One turn: an incoming message in, one reply out, with memory read and written on the way.

1. the system prompt is rebuilt from disk (persona, the scope's MEMORY.md, memory rules), with
   the notes of the scope's memory that the message calls to mind (auto-recall: searched from the
   turn's start, while the message is stored);
2. the session's visible history is loaded from the conversation store;
3. the LLM and the tools go back and forth, at most ``agent.max_steps`` times;
4. every new message is stored as it happens (the user's first, so an LLM failure loses nothing);
5. past the context budget the oldest turns are trimmed and a flush job is recorded in the same
   transaction (:class:`~bridge.conversation.Sessions`); the flush worker turns it into daily memory
   later, so no flush blocks a reply.

The agent does not order turns: its caller runs one turn per chat at a time, in arrival order
(:class:`~bridge.wiring.runtime.Bridge`, through :mod:`channels.ordering`); different chats run concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Protocol

from channels import IncomingMessage, Reply
from memory import ConversationStore, MemoryManager, Recalled, RecallState

from . import offload
from .config import AgentSettings, ContextSettings
from .conversation import Sessions, session_key
from .llm import ContextLengthExceeded, LLMClient, LLMError, Message
from .media.photos import with_images
from .messages import history, to_turn
from .ops.metering import Tally
from .prompt import PromptBuilder, PromptContext
from .scopes import TurnIdentity, scope_for
from .tools import ToolBox, ToolContext

if TYPE_CHECKING:
    from .ops.metering import TurnMeter

log = logging.getLogger(__name__)

_FAILURE_REPLIES = {
    "config": "No language model is configured yet, so I can only run commands (/help). The operator needs to set llm.* in config.yaml or OPENAI_API_KEY.",
    "unreachable": "I can't reach my language model right now, so I can't answer. Your message is saved; please try again in a moment.",
    "auth": "My language model rejected my credentials (the operator needs to fix llm.api_key). Your message is saved.",
    "model": "My configured language model doesn't exist on the server (the operator needs to fix llm.model). Your message is saved.",
    "rate_limit": "My language model is busy (rate-limited). Your message is saved; please try again in a minute.",
}
_DEFAULT_FAILURE = "Something went wrong talking to my language model. Your message is saved; please try again."
_FORGOTTEN_REPLY = "That message was forgotten while I was answering it, so I've dropped my answer."
#: What a turn's auto-recall brought, and whether it was on, off or failed.
_RecallOutcome = tuple[tuple[Recalled, ...], RecallState]


class TurnForgotten(Exception):
    """A forget deleted the message being answered: nothing more of its turn may be stored."""


@dataclass(frozen=True)
class TurnInFlight:
    """The turn being answered: for whom, the message's dedupe key, and the seq of its stored user
    message (every message of the turn is stored only while that one is there)."""

    who: TurnIdentity
    key: str
    user_seq: int
    tally: Tally = field(default_factory=Tally)  # its model requests' tokens and latencies


class TurnJournal(Protocol):
    """Makes a turn safe to run again for the same message (a platform's redelivery after a crash,
    a cluster shard's pending entry): the user's message is stored once, and a stored answer is
    never asked of the LLM again. The marks are written in the transactions that store those messages."""

    def user_stored(self, key: str) -> bool: ...

    def user_seq(self, key: str) -> int | None: ...

    def mark_started(self, conn: sqlite3.Connection, key: str, user_seq: int | None) -> None: ...

    def mark_answered(self, conn: sqlite3.Connection, key: str, reply: str, markdown: bool = True) -> None: ...


class Agent:
    def __init__(
        self,
        *,
        memory: MemoryManager,
        conversations: ConversationStore,
        llm: LLMClient,
        toolbox: ToolBox,
        prompt: PromptBuilder,
        context: ContextSettings,
        settings: AgentSettings,
        sessions: Sessions | None = None,
        scope_mode: str = "user",
        admins: frozenset[str] = frozenset(),
        thread_scope_channels: frozenset[str] = frozenset(),
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.memory = memory
        self.conversations = conversations
        self.llm = llm
        self.toolbox = toolbox
        self.prompt = prompt
        self.context = context
        self.settings = settings
        self.scope_mode = scope_mode
        self.sessions = sessions or Sessions(conversations, context)
        self.admins = admins
        self.thread_scope_channels = thread_scope_channels
        self._clock = clock
        self.journal: TurnJournal | None = None  # the workspace's turn ledger (Services sets it)
        self.meter: TurnMeter | None = None  # usage and limits (Services sets it)

    def identify(self, message: IncomingMessage) -> TurnIdentity:
        user = f"{message.channel}:{message.user_id}"
        scope = scope_for(message, self.scope_mode, thread_channels=self.thread_scope_channels)
        return TurnIdentity(
            session_id=session_key(scope, message.chat_key),
            scope=scope,
            user=user,
            is_admin=user in self.admins,
        )

    async def handle(self, message: IncomingMessage, images: tuple[str, ...] = (), *,
                     stored: Callable[[], object] | None = None) -> Reply:
        """Answer ``message``. The caller runs one turn per chat at a time (the bridge's lanes).
        ``images`` (``data:`` URLs) go to the model with this turn's message only: what is stored
        is its text. ``stored`` is called once the user's message is stored (from then on a crash
        loses none of it: the channel may confirm the delivery).

        The message's auto-recall search starts at once, beside the storing of the message and the
        limits' check, which it does not depend on (a turn that ends before its model call drops it)."""
        who = self.identify(message)
        recall = asyncio.ensure_future(self._search_recall(who, message.text))
        try:
            return await self._answer(message, who, recall, images, stored)
        finally:
            recall.cancel()  # a turn refused, forgotten or failed before its model call

    async def _answer(self, message: IncomingMessage, who: TurnIdentity,
                      recall: Awaitable[_RecallOutcome], images: tuple[str, ...],
                      stored: Callable[[], object] | None) -> Reply:
        """The turn itself (:meth:`handle`), its recall search under way."""
        now = self._clock()
        await self.sessions.open(who.scope, message.chat_key, message.channel)
        user_message: Message = {"role": "user", "content": message.text}
        user_seq = await self._store_user_message(who.session_id, message.dedupe_key, user_message)
        if stored is not None:
            stored()
        if user_seq is None:
            return Reply(_FORGOTTEN_REPLY, reply_to=message.message_id, markdown=False)
        turn = TurnInFlight(who, message.dedupe_key, user_seq)
        refusal = await self.meter.refusal(who.scope, who.is_admin) if self.meter else None
        if refusal is not None:
            await self._account(message, who, "refused")
            return Reply(refusal, reply_to=message.message_id, markdown=False)
        ctx = ToolContext(scope=who.scope, user=who.user, is_admin=who.is_admin, now=now,
                          still_asked=partial(self.conversations.has_message, who.session_id, user_seq))
        recalled = await self._recall(turn, recall)
        system = await offload.run(self.prompt.build, PromptContext(
            who.scope, message.channel, message.chat_type, message.user_name, now, recalled))
        try:
            try:
                text = await self._converse(turn, ctx, system, images)
            except ContextLengthExceeded:
                log.warning("context too long for session %s: trimming harder and retrying once", who.session_id)
                await self.sessions.trim(who.session_id, harder=True)
                text = await self._converse(turn, ctx, system, images)
        except LLMError as exc:
            log.warning("turn failed for session %s: %s", who.session_id, exc)
            await self._account(message, who, "failed", turn.tally)
            return Reply(_FAILURE_REPLIES.get(exc.kind, _DEFAULT_FAILURE), reply_to=message.message_id, markdown=False)
        except TurnForgotten:
            log.info("a forget deleted the message session %s was answering; its answer is dropped", who.session_id)
            return Reply(_FORGOTTEN_REPLY, reply_to=message.message_id, markdown=False)
        await self.sessions.trim(who.session_id)
        await self._account(message, who, "answered", turn.tally)
        return Reply(text, thread_id=message.thread_id, reply_to=message.message_id)

    async def _search_recall(self, who: TurnIdentity, text: str) -> _RecallOutcome:
        """Auto-recall's notes for ``text`` and whether it was on; a failure costs the turn only the
        recalled notes (one log line), never its answer."""
        if not self.memory.settings.auto_recall.enabled:
            return (), "off"
        try:
            return tuple(await offload.run(self.memory.recall, text, who.scope)), "on"
        except Exception as exc:
            log.warning("auto-recall failed for session %s, answering without it: %s", who.session_id, exc)
            return (), "failed"

    async def _recall(self, turn: TurnInFlight, recall: Awaitable[_RecallOutcome]) -> tuple[Recalled, ...]:
        """The turn's auto-recall, once its search is done, recorded for the console (what came, or
        that it was off or failed)."""
        recalled, state = await recall
        try:
            await offload.run(self.memory.recalls.record, turn.who.session_id, turn.user_seq, turn.who.scope,
                              [r.to_dict() for r in recalled], state)
        except Exception as exc:
            log.warning("could not log session %s's recall for the console: %s", turn.who.session_id, exc)
        return recalled

    async def _account(self, message: IncomingMessage, who: TurnIdentity, outcome: str, tally: Tally | None = None) -> None:
        """The turn's outcome and cost into the usage book."""
        if self.meter is not None:
            await self.meter.record(who.scope, message.channel, outcome, tally)

    async def _store_user_message(self, session_id: str, key: str, user_message: Message) -> int | None:
        """Store the user's message, unless an earlier delivery of it already did (with a journal);
        returns its seq (None: that earlier delivery's message was forgotten since)."""
        journal = self.journal
        text = str(user_message["content"])
        if journal is not None and await offload.run(journal.user_stored, key):
            return await offload.run(self._stored_user_seq, journal, session_id, key, text)

        def mark(conn: sqlite3.Connection) -> None:  # inside the transaction, which reads its own write
            assert journal is not None
            journal.mark_started(conn, key, self.conversations.user_seq(session_id, text))

        [seq] = await offload.run(self.conversations.append_messages, session_id, [to_turn(user_message)],
                                  None if journal is None else mark)
        return seq

    def _stored_user_seq(self, journal: TurnJournal, session_id: str, key: str, text: str) -> int | None:
        """The seq of the user message an earlier delivery stored, while it is still there; by the
        seq the journal recorded (a redelivered photo's description may read differently), else by
        its text (a journal row from before seqs were recorded)."""
        seq = journal.user_seq(key)
        if seq is None:
            return self.conversations.user_seq(session_id, text)
        return seq if self.conversations.messages_between(session_id, seq, seq) else None

    async def _store(self, turn: TurnInFlight, messages: list[Message],
                     also: Callable[[sqlite3.Connection], object] | None = None) -> None:
        """Store messages of ``turn`` (and ``also`` with them); :class:`TurnForgotten` when a forget
        deleted its user message meanwhile: then nothing is stored."""
        stored = await offload.run(partial(self.conversations.append_messages, turn.who.session_id,
                                           [to_turn(m) for m in messages], also, answering=turn.user_seq))
        if not stored:
            raise TurnForgotten(turn.who.session_id)

    async def _store_answer(self, turn: TurnInFlight, messages: list[Message], text: str) -> None:
        """Store the turn's last messages; with a journal, the answer is marked in the same transaction."""
        journal = self.journal
        mark = None if journal is None else partial(journal.mark_answered, key=turn.key, reply=text)
        await self._store(turn, messages, mark)

    async def _converse(self, turn: TurnInFlight, ctx: ToolContext, system: str, images: tuple[str, ...] = ()) -> str:
        """The LLM ⇄ tools loop; stores each assistant and tool message as it happens."""
        tools = self.toolbox.schemas(ctx)
        for _step in range(self.settings.max_steps):
            messages = await offload.run(self._llm_messages, turn.who.session_id, system)
            if images:
                messages = _show_images(messages, images)
            response = await self.llm.complete(messages, tools)
            turn.tally.add(response)
            assistant = response.to_message()
            if not response.tool_calls:
                text = response.content.strip() or "(no answer)"
                assistant["content"] = text
                await self._store_answer(turn, [assistant], text)
                return text
            results: list[Message] = [assistant]
            for call in response.tool_calls:
                output = await self.toolbox.call(ctx, call.name, call.arguments)
                results.append({"role": "tool", "tool_call_id": call.id, "content": output})
            await self._store(turn, results)
        text = "I looked through my memory several times but couldn't finish; please ask again more specifically."
        await self._store_answer(turn, [{"role": "assistant", "content": text}], text)
        return text

    def _llm_messages(self, session_id: str, system: str) -> list[Message]:
        turns = self.conversations.load_messages(session_id, self.context.max_turns + 1)
        session = self.conversations.get_session(session_id)
        head: list[Message] = [{"role": "system", "content": system}]
        if session is not None and session.summary:
            head.append({"role": "system", "content": f"Summary of the earlier conversation:\n{session.summary}"})
        return head + history(turns)


def _show_images(messages: list[Message], images: tuple[str, ...]) -> list[Message]:
    """The request with ``images`` added to its last user message (this turn's), as content parts."""
    last = max(i for i, message in enumerate(messages) if message.get("role") == "user")
    return [*messages[:last], with_images(messages[last], images), *messages[last + 1:]]
