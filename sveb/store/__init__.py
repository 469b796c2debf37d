"""Sharded Parquet store: `<root>/<model_slug>/<domain>/<build_fp>/<table>/part-NNNNN.parquet`.

Hands on the names of its modules: files (atomic writes, writable checks), shards (tables and their hashes) and
manifest (a build's manifest.json, the builds under a folder).
"""

from sveb.store.files import (
    StoreError,
    atomic_write_bytes,
    check_own_out,
    check_writable,
    make_shared,
    staged_dir,
    writable,
)
from sveb.store.handle import Build
from sveb.store.manifest import (
    MANIFEST_TYPES,
    Manifest,
    complete,
    list_builds,
    load_manifest,
    read_manifest,
    write_manifest,
)
from sveb.store.shards import (
    CONTENT_KEYS,
    CONTENT_TABLES,
    FP_KEY,
    build_dir,
    content_hash,
    read_shard,
    read_table,
    shard_done,
    shard_fp,
    shard_path,
    table_hash,
    write_shard,
)
