"""Finding, configuring and running plugins.

:meth:`PluginRegistry.load` turns the ``plugins`` config section into plugin instances. A name can
come from three places: the built-in table (imported only when enabled, so a broken built-in
cannot stop a bridge that does not use it), the ``membridge.plugins`` entry-point group
(installed packages), and ``*.py`` files in plugin folders. Every problem found there is a
:class:`PluginError` at start-up, never a surprise on the first message.

At run time the registry is forgiving instead: a handler or hook that fails is logged and skipped,
so one faulty plugin costs its own feature, not the conversation.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from .base import Action, Event, EventContext, Plugin, PluginError, handles
from .builtin import BUILTIN_PLUGINS

log = logging.getLogger("plugins")

ENTRY_POINT_GROUP = "membridge.plugins"
_NO_CONFIG: Mapping[str, Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True)
class _Candidate:
    """A place a plugin name was found; ``load`` imports it only when the plugin is enabled."""

    origin: str
    load: Callable[[], object]


class PluginRegistry:
    """The enabled plugins, in the order they run, and the means to run them."""

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        for plugin in plugins:
            if not isinstance(getattr(plugin, "name", None), str) or not plugin.name:
                raise PluginError(f"{type(plugin).__name__}: a plugin needs a non-empty `name` class attribute")
        names = [plugin.name for plugin in plugins]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise PluginError(f"plugins enabled twice: {', '.join(duplicates)}")
        self.plugins: list[Plugin] = sorted(plugins, key=lambda p: (-p.priority, p.name))
        #: Plugins whose ``on_start`` failed; they no longer receive events.
        self.disabled: list[Plugin] = []

    def commands(self) -> list[tuple[str, str]]:
        """The chat commands of the running plugins, in priority order, each name once."""
        menu: dict[str, str] = {}
        for plugin in self.plugins:
            if plugin not in self.disabled:
                for name, description in plugin.commands:
                    menu.setdefault(name, description)
        return list(menu.items())

    @classmethod
    def load(
        cls,
        enabled: Sequence[str],
        dirs: Sequence[str | Path] = (),
        config: Mapping[str, Mapping[str, Any]] = _NO_CONFIG,
        *,
        builtins: Mapping[str, str] | None = None,
    ) -> PluginRegistry:
        """Find, configure and instantiate the ``enabled`` plugins (see the module docstring)."""
        names = list(dict.fromkeys(enabled))
        stray = sorted(set(config) - set(names))
        if stray:
            raise PluginError(
                f"plugins.config.{stray[0]}: plugin {stray[0]!r} is not enabled "
                "(add it to plugins.enabled or remove its config)"
            )
        available = _discover(BUILTIN_PLUGINS if builtins is None else builtins, dirs)
        plugins = [_instantiate(_resolve(name, available), config.get(name)) for name in names]
        return cls(plugins)

    async def start(self) -> None:
        """Run every ``on_start``; a plugin whose hook fails is disabled so it never half-works."""
        for plugin in list(self.plugins):
            try:
                await _call(plugin.on_start)
            except Exception:
                log.exception("plugin %r failed to start and is disabled", plugin.name)
                self.plugins.remove(plugin)
                self.disabled.append(plugin)

    async def stop(self) -> None:
        """Run every ``on_stop``, last started first, so a plugin outlives those after it."""
        for plugin in reversed(self.plugins):
            try:
                await _call(plugin.on_stop)
            except Exception:
                log.exception("plugin %r failed to stop cleanly", plugin.name)

    async def dispatch(self, event: Event, ctx: EventContext) -> Action:
        """Run the handlers for ``event`` in priority order; return the action that broke, if any."""
        ctx.event = event
        for plugin in self.plugins:
            if not handles(plugin, event):
                continue
            action = await _run_handler(plugin, event, ctx)
            if action is not Action.CONTINUE:
                return action
        return Action.CONTINUE


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async callable and return its result."""
    result = function(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _run_handler(plugin: Plugin, event: Event, ctx: EventContext) -> Action:
    """One handler, with its failures contained: the message always goes on."""
    try:
        result = await _call(getattr(plugin, event.value), ctx)
    except Exception:
        log.exception("plugin %r: %s failed; skipped", plugin.name, event.value)
        return Action.CONTINUE
    if result is None:
        return Action.CONTINUE
    if isinstance(result, Action):
        return result
    log.warning("plugin %r: %s returned %r, not an Action; treated as CONTINUE", plugin.name, event.value, result)
    return Action.CONTINUE


def _identity(plugin_cls: type) -> type:
    """A loader for a class that is already imported."""
    return plugin_cls


def _discover(builtins: Mapping[str, str], dirs: Sequence[str | Path]) -> dict[str, list[_Candidate]]:
    """Every plugin name on offer, with each place it was found."""
    available: dict[str, list[_Candidate]] = {}
    for name, target in builtins.items():
        available.setdefault(name, []).append(_Candidate(f"built-in {target}", functools.partial(_import_target, target)))
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        available.setdefault(entry.name, []).append(_Candidate(f"entry point {entry.value}", entry.load))
    for directory in dirs:
        for path, plugin_cls in _scan_dir(Path(directory)):
            available.setdefault(plugin_cls.name, []).append(_Candidate(str(path), functools.partial(_identity, plugin_cls)))
    return available


def _import_target(target: str) -> object:
    """Import ``"module:Attribute"``."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _scan_dir(directory: Path) -> list[tuple[Path, type[Plugin]]]:
    """The plugin classes defined in a folder's ``*.py`` files (``_*.py`` are private helpers)."""
    if not directory.is_dir():
        raise PluginError(f"plugins.dirs: {directory} is not a folder (create it or remove it from plugins.dirs)")
    found: list[tuple[Path, type[Plugin]]] = []
    for path in sorted(directory.glob("*.py")):
        if not path.name.startswith("_"):
            found.extend((path, plugin_cls) for plugin_cls in _plugin_classes(_import_file(path)))
    return found


def _import_file(path: Path) -> ModuleType:
    """Import one file under a name unique to its path, so same-named files in two folders coexist.

    The module is registered in ``sys.modules`` while it runs because dataclasses and postponed
    annotations look their module up there.
    """
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"membridge_plugin_{digest}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugins.dirs: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise PluginError(
            f"plugins.dirs: cannot import {path}: {type(exc).__name__}: {exc} (fix or move the file)"
        ) from exc
    return module


def _plugin_classes(module: ModuleType) -> list[type[Plugin]]:
    """Named, concrete Plugin subclasses defined in ``module`` itself (not merely imported)."""
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, Plugin)
        and obj.__module__ == module.__name__
        and isinstance(getattr(obj, "name", None), str)
        and not inspect.isabstract(obj)
    ]


def _resolve(name: str, available: Mapping[str, list[_Candidate]]) -> type[Plugin]:
    """The class behind ``name``, checked to be a plugin of that name."""
    candidates = available.get(name, [])
    if not candidates:
        offered = ", ".join(sorted(available)) or "none"
        raise PluginError(f"plugins.enabled: unknown plugin {name!r} (available: {offered})")
    if len(candidates) > 1:
        origins = "; ".join(candidate.origin for candidate in candidates)
        raise PluginError(f"plugins.enabled: plugin {name!r} is defined more than once ({origins}); rename one")
    candidate = candidates[0]
    try:
        loaded = candidate.load()
    except Exception as exc:
        raise PluginError(
            f"plugin {name!r}: cannot load {candidate.origin}: {type(exc).__name__}: {exc} "
            "(install or fix it, or remove it from plugins.enabled)"
        ) from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Plugin)):
        raise PluginError(f"plugin {name!r}: {candidate.origin} is not a Plugin subclass")
    if getattr(loaded, "name", None) != name:
        raise PluginError(f"plugin {name!r}: {candidate.origin} is named {getattr(loaded, 'name', None)!r}")
    return loaded


def _instantiate(plugin_cls: type[Plugin], raw_config: object) -> Plugin:
    """Validate the plugin's config section against its schema and build the plugin."""
    name = plugin_cls.name
    settings = _validate_config(plugin_cls, raw_config)
    try:
        return plugin_cls(settings)
    except Exception as exc:
        raise PluginError(f"plugin {name!r}: could not be created: {type(exc).__name__}: {exc}") from exc


def _validate_config(plugin_cls: type[Plugin], raw_config: object) -> BaseModel | None:
    """The schema instance for ``raw_config``; an empty section counts as no config."""
    name = plugin_cls.name
    schema = plugin_cls.config_schema
    if schema is None:
        if raw_config:
            raise PluginError(f"plugins.config.{name}: plugin {name!r} takes no settings (remove this section)")
        return None
    try:
        return schema.model_validate(raw_config or {})
    except ValidationError as exc:
        raise PluginError(_describe(name, exc)) from None


def _describe(name: str, error: ValidationError) -> str:
    """One line per bad key, with the full config path so the user can find it."""
    lines = []
    for item in error.errors():
        key = ".".join(["plugins", "config", name, *(str(part) for part in item["loc"])])
        if item["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key (check its spelling)")
        elif item["type"] == "missing":
            lines.append(f"{key}: {item['msg']}")
        else:
            lines.append(f"{key}: {item['msg']} (got {item.get('input')!r})")
    return f"invalid configuration for plugin {name!r}:\n  " + "\n  ".join(lines)
