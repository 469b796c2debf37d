"""A build's content hash depends on its rows, not on how they are sharded or named."""

import pyarrow as pa

from sveb import store


def _write(dir_, rows_per_shard):
    for k, rows in enumerate(rows_per_shard):
        store.write_shard(store.shard_path(dir_, k), pa.Table.from_pylist(rows), f"fp{k}")


def test_table_hash_ignores_shard_layout_and_sees_a_changed_value(tmp_path):
    rows = [{"state_id": f"s{i}", "value": i / 10} for i in range(6)]
    _write(tmp_path / "a" / "states", [rows[:2], rows[2:]])
    _write(tmp_path / "b" / "states", [rows[3:][::-1], rows[:3]])
    assert store.table_hash(tmp_path / "a" / "states") == store.table_hash(tmp_path / "b" / "states")
    changed = [dict(r) for r in rows]
    changed[4]["value"] = 0.41
    _write(tmp_path / "c" / "states", [changed])
    assert store.table_hash(tmp_path / "c" / "states") != store.table_hash(tmp_path / "a" / "states")
