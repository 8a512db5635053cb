"""The LanceDB backend on a real table in a temp directory."""

from __future__ import annotations

import numpy as np
import pytest

from memory.vectors.backend import LanceDBBackend, VectorRow
from memory.vectors.embedding import normalise

DIM = 16


def rows(count: int) -> list[VectorRow]:
    vectors = normalise(np.random.default_rng(3).normal(size=(count, DIM)))
    return [VectorRow(f"c{i}", "alice" if i % 2 else "it's", f"memory/{i}.md", vectors[i]) for i in range(count)]


@pytest.mark.parametrize(("ram_bytes", "built"), [(0, True), (2000 * DIM * 4, False)])
def test_an_ann_index_is_built_only_past_what_ram_serves(tmp_path, ram_bytes, built) -> None:
    backend = LanceDBBackend(tmp_path / "vectors", "m", ann_threshold=256, ram_bytes=ram_bytes)
    backend.upsert(rows(1000))
    backend.maintain()
    backend.wait_for_index(120)
    table = backend._open()
    assert ("IVF_PQ" in LanceDBBackend._index_types(table)) is built
    query = rows(1000)[7].vector
    hits = backend.search(query, ["alice"], 5)  # with or without the index, the row itself comes first
    assert hits[0][0] == "c7" and hits[0][1] == pytest.approx(1.0, abs=1e-3)


def test_scope_filter_quotes_values_and_delete_removes(tmp_path) -> None:
    backend = LanceDBBackend(tmp_path / "vectors", "m")
    data = rows(20)
    backend.upsert(data)
    assert {cid for cid, _ in backend.search(data[0].vector, ["it's"], 50, exact=True)} == {f"c{i}" for i in range(0, 20, 2)}
    backend.delete_ids(["c0", "c2"])
    assert backend.count() == 18 and "c0" not in backend.ids()


def test_a_table_left_half_created_by_a_killed_process_is_replaced(tmp_path) -> None:
    backend = LanceDBBackend(tmp_path / "vectors", "m")
    leftover = tmp_path / "vectors" / f"{backend._name}.lance"
    (leftover / "_versions").mkdir(parents=True)  # what a SIGKILL inside create_table leaves
    (leftover / "data").mkdir()
    fresh = LanceDBBackend(tmp_path / "vectors", "m")
    assert fresh.search(rows(1)[0].vector, ["alice"], 5) == [] and fresh.count() == 0
    fresh.upsert(rows(10))
    assert fresh.count() == 10
    assert LanceDBBackend(tmp_path / "vectors", "m").count() == 10  # and another process opens it
