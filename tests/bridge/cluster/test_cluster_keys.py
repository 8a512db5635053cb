"""Which shard a scope goes to, and a message's form on the stream."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fakes.slack_server import BOT_TOKEN as SLACK_TOKEN
from fakes.slack_server import FakeSlack
from fakes.telegram_server import TOKEN as TELEGRAM_TOKEN
from fakes.telegram_server import FakeTelegram
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot, Update

from bridge.cluster.keys import Keys, decode_message, encode_message, shard_config, shard_of
from bridge.cluster.worker import compact, fair_share
from bridge.config import parse_config
from channels import Attachment, IncomingMessage
from channels.slack import SlackChannel
from channels.slack_files import attachments_of as slack_attachments
from channels.telegram import TelegramChannel
from channels.telegram_files import attachments_of as telegram_attachments

SCOPES = ["telegram-42", "slack-T1-chat-C9", "global"]


def test_a_scope_has_the_same_shard_in_every_process() -> None:
    assert [shard_of(scope, 64) for scope in SCOPES] == [34, 52, 29]
    code = f"from bridge.cluster.keys import shard_of; print([shard_of(s, 64) for s in {SCOPES!r}])"
    for seed in ("1", "2"):  # Python's own str hash differs with the seed; ours must not
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert out.strip() == "[34, 52, 29]"


def test_scopes_spread_over_the_shards() -> None:
    counts = [0] * 8
    for user in range(800):
        counts[shard_of(f"telegram-{user}", 8)] += 1
    assert min(counts) > 60 and max(counts) < 140


def test_a_message_round_trips_and_keeps_only_plain_raw_data() -> None:
    slack = IncomingMessage(channel="slack", chat_id="C1", chat_type="group", user_id="U1", user_name="ann",
                            text="héllo", message_id="1.2", thread_id="1.0", team="T1", received_at=5.0,
                            raw={"type": "slash_command", "response_url": "https://hooks/x"})
    assert decode_message(encode_message(slack)) == slack
    assert decode_message(encode_message(slack)).raw == slack.raw
    telegram = IncomingMessage(channel="telegram", chat_id="7", chat_type="direct", user_id="7", user_name="bo",
                               text="hi", message_id="3", raw=object())
    assert decode_message(encode_message(telegram)).raw is None


def _message(channel: str, attachments: tuple[Attachment, ...]) -> IncomingMessage:
    return IncomingMessage(channel=channel, chat_id="7", chat_type="direct", user_id="7", user_name="bo", text="",
                           message_id="3", attachments=attachments)


async def test_slack_files_cross_the_queue_as_ids_and_are_read_by_the_workers_channel() -> None:
    async with FakeSlack() as slack:
        pdf = slack.host_file(b"%PDF-1.7 rules", name="rules.pdf", mimetype="application/pdf")
        client = AsyncWebClient(token=SLACK_TOKEN, base_url=slack.api_url)
        payload = encode_message(_message("slack", slack_attachments({"files": [pdf]}, client=client,
                                                                     bot_token=SLACK_TOKEN)))
        worker = SlackChannel(bot_token=SLACK_TOKEN, signing_secret="secret", api_url=slack.api_url)

        [attachment] = decode_message(payload, {"slack": worker}).attachments

        assert "PDF" not in payload  # file ids, never bytes
        assert (attachment.kind, attachment.name, attachment.size) == ("document", "rules.pdf", 14)
        assert await attachment.read(1000) == b"%PDF-1.7 rules"
        with pytest.raises(ValueError, match="not enabled here"):
            decode_message(payload, {})


async def test_telegram_files_cross_the_queue_as_ids_and_are_read_by_the_workers_channel() -> None:
    async with FakeTelegram() as telegram:
        voice = {**telegram.host_file(b"OggS-voice"), "duration": 4, "mime_type": "audio/ogg"}
        receiver_bot = Bot(TELEGRAM_TOKEN, base_url=telegram.base_url)
        update = Update.de_json(telegram.message_update(7, 7, {"voice": voice}), receiver_bot)
        assert update is not None and update.message is not None
        payload = encode_message(_message("telegram", telegram_attachments(update.message, receiver_bot)))
        worker = TelegramChannel(token=TELEGRAM_TOKEN, base_url=telegram.base_url)
        await worker.connect()
        try:
            [attachment] = decode_message(payload, {"telegram": worker}).attachments
            assert (attachment.kind, attachment.size, attachment.duration_s) == ("voice", 10, 4.0)
            assert await attachment.read(1000) == b"OggS-voice"
        finally:
            await worker.stop()


def test_keys_carry_the_prefix() -> None:
    keys = Keys("mb")
    assert (keys.stream(3), keys.lease(3), keys.seen("telegram::7:3")) == (
        "mb:shard:3", "mb:lease:3", "mb:seen:telegram::7:3")


def test_fair_shares_add_up_and_differ_by_one_at_most() -> None:
    for workers in (["a"], ["a", "b"], ["a", "b", "c"], [f"w{i}" for i in range(7)]):
        shares = [fair_share(64, workers, me) for me in workers]
        assert sum(shares) == 64 and max(shares) - min(shares) <= 1
    assert fair_share(8, ["a", "b"], "c") == 2  # a worker not yet seen counts itself


def test_compact_shard_lists() -> None:
    assert compact([7, 0, 1, 2, 5]) == "0-2,5,7"
    assert compact([]) == "none"


def test_a_shard_runs_in_its_own_workspace_with_its_own_vectors_prefix(tmp_path) -> None:
    config = parse_config({"cluster": {"root": str(tmp_path / "cluster")},
                           "memory": {"vectors": {"uri": "s3://bucket/bot/", "storage_options": {"allow_http": "true"}}}})
    shard = shard_config(config, 7)
    assert shard.workspace == str(tmp_path / "cluster" / "shards" / "7")
    assert shard.memory.vectors.uri == "s3://bucket/bot/shards/7"
    assert shard.memory.vectors.storage_options == {"allow_http": "true"}
    assert config.memory.vectors.uri == "s3://bucket/bot/"  # the deployment's own config is left as it was
    assert shard_config(parse_config({}), 7).memory.vectors.uri is None  # vectors stay in the shard's folder


def test_an_entry_id_says_when_it_was_appended() -> None:
    from bridge.cluster.keys import appended_at

    assert appended_at("1765065600123-7") == 1765065600.123

