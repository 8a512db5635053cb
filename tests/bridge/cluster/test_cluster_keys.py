"""Which shard a scope goes to, and a message's form on the stream."""

from __future__ import annotations

import os
import subprocess
import sys

from bridge.cluster.keys import Keys, decode_message, encode_message, shard_of
from bridge.cluster.worker import compact, fair_share
from channels import IncomingMessage

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
