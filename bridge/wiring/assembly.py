"""The bot as config.yaml describes it: the channels and plugins it enables, and ``membridge run`` /
``membridge chat``, which build a :class:`~bridge.wiring.runtime.Bridge` of them and run it."""

from __future__ import annotations

from collections.abc import Callable

from channels import Channel
from plugins import PluginRegistry

from .. import offload
from .app import Services
from .runtime import Bridge


def build_channels(services: Services, bridge_stop: Callable[[], None], *, terminal_only: bool = False,
                   notice: str | None = None) -> list[Channel]:
    """The channels config.yaml enables (or the terminal alone, for ``membridge chat``); ``notice``
    is said under the terminal chat's banner."""
    config = services.config.channels
    channels: list[Channel] = []
    if terminal_only or config.terminal.enabled:
        from channels.terminal import TerminalChannel

        user = services.terminal_user()
        banner = (f"membridge — chatting as {user} (memory scope {services.terminal_scope()}). "
                  "/help lists commands; Ctrl-D quits." + (f"\n{notice}" if notice else ""))
        channels.append(TerminalChannel(user, on_close=bridge_stop, banner=banner))
    if terminal_only:
        return channels
    if config.telegram.enabled:
        from channels.telegram import TelegramChannel

        if not config.telegram.token:
            raise ValueError("channels.telegram.enabled is true but channels.telegram.token is empty "
                             "(set TELEGRAM_BOT_TOKEN or the key in config.yaml)")
        telegram = config.telegram
        channels.append(TelegramChannel(
            token=config.telegram.token, base_url=telegram.base_url, mode=telegram.mode, webhook_url=telegram.webhook_url,
            webhook_host=telegram.webhook_host, webhook_port=telegram.webhook_port,
            secret_token=telegram.secret_token, allowed_users=telegram.allowed_users,
            album_wait_s=telegram.album_wait_s,
        ))
    if config.slack.enabled:
        from channels.slack import SlackChannel

        slack = config.slack
        if not slack.bot_token:
            raise ValueError("channels.slack.enabled is true but channels.slack.bot_token is empty "
                             "(set SLACK_BOT_TOKEN or the key in config.yaml)")
        channels.append(SlackChannel(
            bot_token=slack.bot_token, app_token=slack.app_token, signing_secret=slack.signing_secret,
            api_url=slack.api_url, host=slack.host, port=slack.port, thread_scope=slack.thread_scope,
            progress=slack.progress,
        ))
    if not channels:
        raise ValueError("no channel is enabled: enable channels.terminal, channels.telegram or channels.slack")
    return channels


def build_plugins(services: Services) -> PluginRegistry:
    settings = services.config.plugins
    return PluginRegistry.load(settings.enabled, settings.dirs, settings.config)


async def run_bot(services: Services, *, terminal_only: bool = False) -> None:
    """``membridge run`` / ``membridge chat``: build, run until a signal or Ctrl-D, stop cleanly."""
    holder: list[Bridge] = []
    chat = terminal_only or services.config.channels.terminal.enabled
    notice = await _llm_notice(services) if chat else None
    channels = build_channels(services, lambda: holder[0].request_stop(), terminal_only=terminal_only, notice=notice)
    bridge = Bridge(services, channels, build_plugins(services))
    holder.append(bridge)
    await bridge.run(timer=not terminal_only)


async def _llm_notice(services: Services) -> str | None:
    """What the terminal chat says about its LLM before the first message: that none is connected
    (the memory-only stand-in answers), or why the configured one does not answer (3 s at most)."""
    from ..llm import probe_llm
    from ..offline import BANNER, MemoryOnlyLLM

    if isinstance(services.llm, MemoryOnlyLLM):
        return BANNER
    try:
        await offload.run(probe_llm, services.config.llm, 3.0)
    except Exception as exc:
        return f"note: {exc}. Chat needs an LLM; /memory commands work without one."
    return None
