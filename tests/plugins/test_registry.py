"""The plugin registry: discovery, config validation, lifecycle and event dispatch."""

from __future__ import annotations

import importlib.metadata
import logging
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from channels.base import IncomingMessage, Reply
from plugins import (
    BUILTIN_PLUGINS,
    ENTRY_POINT_GROUP,
    Action,
    Event,
    EventContext,
    Plugin,
    PluginError,
    PluginRegistry,
    handles,
)

# --- helpers -------------------------------------------------------------------------------------


class Scripted(Plugin):
    """A plugin whose on_handle does what the test says and notes that it ran."""

    def __init__(
        self,
        calls: list[str],
        result: object = None,
        *,
        raises: bool = False,
        reply: Reply | None = None,
    ) -> None:
        super().__init__(None)
        self.calls = calls
        self.result = result
        self.raises = raises
        self.reply = reply

    def on_handle(self, ctx: EventContext) -> Any:
        self.calls.append(self.name)
        if self.raises:
            raise RuntimeError(f"{self.name} exploded")
        if self.reply is not None:
            ctx.reply = self.reply
        return self.result


class AsyncScripted(Scripted):
    async def on_handle(self, ctx: EventContext) -> Any:  # type: ignore[override]
        return super().on_handle(ctx)


def scripted(name: str, priority: int = 0, *, asynchronous: bool = False) -> Callable[..., Scripted]:
    """A Scripted subclass with the given class-level name and priority."""
    base = AsyncScripted if asynchronous else Scripted
    return type(f"Scripted_{name}", (base,), {"name": name, "priority": priority})


def make_ctx() -> EventContext:
    message = IncomingMessage(
        channel="terminal",
        chat_id="c1",
        chat_type="direct",
        user_id="u1",
        user_name="Ann",
        text="hello",
        message_id="m1",
    )
    return EventContext(event=Event.RECEIVE, message=message, scope="u1", is_admin=False, host=None)


@pytest.fixture(autouse=True)
def no_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed distributions must not leak plugins into these tests."""
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [])


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write an importable module to tmp_path under a fresh name; return that name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str) -> str:
        name = f"plugmod_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


ECHO_SOURCE = """
    from __future__ import annotations
    from plugins import Plugin

    class EchoPlugin(Plugin):
        name = "echo"
        priority = 5
"""

GREETER_SOURCE = """
    from __future__ import annotations
    from pydantic import BaseModel, Field
    from plugins import Plugin

    class GreeterConfig(BaseModel):
        greeting: str = "hi"
        times: int = Field(default=1, ge=1)

    class Greeter(Plugin):
        name = "greeter"
        config_schema = GreeterConfig
"""

# --- dispatch ------------------------------------------------------------------------------------


async def test_handlers_run_by_priority_then_name() -> None:
    calls: list[str] = []
    plugins = [
        scripted("low", -5)(calls),
        scripted("zeta", 0)(calls),
        scripted("high", 100)(calls),
        scripted("alpha", 0)(calls),
    ]
    registry = PluginRegistry(plugins)

    assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.CONTINUE
    assert calls == ["high", "alpha", "zeta", "low"]
    assert [plugin.name for plugin in registry.plugins] == calls


@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), st.integers(-3, 3), max_size=8))
def test_plugin_order_is_priority_descending_then_name(priorities: dict[str, int]) -> None:
    registry = PluginRegistry([scripted(name, priority)([]) for name, priority in priorities.items()])
    expected = sorted(priorities, key=lambda name: (-priorities[name], name))
    assert [plugin.name for plugin in registry.plugins] == expected


async def test_dispatch_sets_event_and_runs_only_that_events_handlers() -> None:
    seen: list[Event] = []

    class SendOnly(Plugin):
        name = "send-only"

        def on_send(self, ctx: EventContext) -> None:
            seen.append(ctx.event)

    calls: list[str] = []
    registry = PluginRegistry([SendOnly(None), scripted("handler")(calls)])
    ctx = make_ctx()

    await registry.dispatch(Event.HANDLE, ctx)
    assert ctx.event is Event.HANDLE and seen == [] and calls == ["handler"]
    await registry.dispatch(Event.SEND, ctx)
    assert seen == [Event.SEND] and calls == ["handler"]


async def test_explicit_continue_runs_everyone() -> None:
    calls: list[str] = []
    registry = PluginRegistry([scripted("a", 1)(calls, Action.CONTINUE), scripted("b", 0)(calls)])
    assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.CONTINUE
    assert calls == ["a", "b"]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_break_stops_lower_plugins_and_returns_break(asynchronous: bool) -> None:
    calls: list[str] = []
    registry = PluginRegistry(
        [
            scripted("first", 10)(calls),
            scripted("breaker", 5, asynchronous=asynchronous)(calls, Action.BREAK),
            scripted("last", 0)(calls),
        ]
    )
    assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.BREAK
    assert calls == ["first", "breaker"]


async def test_break_pass_returns_break_pass_and_keeps_the_reply() -> None:
    calls: list[str] = []
    answer = Reply(text="handled by plugin")
    registry = PluginRegistry(
        [scripted("answerer", 10)(calls, Action.BREAK_PASS, reply=answer), scripted("last", 0)(calls)]
    )
    ctx = make_ctx()

    assert await registry.dispatch(Event.HANDLE, ctx) is Action.BREAK_PASS
    assert ctx.reply is answer
    assert calls == ["answerer"]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_raising_handler_is_logged_and_skipped(asynchronous: bool, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    registry = PluginRegistry(
        [scripted("faulty", 10, asynchronous=asynchronous)(calls, raises=True), scripted("next", 0)(calls)]
    )
    with caplog.at_level(logging.ERROR, logger="plugins"):
        assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.CONTINUE

    assert calls == ["faulty", "next"]
    [record] = [r for r in caplog.records if r.name == "plugins"]
    assert "'faulty'" in record.getMessage() and "on_handle" in record.getMessage()
    assert record.exc_info is not None and "faulty exploded" in str(record.exc_info[1])


async def test_sync_and_async_handlers_both_run_and_both_can_break() -> None:
    calls: list[str] = []
    registry = PluginRegistry(
        [scripted("async", 2, asynchronous=True)(calls), scripted("sync", 1)(calls), scripted("tail", 0)(calls)]
    )
    assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.CONTINUE
    assert calls == ["async", "sync", "tail"]

    calls.clear()
    registry = PluginRegistry([scripted("async", 1, asynchronous=True)(calls, Action.BREAK), scripted("sync")(calls)])
    assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.BREAK
    assert calls == ["async"]


@pytest.mark.parametrize("garbage", [True, "break", 0, Event.HANDLE])
async def test_garbage_result_is_logged_and_treated_as_continue(
    garbage: object, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    registry = PluginRegistry([scripted("odd", 1)(calls, garbage), scripted("next")(calls)])
    with caplog.at_level(logging.WARNING, logger="plugins"):
        assert await registry.dispatch(Event.HANDLE, make_ctx()) is Action.CONTINUE
    assert calls == ["odd", "next"]
    assert any("'odd'" in r.getMessage() and "not an Action" in r.getMessage() for r in caplog.records)


def test_handles_sees_defined_handlers_only() -> None:
    plugin = scripted("h")([])
    assert handles(plugin, Event.HANDLE)
    assert not handles(plugin, Event.RECEIVE)
    assert not handles(plugin, Event.SEND)


def test_registry_rejects_nameless_and_duplicate_plugins() -> None:
    class Nameless(Plugin):
        pass

    with pytest.raises(PluginError, match="Nameless"):
        PluginRegistry([Nameless(None)])
    with pytest.raises(PluginError, match="twice: dup"):
        PluginRegistry([scripted("dup")([]), scripted("dup")([])])


# --- lifecycle -----------------------------------------------------------------------------------


async def test_lifecycle_hooks_run_in_order_and_failed_start_disables(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []

    class Tracked(Plugin):
        fail_start = False
        fail_stop = False

        async def on_start(self) -> None:
            events.append(f"start {self.name}")
            if self.fail_start:
                raise OSError("no socket")

        def on_stop(self) -> None:  # type: ignore[override]  # sync hooks are accepted too
            events.append(f"stop {self.name}")
            if self.fail_stop:
                raise OSError("already closed")

        def on_handle(self, ctx: EventContext) -> None:
            events.append(f"handle {self.name}")

    class Good(Tracked):
        name = "good"
        priority = 10

    class Broken(Tracked):
        name = "broken"
        priority = 5
        fail_start = True

    class Sloppy(Tracked):
        name = "sloppy"
        fail_stop = True

    registry = PluginRegistry([Sloppy(None), Broken(None), Good(None)])
    with caplog.at_level(logging.ERROR, logger="plugins"):
        await registry.start()
        await registry.dispatch(Event.HANDLE, make_ctx())
        await registry.stop()

    assert events == [
        "start good",
        "start broken",
        "start sloppy",
        "handle good",
        "handle sloppy",
        "stop sloppy",
        "stop good",
    ]
    assert [p.name for p in registry.plugins] == ["good", "sloppy"]
    assert [p.name for p in registry.disabled] == ["broken"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("'broken'" in m and "disabled" in m for m in messages)
    assert any("'sloppy'" in m and "stop" in m for m in messages)


async def test_default_hooks_are_no_ops() -> None:
    registry = PluginRegistry([scripted("plain")([])])
    await registry.start()
    await registry.stop()
    assert [p.name for p in registry.plugins] == ["plain"]


# --- discovery -----------------------------------------------------------------------------------


def test_load_from_builtins_mapping(write_module: Callable[[str], str]) -> None:
    module = write_module(ECHO_SOURCE)
    registry = PluginRegistry.load(["echo"], builtins={"echo": f"{module}:EchoPlugin"})
    [plugin] = registry.plugins
    assert plugin.name == "echo" and type(plugin).__name__ == "EchoPlugin" and plugin.config is None


def test_builtins_are_imported_only_when_enabled(write_module: Callable[[str], str]) -> None:
    module = write_module(ECHO_SOURCE)
    builtins = {"echo": f"{module}:EchoPlugin", "ghost": "no_such_module_xyz:Ghost"}

    assert [p.name for p in PluginRegistry.load(["echo"], builtins=builtins).plugins] == ["echo"]
    with pytest.raises(PluginError, match=r"plugin 'ghost': cannot load built-in no_such_module_xyz:Ghost"):
        PluginRegistry.load(["ghost"], builtins=builtins)


def test_default_builtins_are_offered_without_being_imported() -> None:
    assert BUILTIN_PLUGINS["commands"] == "plugins.builtin.commands:CommandsPlugin"
    assert PluginRegistry.load([]).plugins == []
    with pytest.raises(PluginError, match=r"available: commands\)"):
        PluginRegistry.load(["nope"])


def test_load_from_dirs(tmp_path: Path) -> None:
    folder = tmp_path / "my_plugins"
    folder.mkdir()
    (folder / "shout.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            from dataclasses import dataclass
            from plugins import Action, EventContext, Plugin

            @dataclass
            class Note:  # dataclasses need the module in sys.modules
                text: str

            class Base(Plugin):  # no name: a helper, not a plugin
                pass

            class Shout(Base):
                name = "shout"

                def on_decorate(self, ctx: EventContext) -> Action:
                    ctx.data["note"] = Note("loud")
                    return Action.CONTINUE
            """
        )
    )
    (folder / "_helpers.py").write_text("raise RuntimeError('private helpers are not imported')\n")
    (folder / "notes.txt").write_text("not python")

    registry = PluginRegistry.load(["shout"], dirs=[str(folder)], builtins={})
    [plugin] = registry.plugins
    assert plugin.name == "shout" and handles(plugin, Event.DECORATE)

    with pytest.raises(PluginError, match=r"available: shout\)"):
        PluginRegistry.load(["Base"], dirs=[folder], builtins={})


def test_same_file_name_in_two_dirs_does_not_collide(tmp_path: Path) -> None:
    for folder, plugin_name in (("one", "first"), ("two", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "plugin.py").write_text(
            f"from plugins import Plugin\nclass P(Plugin):\n    name = {plugin_name!r}\n"
        )
    registry = PluginRegistry.load(["first", "second"], dirs=[tmp_path / "one", tmp_path / "two"], builtins={})
    assert [p.name for p in registry.plugins] == ["first", "second"]


def test_bad_dirs_are_reported(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match=r"plugins.dirs: .*missing is not a folder"):
        PluginRegistry.load([], dirs=[tmp_path / "missing"], builtins={})
    (tmp_path / "broken.py").write_text("import no_such_module_xyz\n")
    with pytest.raises(PluginError, match=r"plugins.dirs: cannot import .*broken.py: ModuleNotFoundError"):
        PluginRegistry.load([], dirs=[tmp_path], builtins={})


def test_load_from_entry_point(monkeypatch: pytest.MonkeyPatch, write_module: Callable[[str], str]) -> None:
    module = write_module(ECHO_SOURCE)
    groups: list[str] = []

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        groups.append(group)
        return [importlib.metadata.EntryPoint(name="echo", value=f"{module}:EchoPlugin", group=group)]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    registry = PluginRegistry.load(["echo"], builtins={})

    assert groups == [ENTRY_POINT_GROUP] == ["membridge.plugins"]
    assert [type(p).__name__ for p in registry.plugins] == ["EchoPlugin"]


def test_entry_point_must_be_a_plugin_of_that_name(
    monkeypatch: pytest.MonkeyPatch, write_module: Callable[[str], str]
) -> None:
    module = write_module(ECHO_SOURCE + "\n    NOT_A_PLUGIN = 42\n")
    entries = [
        importlib.metadata.EntryPoint(name="number", value=f"{module}:NOT_A_PLUGIN", group=ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint(name="renamed", value=f"{module}:EchoPlugin", group=ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: entries)

    with pytest.raises(PluginError, match=r"plugin 'number': .* is not a Plugin subclass"):
        PluginRegistry.load(["number"], builtins={})
    with pytest.raises(PluginError, match=r"plugin 'renamed': .* is named 'echo'"):
        PluginRegistry.load(["renamed"], builtins={})


def test_unknown_name_lists_every_available_plugin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "local.py").write_text("from plugins import Plugin\nclass L(Plugin):\n    name = 'local'\n")
    entry = importlib.metadata.EntryPoint(name="installed", value="x:Y", group=ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [entry])

    with pytest.raises(PluginError) as caught:
        PluginRegistry.load(["local", "nope"], dirs=[tmp_path], builtins={"builtin": "x:Y"})
    assert str(caught.value) == "plugins.enabled: unknown plugin 'nope' (available: builtin, installed, local)"


def test_a_name_defined_twice_is_an_error_when_enabled(tmp_path: Path, write_module: Callable[[str], str]) -> None:
    module = write_module(ECHO_SOURCE)
    (tmp_path / "echo_copy.py").write_text("from plugins import Plugin\nclass E(Plugin):\n    name = 'echo'\n")
    builtins = {"echo": f"{module}:EchoPlugin"}

    assert PluginRegistry.load([], dirs=[tmp_path], builtins=builtins).plugins == []
    with pytest.raises(PluginError, match=r"plugin 'echo' is defined more than once .*echo_copy.py.*rename one"):
        PluginRegistry.load(["echo"], dirs=[tmp_path], builtins=builtins)


def test_duplicate_enabled_names_load_once(write_module: Callable[[str], str]) -> None:
    module = write_module(ECHO_SOURCE)
    registry = PluginRegistry.load(["echo", "echo"], builtins={"echo": f"{module}:EchoPlugin"})
    assert [p.name for p in registry.plugins] == ["echo"]


# --- config --------------------------------------------------------------------------------------


def test_valid_config_reaches_the_plugin(write_module: Callable[[str], str]) -> None:
    builtins = {"greeter": f"{write_module(GREETER_SOURCE)}:Greeter"}

    section = {"greeter": {"greeting": "hey", "times": 3}}
    [plugin] = PluginRegistry.load(["greeter"], config=section, builtins=builtins).plugins
    assert isinstance(plugin.config, BaseModel)
    assert plugin.config.model_dump() == {"greeting": "hey", "times": 3}

    [defaulted] = PluginRegistry.load(["greeter"], builtins=builtins).plugins
    assert defaulted.config is not None and defaulted.config.model_dump() == {"greeting": "hi", "times": 1}


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"times": 0}, r"plugins\.config\.greeter\.times: Input should be greater than or equal to 1 \(got 0\)"),
        ({"times": "many"}, r"plugins\.config\.greeter\.times: Input should be a valid integer"),
        ("loud", r"plugins\.config\.greeter: Input should be a valid dictionary"),
    ],
)
def test_invalid_config_names_the_key(write_module: Callable[[str], str], section: object, expected: str) -> None:
    builtins = {"greeter": f"{write_module(GREETER_SOURCE)}:Greeter"}
    with pytest.raises(PluginError, match=expected):
        PluginRegistry.load(["greeter"], config={"greeter": section}, builtins=builtins)  # type: ignore[dict-item]


def test_required_and_unknown_keys_are_reported(write_module: Callable[[str], str]) -> None:
    module = write_module(
        """
        from pydantic import BaseModel, ConfigDict
        from plugins import Plugin

        class Settings(BaseModel):
            model_config = ConfigDict(extra="forbid")
            token: str

        class Strict(Plugin):
            name = "strict"
            config_schema = Settings
        """
    )
    builtins = {"strict": f"{module}:Strict"}
    with pytest.raises(PluginError, match=r"plugins\.config\.strict\.token: Field required"):
        PluginRegistry.load(["strict"], builtins=builtins)
    with pytest.raises(PluginError, match=r"plugins\.config\.strict\.tokn: unknown key"):
        PluginRegistry.load(["strict"], config={"strict": {"token": "t", "tokn": "x"}}, builtins=builtins)


def test_config_for_a_plugin_without_schema_is_an_error(write_module: Callable[[str], str]) -> None:
    builtins = {"echo": f"{write_module(ECHO_SOURCE)}:EchoPlugin"}
    with pytest.raises(PluginError, match=r"plugins\.config\.echo: plugin 'echo' takes no settings"):
        PluginRegistry.load(["echo"], config={"echo": {"volume": 11}}, builtins=builtins)
    assert PluginRegistry.load(["echo"], config={"echo": {}}, builtins=builtins).plugins[0].config is None


def test_config_for_a_plugin_not_enabled_is_an_error() -> None:
    with pytest.raises(PluginError, match=r"plugins\.config\.ghost: plugin 'ghost' is not enabled"):
        PluginRegistry.load([], config={"ghost": {"x": 1}}, builtins={})


def test_a_plugin_whose_constructor_fails_is_reported(write_module: Callable[[str], str]) -> None:
    module = write_module(
        """
        from plugins import Plugin

        class Fragile(Plugin):
            name = "fragile"

            def __init__(self, config):
                raise ValueError("needs a GPU")
        """
    )
    with pytest.raises(PluginError, match="plugin 'fragile': could not be created: ValueError: needs a GPU"):
        PluginRegistry.load(["fragile"], builtins={"fragile": f"{module}:Fragile"})


async def test_the_command_menu_lists_each_name_once_by_priority_without_disabled_plugins() -> None:
    class Weather(Plugin):
        name = "weather"
        priority = 10
        commands = (("weather", "today's forecast"), ("help", "weather help"))

    class Broken(Plugin):
        name = "broken"
        priority = 20
        commands = (("broken", "never shown"),)

        async def on_start(self) -> None:
            raise RuntimeError("no API key")

    class Basics(Plugin):
        name = "basics"
        commands = (("help", "the commands"), ("clear", "a fresh start"))

    registry = PluginRegistry([Basics(None), Weather(None), Broken(None)])
    await registry.start()
    assert registry.commands() == [("weather", "today's forecast"), ("help", "weather help"), ("clear", "a fresh start")]
