"""The bridge's per-chat order, concurrency bound, dedupe window and shutdown drain, end to end.

A gate plugin holds chosen messages in ``on_handle`` (inside the turn, where the agent would run)
until the test opens it, so every check waits on events, never on time.
"""

from __future__ import annotations

import asyncio

from fakes import HANG_GUARD_S
from support.bot import dm, make_services
from support.channel import RecordingChannel, SlowPlatform
from support.logs import watching

from bridge.conversation import session_key
from bridge.wiring.runtime import Bridge
from plugins import Action, EventContext, Plugin, PluginRegistry


class Gate(Plugin):
    """Holds the messages whose text is in ``held`` until ``open`` is set; counts turns running at once."""

    name = "gate"
    priority = 100

    def __init__(self, *held: str) -> None:
        super().__init__(None)
        self.held = set(held)
        self.open = asyncio.Event()
        self.running = 0
        self.most = 0
        self.entered: list[str] = []
        self._changed = asyncio.Event()

    async def on_handle(self, ctx: EventContext) -> Action:
        self.entered.append(ctx.message.text)
        self.running += 1
        self.most = max(self.most, self.running)
        self._changed.set()
        try:
            if ctx.message.text in self.held or "*" in self.held:
                await self.open.wait()
        finally:
            self.running -= 1
        return Action.CONTINUE

    async def wait_entered(self, count: int) -> None:
        async def until() -> None:
            while len(self.entered) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(until(), HANG_GUARD_S)


async def started(tmp_path, fake_llm, gate: Gate, **config) -> tuple[Bridge, RecordingChannel]:
    services = make_services(tmp_path / "ws", fake_llm.base_url, **config)
    channel = RecordingChannel()
    bridge = Bridge(services, [channel], PluginRegistry([gate]))
    await bridge.start(timer=False)
    return bridge, channel


async def test_one_chat_waits_behind_its_slow_turn_while_other_chats_are_answered(tmp_path, fake_llm) -> None:
    gate = Gate("a0")
    bridge, channel = await started(tmp_path, fake_llm, gate)
    fake_llm.responder = lambda r: "echo " + r["messages"][-1]["content"]
    try:
        for i in range(5):
            await channel.push(dm(f"a{i}", user="1"))
        await channel.push(dm("b0", user="2"))
        await channel.wait_sent(1)
        await gate.wait_entered(2)
        # a1.. wait behind a0; a0 and b0 are different chats, so either may reach the gate first
        assert channel.texts() == ["echo b0"] and sorted(gate.entered) == ["a0", "b0"]
        gate.open.set()
        await channel.wait_sent(6)
        assert channel.texts("1") == [f"echo a{i}" for i in range(5)]
        history = bridge.services.conversations.load_messages(session_key("telegram-1", "telegram::1:"), 20)
        assert [m.text for m in history if m.role == "user"] == [f"a{i}" for i in range(5)]
    finally:
        await bridge.shutdown()


async def test_no_more_than_max_concurrent_chats_turns_run_at_once(tmp_path, fake_llm) -> None:
    gate = Gate("*")
    bridge, channel = await started(tmp_path, fake_llm, gate, bridge__max_concurrent_chats=2)
    try:
        for user in range(6):
            await channel.push(dm("hello", user=str(user)))
        await gate.wait_entered(2)
        for _ in range(20):  # every other chat's lane gets the chance to (wrongly) start its turn
            await asyncio.sleep(0)
        assert gate.running == 2 and len(gate.entered) == 2
        gate.open.set()
        await channel.wait_sent(6)
        assert gate.most == 2 and sorted(to.chat_id for _, to in channel.sent) == [str(u) for u in range(6)]
    finally:
        await bridge.shutdown()


async def test_a_redelivery_past_the_dedupe_window_is_still_answered_once(tmp_path, fake_llm) -> None:
    """The in-memory window (``bridge.dedupe_window``) forgets past its size; a redelivery it no
    longer holds is caught by the turn ledger in index.db: answered once, counted deduplicated."""
    bridge, channel = await started(tmp_path, fake_llm, Gate(), bridge__dedupe_window=10)
    try:
        first = dm("first", user="1")
        await channel.push(first)
        await channel.push(first)  # within the window: dropped at intake
        for i in range(10):
            await channel.push(dm(f"filler {i}", user="2"))
        await channel.wait_sent(11)
        await channel.push(first)  # ten keys later: out of the window, so the ledger decides
        await channel.push(dm("after", user="1"))  # answered only once the redelivery's turn is done
        await channel.wait_sent(12)
        assert channel.texts("1") == ["ok", "ok"] and len(fake_llm.requests) == 12
        assert fake_llm.requests[-1]["messages"][-1]["content"] == "after"
        assert bridge.services.usage.outcomes_since(0)["deduplicated"] == 2
    finally:
        await bridge.shutdown()


async def test_shutdown_lets_queued_turns_finish_then_takes_no_more(tmp_path, fake_llm) -> None:
    gate = Gate("a0")
    bridge, channel = await started(tmp_path, fake_llm, gate)
    for i in range(3):
        await channel.push(dm(f"a{i}", user="1"))
    await gate.wait_entered(1)
    stopping = asyncio.create_task(bridge.shutdown())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not stopping.done()  # waiting for the chat's queued turns
    gate.open.set()
    await asyncio.wait_for(stopping, HANG_GUARD_S)
    assert gate.entered == ["a0", "a1", "a2"] and len(channel.sent) == 3


async def test_shutdown_cancels_a_turn_still_running_after_the_grace(tmp_path, fake_llm) -> None:
    gate = Gate("stuck")
    bridge, channel = await started(tmp_path, fake_llm, gate, bridge__shutdown_grace_s=0)
    await channel.push(dm("stuck", user="1"))
    await channel.push(dm("behind it", user="1"))
    await gate.wait_entered(1)
    await asyncio.wait_for(bridge.shutdown(), HANG_GUARD_S)
    assert gate.running == 0 and gate.entered == ["stuck"] and channel.sent == []
    assert channel.accepted_keys == []  # neither may be confirmed: the platform delivers both again



async def test_a_stop_while_the_answer_goes_out_waits_for_it_and_the_redelivery_sends_nothing(
        tmp_path, fake_llm) -> None:
    """A stop's grace runs out while a reply is on its way to the platform: the turn is not cut
    there (the platform has the reply; cut before it is recorded sent, the redelivery would send the
    stored answer again) but finishes, and the next start's redelivery sends nothing."""
    fake_llm.reply("Noted: locker 12.")
    services = make_services(tmp_path / "ws", fake_llm.base_url, bridge__shutdown_grace_s=0)
    channel = SlowPlatform()
    bridge = Bridge(services, [channel], PluginRegistry([]))
    await bridge.start(timer=False)
    message = dm("my locker is 12", user="1")
    await channel.push(message)
    await asyncio.wait_for(channel.sending.wait(), HANG_GUARD_S)
    with watching("channels.ordering", "still busy at stop") as cancelled:
        stopping = asyncio.create_task(bridge.shutdown())
        assert await asyncio.to_thread(cancelled.seen.wait, HANG_GUARD_S)  # the grace is over: the lane is cancelled
    channel.respond.set()
    await asyncio.wait_for(stopping, HANG_GUARD_S)
    assert channel.texts() == ["Noted: locker 12."]

    again = RecordingChannel()
    restarted = Bridge(make_services(tmp_path / "ws", fake_llm.base_url), [again], PluginRegistry([]))
    await restarted.start(timer=False)
    try:
        await again.push(message)  # delivered again (a shard's next holder, a platform that was not told)
        assert await again.wait_accepted(1) == [message.dedupe_key]
        assert again.sent == [] and len(fake_llm.requests) == 1
    finally:
        await restarted.shutdown()

async def test_a_message_is_accepted_once_its_turn_stored_it_and_a_redelivery_not_before(tmp_path, fake_llm) -> None:
    """What the channel may confirm to its platform: a message held before its turn stored it is
    not accepted yet, nor is a redelivery of it (dropped as a duplicate) until the first is."""
    gate = Gate("a0")
    bridge, channel = await started(tmp_path, fake_llm, gate)
    try:
        message = dm("a0", user="1")
        await channel.push(message)
        await gate.wait_entered(1)
        await channel.push(message)  # delivered again while the first is held
        for _ in range(20):
            await asyncio.sleep(0)
        assert channel.accepted_keys == []
        gate.open.set()
        await channel.wait_sent(1)
        assert set(channel.accepted_keys) == {message.dedupe_key} and len(fake_llm.requests) == 1
    finally:
        await bridge.shutdown()

