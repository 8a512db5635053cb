"""The bridge pipeline: plugins, commands, per-chat order, duplicates, with a recording channel."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from fakes import HANG_GUARD_S
from support.bot import dm, group, make_services
from support.channel import RecordingChannel

from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge
from plugins import Action, EventContext, Plugin, PluginRegistry
from plugins.builtin.commands import CommandsPlugin


class Gatekeeper(Plugin):
    name = "gatekeeper"
    priority = 100

    def on_handle(self, ctx: EventContext) -> Action:
        if "secret word" in ctx.message.text:
            from channels import Reply

            ctx.reply = Reply("The gatekeeper answers.")
            return Action.BREAK_PASS
        return Action.CONTINUE


class Broken(Plugin):
    name = "broken"
    priority = 50

    async def on_handle(self, ctx: EventContext) -> Action:
        raise RuntimeError("plugin bug")

    def on_decorate(self, ctx: EventContext) -> None:
        raise ValueError("decorator bug")


class Shouter(Plugin):
    name = "shouter"

    def on_decorate(self, ctx: EventContext) -> None:
        from channels import Reply

        assert ctx.reply is not None
        ctx.reply = Reply(ctx.reply.text.upper())


@pytest.fixture
async def bot(tmp_path, fake_llm):
    services = make_services(tmp_path / "ws", fake_llm.base_url, admins=["telegram:1"])
    channel = RecordingChannel()

    async def make(*plugins: Plugin) -> tuple[Bridge, RecordingChannel]:
        registry = PluginRegistry([CommandsPlugin(None), *plugins])
        bridge = Bridge(services, [channel], registry)
        await bridge.start(timer=False)
        made.append(bridge)
        return bridge, channel

    made: list[Bridge] = []
    yield make
    for bridge in made:
        await bridge.shutdown()


async def test_a_priority_100_plugin_that_stops_everything_answers_instead(bot, fake_llm) -> None:
    _, channel = await bot(Gatekeeper(None))
    await channel.push(dm("tell me the secret word"))
    await channel.wait_sent(1)
    assert channel.texts() == ["The gatekeeper answers."] and fake_llm.requests == []


async def test_a_raising_plugin_does_not_stop_the_reply(bot, fake_llm, caplog) -> None:
    _, channel = await bot(Broken(None), Shouter(None))
    fake_llm.reply("hello there")
    await channel.push(dm("hi"))
    await channel.wait_sent(1)
    assert channel.texts() == ["HELLO THERE"]
    assert "plugin bug" in caplog.text and "broken" in caplog.text


async def test_memory_dream_in_chat_runs_one_dream_for_the_senders_scope(bot, fake_llm) -> None:
    bridge, channel = await bot()
    services = bridge.services
    today = datetime.now().strftime("%Y-%m-%d")
    for scope in ("telegram-42", "telegram-7"):
        daily = services.workspace.daily_file(scope, today)
        daily.parent.mkdir(parents=True)
        daily.write_text(f"- note of {scope}\n")
    fake_llm.reply("[MEMORY]\n- distilled note of telegram-42\n[DREAM]\nquiet")
    await channel.push(dm("/memory dream 2", user="42"))
    [(reply, _)] = await channel.wait_sent(1)
    assert len(fake_llm.requests) == 1
    assert "note of telegram-42" in fake_llm.requests[0]["messages"][1]["content"]
    assert "telegram-7" not in fake_llm.requests[0]["messages"][1]["content"]
    assert "+- distilled note of telegram-42" in reply.text
    assert services.workspace.memory_file("telegram-42").read_text() == "- distilled note of telegram-42\n"
    assert not services.workspace.memory_file("telegram-7").exists()
    await channel.push(dm("/memory dream 99", user="42"))
    await channel.wait_sent(2)
    assert "days from 1 to 30" in channel.texts()[1] and len(fake_llm.requests) == 1


async def test_revert_is_refused_for_non_admins_and_works_for_admins(bot, fake_llm) -> None:
    bridge, channel = await bot()
    memory_file = bridge.services.dreamer.memory_file
    await asyncio.to_thread(memory_file.write, "telegram-1", b"- first\n", "test")
    await asyncio.to_thread(memory_file.write, "telegram-1", b"- second\n", "test")
    await asyncio.to_thread(memory_file.write, "telegram-42", b"- mine\n", "test")
    await channel.push(dm("/memory revert", user="42"))
    await channel.push(dm("/memory revert", user="1"))
    await channel.wait_sent(2)
    assert channel.texts("42") == ["Sorry, only an admin can revert memory."]
    assert channel.texts("1")[0].startswith("MEMORY.md restored")
    assert bridge.services.workspace.memory_file("telegram-1").read_text() == "- first\n"


async def test_memory_commands_show_search_forget_clear_and_usage(bot, fake_llm) -> None:
    bridge, channel = await bot()
    await asyncio.to_thread(bridge.services.dreamer.memory_file.write, "telegram-42",
                            b"- likes tea\n- lives in Porto\n", "test")
    for text in ("/memory show", "/memory search Porto", "/memory forget porto", "/memory forget! porto",
                 "/memory show", "/memory bogus", "/clear", "/nope"):
        await channel.push(dm(text))
    await channel.wait_sent(8)
    show, search, listing, forget, show_after, usage, clear, unknown = channel.texts()
    assert show == "MEMORY.md:\n- likes tea\n- lives in Porto"
    assert search.startswith("1. MEMORY.md:2 (") and "> - lives in Porto" in search  # the line that matched
    assert listing.splitlines() == [
        "“porto” is in:", "```", "memory files: 1; file versions: 1; index: 1",
        "  memory files  MEMORY.md:2  - lives in Porto", "  file versions  MEMORY.md v1:2  - lives in Porto",
        "  index  MEMORY.md:1-2  - likes tea - lives in Porto", "```",
        "Send /memory forget! porto to forget all of it for good (it cannot be undone)."]
    assert forget == "Forgotten for good: 1 in memory files, 1 in file versions, 1 in index."
    assert show_after == "MEMORY.md:\n- likes tea"
    assert usage.startswith("Usage: /memory show")
    assert clear.startswith("Context cleared") and unknown.startswith("Unknown command /nope")
    assert fake_llm.requests == []


async def test_a_forget_listing_shows_remembered_markup_as_written(bot, fake_llm) -> None:
    """Remembered text is data: backticks or asterisks in it are shown, not taken for formatting
    or for the end of the listing's block."""
    bridge, channel = await bot()
    await asyncio.to_thread(bridge.services.dreamer.memory_file.write, "telegram-42",
                            b"- run ```make *all*``` to build\n", "test")
    await channel.push(dm("/memory forget make"))
    await channel.wait_sent(1)
    [listing] = channel.texts()
    assert listing.splitlines() == [
        "“make” is in:", "````", "memory files: 1; file versions: 1",
        "  memory files  MEMORY.md:1  - run ```make *all*``` to build",
        "  file versions  MEMORY.md v1:1  - run ```make *all*``` to build", "````",
        "Send /memory forget! make to forget all of it for good (it cannot be undone)."]


async def test_ten_messages_of_one_chat_in_order_while_another_chat_is_served(bot, fake_llm) -> None:
    _, channel = await bot()
    fake_llm.responder = lambda r: "echo " + r["messages"][-1]["content"]
    for i in range(10):
        await channel.push(dm(f"a{i}", user="1"))
    await channel.push(dm("b0", user="2"))
    await channel.wait_sent(11)
    assert channel.texts("1") == [f"echo a{i}" for i in range(10)]
    assert channel.texts("2") == ["echo b0"]
    assert channel.texts().index("echo b0") < 10  # served before chat 1 finished


async def test_a_duplicate_delivery_is_answered_once(bot, fake_llm) -> None:
    _, channel = await bot()
    message = dm("hello")
    await channel.push(message)
    await channel.push(message)
    await channel.wait_sent(1)
    await asyncio.sleep(0.2)
    assert len(channel.sent) == 1 and len(fake_llm.requests) == 1


async def test_group_messages_use_the_groups_scope(bot, fake_llm) -> None:
    bridge, channel = await bot()
    await asyncio.to_thread(bridge.services.dreamer.memory_file.write, "telegram-42", b"- private thing\n", "t")
    await channel.push(group("/memory show", chat="-100", user="42"))
    await channel.wait_sent(1)
    assert channel.texts() == ["I have no long-term memory for this chat yet."]


def test_build_plugins_reports_unknown_names(tmp_path) -> None:
    from plugins import PluginError

    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", plugins={"enabled": ["commands", "nope"]})
    with pytest.raises(PluginError, match="unknown plugin 'nope'"):
        build_plugins(services)


async def test_start_loads_the_vectors_of_recently_active_chats(tmp_path, fake_llm) -> None:
    embedding = {"provider": "openai", "base_url": fake_llm.base_url, "api_key": "test-key", "model": "emb"}
    first = make_services(tmp_path / "ws", fake_llm.base_url, embedding=embedding)
    first.memory.append_daily("telegram-42", "- Ann's cat is called Miso")
    await asyncio.to_thread(first.memory.indexer.sync)  # the fake embedding server runs on this loop
    first.conversations.ensure_session("telegram:42", "telegram-42", "telegram")
    first.close()
    services = make_services(tmp_path / "ws", fake_llm.base_url, embedding=embedding)  # a restart
    bridge = Bridge(services, [RecordingChannel()], PluginRegistry([CommandsPlugin(None)]))
    await bridge.start(timer=False)
    try:
        deadline = asyncio.get_running_loop().time() + HANG_GUARD_S
        while "telegram-42" not in services.memory.vector_cache._blocks:  # warmed in the background
            assert asyncio.get_running_loop().time() < deadline, "the vector cache was never warmed"
            await asyncio.sleep(0.02)
        assert list(services.memory.vector_cache._blocks) == ["telegram-42"]  # knowledge is empty here
    finally:
        await bridge.shutdown()


async def test_an_exported_zip_is_deleted_after_sending_even_when_the_upload_fails(bot, fake_llm) -> None:
    bridge, channel = await bot()
    bridge.services.memory.append_daily("telegram-7", "- a note to take away")
    await channel.push(dm("/memory export", user="7"))
    [(reply, _)] = await channel.wait_sent(1)
    [(name, data, to)] = channel.files
    assert reply.file is not None and reply.file.name == name and data.startswith(b"PK") and to.user_id == "7"
    assert list(bridge.services.workspace.exports_dir.iterdir()) == []

    async def refuse(file: object, to: object) -> None:
        raise ConnectionError("upload refused")

    channel.send_file = refuse  # type: ignore[method-assign]
    await channel.push(dm("/memory export", user="7"))
    sent = await channel.wait_sent(3)
    assert sent[2][0].text == "Sorry, something went wrong with that message."
    assert list(bridge.services.workspace.exports_dir.iterdir()) == []


async def test_an_export_of_a_scope_with_nothing_in_it_says_so(bot, fake_llm) -> None:
    _, channel = await bot()
    await channel.push(dm("/memory export", user="8"))
    [(reply, _)] = await channel.wait_sent(1)
    assert reply.text == "I have nothing stored for you yet, so there is nothing to export." and reply.file is None
