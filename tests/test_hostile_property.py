"""Issue 34, Deliver 6: random corruption of an export, a result bundle (folder, .tar.gz, .zip) and a manifest
never yields a traceback, a different score or a written file (hypothesis; seed and example counts fixed below).

Each example corrupts a fresh copy (bytes flipped or cut, a JSON field replaced or deleted, a table value changed,
with or without its hashes recomputed) and reads it the way `sveb eval --build` and `sveb leaderboard add` do.
It must be refused with a one-line SvebError, leaving every file as it was, or, where the corruption did not touch
what is scored (a label, a Parquet statistic, a gzip header field), give exactly the original's score or key."""

import io
import json
import math
import shutil
import tarfile
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, reject, seed, settings
from hypothesis import strategies as st
from rich.console import Console

from sveb import store
from sveb.core.errors import SvebError

SEED = 34
EXAMPLES = 40  # per property: about 25 s for the three on 2 cores
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
QUIET = Console(file=io.StringIO())
TABLES = ("problems", "rollouts", "states", "references")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A scripted build, its pristine export, a grpo bundle of it (folder, .tar.gz, .zip), and the originals:
    each table's hash, grpo's held-out score on the export, the bundle's key."""
    from dataclasses import replace

    from sveb import board
    from sveb.board.submit import submit
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.engines.scripted import ScriptedEngine
    from sveb.evaluate import evaluate
    from sveb.sample.pipeline import build
    from sveb.store.export import export_build
    from tests.helpers.sources import write_chain_source
    tmp = tmp_path_factory.mktemp("hostile")
    cfg = BuildConfig(domain="number", model="smollm2-135m", source=str(write_chain_source(tmp / "dapo.jsonl")),
                      problems=3, oversample=3, rollouts=6, states_per_problem=2, mc=6, mc_extra=2, min_acc=0.1,
                      max_acc=0.9, seed=3, min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200),
                      engine="scripted")
    bdir = build(replace(cfg), tmp / "root", engine=ScriptedEngine(), console=QUIET)
    weights = tmp / "model"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"weights")
    ex = export_build(bdir, tmp / "export", model_dir=weights)
    scored = tmp / "scored-export"
    shutil.copytree(ex, scored)
    row = evaluate(scored, "grpo", {}, "held-out", console=QUIET)
    bundle = submit(bdir, "grpo", {}, ["held-out"], tmp / "bundle", archive="tar.gz", console=QUIET)
    shutil.make_archive(str(tmp / "bundle"), "zip", root_dir=tmp, base_dir="bundle")
    key, status = board.add(tmp / "board0", bundle, [ex])
    assert status == "added"
    return {"tmp": tmp, "export": ex, "bundle": bundle, "tar": tmp / "bundle.tar.gz", "zip": tmp / "bundle.zip",
            "hashes": {t: store.table_hash(ex / t) for t in TABLES}, "mae": row["mae"], "key": key}


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- mutations: each a function of a path, drawn by hypothesis -------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)
# numbers no reward, reference or estimate may be
BAD_NUMBER = st.one_of(st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")),
                       st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
                       st.floats(max_value=0.0, exclude_max=True, allow_infinity=False))


def flip(files):
    @st.composite
    def draw(d):
        name, where, byte = d(st.sampled_from(files)), d(st.floats(0, 1, exclude_max=True)), d(st.integers(1, 255))

        def apply(root: Path):
            p = root / name
            b = bytearray(p.read_bytes())
            i = int(where * len(b))
            b[i] ^= byte
            p.write_bytes(bytes(b))
        return f"flip {name}@{where:.3f}^{byte}", apply
    return draw()


def cut(files):
    @st.composite
    def draw(d):
        name, keep = d(st.sampled_from(files)), d(st.floats(0, 1, exclude_max=True))

        def apply(root: Path):
            p = root / name
            b = p.read_bytes()
            p.write_bytes(b[:int(keep * len(b))])
        return f"cut {name} to {keep:.3f}", apply
    return draw()


def json_edit(name, paths):
    """Replace (with any JSON value) or delete the value at one of `paths`, or the whole document."""
    @st.composite
    def draw(d):
        path, delete, value = d(st.sampled_from(paths)), d(st.booleans()), d(JSON)

        def apply(root: Path):
            p = root / name
            doc = json.loads(p.read_text())
            if not path:
                p.write_text(json.dumps(value))
                return
            node = doc
            for k in path[:-1]:
                node = node[k]
            if delete:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
            p.write_text(json.dumps(doc))
        return f"{name}: {'delete' if delete else 'set'} {'.'.join(path) or '(all)'} = {value!r}"[:200], apply
    return draw()


def _holdable(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x <= 1


def table_value(table, columns, rehash):
    """Change one value of a table; rehash: rewrite the export's hashes too (an export consistent with itself,
    holding a value no reward or reference may have)."""
    @st.composite
    def draw(d):
        col, where = d(st.sampled_from(columns)), d(st.floats(0, 1, exclude_max=True))
        value = d(BAD_NUMBER) if rehash else d(st.floats() | st.integers(-3, 3))

        def apply(root: Path):
            path = next((root / table).glob("part-*.parquet"))
            t = pq.read_table(path)
            rows = t.to_pylist()
            i = int(where * len(rows))
            if isinstance(rows[i][col], list):
                rows[i][col] = [value] + rows[i][col][1:]
            elif rows[i][col] == value:
                rows[i][col] = 0.5 if value != 0.5 else 0.25
            else:
                rows[i][col] = value
            try:
                changed = pa.Table.from_pylist(rows, schema=t.schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                reject()  # a value the column cannot hold: no file could carry it
            stored = changed.column(col)[i].as_py()
            first = (lambda x: x[0] if isinstance(x, list) else x)  # noqa: E731
            if rehash and _holdable(first(stored)) and not _holdable(first(rows[i][col])):
                reject()  # the column rounds it into range (1 + 2e-16 in float32 is 1.0): not the value drawn
            pq.write_table(changed, path)
            if rehash and (root / "manifest.json").exists():
                m = json.loads((root / "manifest.json").read_text())
                m["export"]["tables"][table]["sha256"] = store.table_hash(root / table)
                m["export"]["content_hash"] = store.content_hash(root)
                (root / "manifest.json").write_text(json.dumps(m))
        return f"{table}.{col}[{where:.3f}] = {value!r}" + (" (rehashed)" if rehash else ""), apply
    return draw()


EXPORT_FILES = ["manifest.json"] + [f"{t}/part-00000.parquet" for t in TABLES]
MANIFEST_PATHS = [(), ("export",), ("export", "tables"), ("export", "content_hash"), ("model",), ("domain",),
                  ("build_fp",), ("status",), ("config",), ("truncated",)] + \
                 [("export", "tables", t) for t in TABLES] + [("export", "tables", t, "sha256") for t in TABLES]
EXPORT_MUTATIONS = st.one_of(
    flip(EXPORT_FILES), cut(EXPORT_FILES), json_edit("manifest.json", MANIFEST_PATHS),
    table_value("references", ["value", "mc_rewards", "extra_rewards", "n_ref"], rehash=False),
    table_value("references", ["value", "mc_rewards", "extra_rewards"], rehash=True),
    table_value("rollouts", ["reward"], rehash=True), table_value("rollouts", ["reward"], rehash=False))


@seed(SEED)
@SETTINGS
@given(mutation=EXPORT_MUTATIONS)
def test_a_corrupted_export_is_refused_or_scores_as_the_original(world, mutation):
    from sveb.evaluate import evaluate
    from sveb.store.builds import open_build
    what, apply = mutation
    d = Path(tempfile.mkdtemp(dir=world["tmp"], prefix="ex-")) / "export"
    try:
        shutil.copytree(world["export"], d)
        apply(d)
        before = snapshot(d)
        try:
            bdir = open_build(str(d), world["tmp"])
            row = evaluate(bdir, "grpo", {}, "held-out", console=QUIET)
        except SvebError as e:
            assert "\n" not in str(e), (what, str(e))
            assert snapshot(d) == before, what  # refused: nothing written
            return
        # accepted: only where what is scored is untouched
        assert {t: store.table_hash(d / t) for t in TABLES} == world["hashes"], what
        assert row["mae"] == world["mae"], what
    finally:
        shutil.rmtree(d.parent, ignore_errors=True)


BUNDLE_PATHS = [(), ("key",), ("format",), ("format_version",), ("estimator",), ("estimator", "name"),
                ("estimator", "params"), ("estimator", "target"), ("estimator", "provenance"),
                ("estimator", "provenance", "kind"), ("build",), ("build", "content_hash"), ("build", "tables"),
                ("cost",), ("machine",)]


def estimate_value(column, values):
    @st.composite
    def draw(d):
        where, value = d(st.floats(0, 1, exclude_max=True)), d(values)

        def apply(root: Path):
            path = root / "estimates.parquet"
            t = pq.read_table(path)
            rows = t.to_pylist()
            i = int(where * len(rows))
            if rows[i][column] == value or (value != value and rows[i][column] != rows[i][column]):
                return  # no change: the original bundle
            rows[i][column] = value
            try:
                changed = pa.Table.from_pylist(rows, schema=t.schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                reject()
            pq.write_table(changed, path)
        return f"estimates.{column}[{where:.3f}] = {value!r}", apply
    return draw()


FOLDER_MUTATIONS = st.one_of(
    flip(["bundle.json", "estimates.parquet"]), cut(["bundle.json", "estimates.parquet"]),
    json_edit("bundle.json", BUNDLE_PATHS),
    estimate_value("value", st.floats() | st.integers(-2, 2)), estimate_value("own_shift", st.floats()),
    estimate_value("state_id", st.none() | st.text(max_size=16)),
    estimate_value("protocol", st.none() | st.sampled_from(["in-group", "held-out", ""]) | st.text(max_size=8)))


def _board_add(world, bundle, what):
    """leaderboard add on a new board: refused in one line with no board written, or the original's key."""
    from sveb import board
    lb = bundle.parent / "board"
    try:
        key, status = board.add(lb, bundle, [world["export"]])
    except SvebError as e:
        assert "\n" not in str(e), (what, str(e))
        assert not lb.exists(), what  # refused: nothing written
        return
    assert key == world["key"] and status == "added", what


@seed(SEED)
@SETTINGS
@given(mutation=FOLDER_MUTATIONS)
def test_a_corrupted_bundle_folder_is_refused_or_is_the_original(world, mutation):
    what, apply = mutation
    d = Path(tempfile.mkdtemp(dir=world["tmp"], prefix="bf-"))
    try:
        shutil.copytree(world["bundle"], d / "bundle")
        apply(d / "bundle")
        _board_add(world, d / "bundle", what)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@seed(SEED)
@SETTINGS
@given(kind=st.sampled_from(["tar", "zip"]), mutation=st.one_of(flip(["archive"]), cut(["archive"])))
def test_a_corrupted_bundle_archive_is_refused_or_is_the_original(world, kind, mutation):
    what, apply = mutation
    d = Path(tempfile.mkdtemp(dir=world["tmp"], prefix="ba-"))
    try:
        shutil.copyfile(world[kind], d / "archive")
        apply(d)
        name = d / ("bundle.tar.gz" if kind == "tar" else "bundle.zip")
        (d / "archive").rename(name)
        _board_add(world, name, f"{kind}: {what}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_originals_are_accepted(world, tmp_path):
    """The properties' baseline: the uncorrupted export and bundles go through (so a refusal above is the
    corruption's doing)."""
    for kind in ("bundle", "tar", "zip"):
        d = tmp_path / kind
        d.mkdir()
        src = world[kind]
        dst = d / src.name
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
        _board_add(world, dst, kind)
        assert (d / "board" / "bundles" / world["key"]).is_dir()
    assert tarfile.is_tarfile(world["tar"])
