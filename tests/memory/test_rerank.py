"""The optional reranker against a fake ``/rerank`` server, through the real httpx client.

The fake scores a document by the share of the query's words it holds, so every expected score
below can be worked out by hand. Each failure must give None (the caller keeps its order) with
exactly one WARNING that names the server and the cause and never the API key.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.rerank_server import FakeReranker, Fault, Verbatim

from memory.config import RerankSettings
from memory.retrieval.rerank import Reranker, endpoint_url, make_reranker, reranked_order

KEY = "sk-rerank-secret-0123"
QUERY = "when is the user's birthday"
# The query's words: when, is, the, user, s, birthday. The documents hold 2, 5 and 1 of the 6.
DOCS = ["the user likes green tea", "the user's birthday is on march 12", "hiking in the alps"]
SCORES = [2 / 6, 5 / 6, 1 / 6]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def fake() -> AsyncIterator[FakeReranker]:
    async with FakeReranker(api_key=KEY) as server:
        yield server


def reranker(base_url: str, **overrides: object) -> Reranker:
    options: dict[str, object] = {"api_key": KEY, "model": "bge-reranker-v2-m3", "timeout_s": 5.0, **overrides}
    made = make_reranker(RerankSettings(base_url=base_url, **options))
    assert made is not None
    return made


async def run(made: Reranker, query: str = QUERY, documents: list[str] = DOCS) -> list[float | None] | None:
    """The sync client runs in a worker thread, as search does, so the fake's loop keeps serving."""
    try:
        return await asyncio.to_thread(made.rerank, query, documents)
    finally:
        made.close()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_scores_come_back_in_input_order_with_the_key_as_bearer(fake: FakeReranker, caplog) -> None:
    assert await run(reranker(fake.root + "/v1")) == pytest.approx(SCORES)
    [request] = fake.requests
    assert request.path == "/v1/rerank" and request.authorization == f"Bearer {KEY}"
    assert request.body == {"model": "bge-reranker-v2-m3", "query": QUERY, "documents": DOCS, "top_n": 3}
    assert reranked_order(SCORES) == [1, 0, 2] and warnings(caplog) == []


@pytest.mark.parametrize("suffix, path", [("", "/rerank"), ("/", "/rerank"), ("/v1/", "/v1/rerank"),
                                          ("/v1/rerank", "/v1/rerank"), ("/rerank/", "/rerank")])
async def test_the_base_url_may_end_in_v1_a_slash_or_rerank(fake: FakeReranker, suffix: str, path: str) -> None:
    assert await run(reranker(fake.root + suffix)) == pytest.approx(SCORES)
    assert [r.path for r in fake.requests] == [path]
    assert endpoint_url("https://api.cohere.com/v2") == "https://api.cohere.com/v2/rerank"


async def test_no_key_sends_no_authorization() -> None:
    async with FakeReranker() as server:
        assert await run(reranker(server.root, api_key=None)) == pytest.approx(SCORES)
        assert server.requests[0].authorization is None


async def test_only_the_first_top_n_are_sent_and_the_rest_stay_below(fake: FakeReranker) -> None:
    documents = ["hiking in the alps", "the user's birthday", "the user's birthday is today"]
    scores = await run(reranker(fake.root, top_n=2), documents=documents)
    assert scores == pytest.approx([1 / 6, 4 / 6, None])
    assert fake.requests[0].body["documents"] == documents[:2] and fake.requests[0].body["top_n"] == 2
    assert scores is not None and reranked_order(scores) == [1, 0, 2]


async def test_a_document_the_server_leaves_out_ranks_below_every_scored_one(fake: FakeReranker, caplog) -> None:
    fake.fail_next("omit_last")
    scores = await run(reranker(fake.root))
    assert scores == pytest.approx([*SCORES[:2], None])
    assert reranked_order([None, 0.0, 0.9, None, 0.0]) == [2, 1, 4, 0, 3]
    assert warnings(caplog) == []


async def test_no_documents_make_no_request(fake: FakeReranker) -> None:
    assert await run(reranker(fake.root), documents=[]) == [] and fake.requests == []


FAILURES: list[tuple[Fault, str]] = [
    (500, "HTTP 500: {\"message\": \"fake: 500\"}"),
    (429, "HTTP 429: {\"message\": \"fake: 429\"}"),
    ("garbage", "the reply is not JSON: {\"results\": ["),
    ("bad_index", "the reply names document 8 of the 3 sent"),
]


@pytest.mark.parametrize("fault, cause", FAILURES)
async def test_a_failure_gives_none_one_warning_and_no_retry(fake: FakeReranker, caplog, fault: Fault,
                                                             cause: str) -> None:
    fake.fail_next(fault)
    assert await run(reranker(fake.root + "/v1")) is None
    server = f"{fake.root}/v1/rerank"
    assert warnings(caplog) == [f"rerank server {server} failed, search keeps its order: {cause}"]
    assert len(fake.requests) == 1


@pytest.mark.parametrize("reply, cause", [
    ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]},
     "the reply scores document 0 twice"),
    ({"results": [{"index": "0", "relevance_score": 0.5}]}, "the reply names document '0' of the 3 sent"),
    ({"results": [{"index": True, "relevance_score": 0.5}]}, "the reply names document True of the 3 sent"),
    ({"results": [{"index": 1, "relevance_score": "high"}]},
     "the reply gives document 1 the relevance_score 'high', not a number"),
    ({"results": [{"index": 1, "relevance_score": float("nan")}]},
     "the reply gives document 1 the relevance_score nan, not a number"),
    ({"results": []}, "the reply scores none of the 3 documents"),
    ({"data": []}, "the reply is neither {\"results\": [...]} nor TEI's list: {\"data\": []}"),
    ({"results": [], "padding": "x" * (1 << 20)}, "the reply is over 1048576 bytes"),
    ([{"index": 0, "relevance_score": 0.5}], "the reply gives document 0 the score None, not a number"),
])
async def test_a_reply_that_does_not_fit_is_refused_whole(fake: FakeReranker, caplog, reply: object,
                                                           cause: str) -> None:
    fake.fail_next(Verbatim(reply))
    assert await run(reranker(fake.root)) is None
    assert warnings(caplog) == [f"rerank server {fake.root}/rerank failed, search keeps its order: {cause}"]


async def test_a_refused_key_is_named_by_its_setting_never_by_its_value(fake: FakeReranker, caplog) -> None:
    wrong = "sk-wrong-key-4567"
    assert await run(reranker(fake.root, api_key=wrong)) is None
    [line] = warnings(caplog)
    assert "HTTP 401, the API key was refused (memory.rerank.api_key)" in line
    assert wrong not in caplog.text and KEY not in caplog.text and "***" in line  # the fake echoed it
    assert fake.requests[0].authorization == f"Bearer {wrong}"


@pytest.mark.parametrize("fault", ["hang", "trickle"])
async def test_a_slow_server_is_given_up_on_after_timeout_s(fake: FakeReranker, caplog, fault: Fault) -> None:
    fake.fail_next(fault)
    made = reranker(fake.root, timeout_s=0.5)
    started = time.monotonic()
    assert await run(made) is None
    took = time.monotonic() - started
    assert 0.5 <= took < 0.5 + 1.0, took
    [line] = warnings(caplog)
    expected = "no answer within 0.5 s (ReadTimeout)" if fault == "hang" else "no whole reply within 0.5 s"
    assert line.endswith(expected)


async def test_a_server_that_is_not_there_is_one_warning(caplog) -> None:
    port = free_port()
    assert await run(reranker(f"http://127.0.0.1:{port}")) is None
    [line] = warnings(caplog)
    assert line.startswith(f"rerank server http://127.0.0.1:{port}/rerank failed, search keeps its order: ConnectError")


async def test_the_log_names_the_server_without_its_user_and_password(caplog) -> None:
    async with FakeReranker() as server:
        address = server.root.replace("http://", "http://ann:pw-123456@")
        server.fail_next(503)
        assert await run(reranker(address + "/v1", api_key=None)) is None
    assert warnings(caplog) == [f"rerank server {server.root}/v1/rerank failed, search keeps its order: "
                                "HTTP 503: {\"message\": \"fake: 503\"}"]
    assert "pw-123456" not in caplog.text


async def test_tei_is_recognised_by_its_422_and_spoken_from_then_on(caplog) -> None:
    async with FakeReranker(api_key=KEY, tei=True) as server:
        made = reranker(server.root)
        assert await asyncio.to_thread(made.rerank, QUERY, DOCS) == pytest.approx(SCORES)
        assert await asyncio.to_thread(made.rerank, "green tea", DOCS) == pytest.approx([1.0, 0.0, 0.0])
        made.close()
        bodies = [r.body for r in server.requests]
        assert bodies == [{"model": "bge-reranker-v2-m3", "query": QUERY, "documents": DOCS, "top_n": 3},
                          {"query": QUERY, "texts": DOCS}, {"query": "green tea", "texts": DOCS}]
        assert all(r.authorization == f"Bearer {KEY}" for r in server.requests)
    assert warnings(caplog) == []


async def test_a_422_not_about_texts_is_a_failure_not_a_switch(fake: FakeReranker, caplog) -> None:
    fake.fail_next(422)
    assert await run(reranker(fake.root)) is None
    assert len(fake.requests) == 1 and warnings(caplog)[0].endswith("HTTP 422: {\"message\": \"fake: 422\"}")


def test_building_a_reranker_does_not_import_httpx() -> None:
    code = ("import sys; from memory.config import RerankSettings; from memory.retrieval.rerank import make_reranker; "
            "make_reranker(RerankSettings(base_url='http://127.0.0.1:9')); print('httpx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == "False"


def free_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
