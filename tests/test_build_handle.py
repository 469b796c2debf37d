"""A build is a handle (issue 61 item 4): sveb.store.Build (folder, typed manifest parsed once, tables read lazily),
and the walk of `sveb eval --estimator grpo --build <export>` parses the build's manifest once."""

import json
import shutil
from pathlib import Path

import pytest

from sveb import store
from sveb.store import Build, Manifest, StoreError

EXPORT = Path("results/table4/exports/number")  # a committed frozen build


@pytest.fixture
def export(tmp_path):
    dst = tmp_path / "number"
    shutil.copytree(EXPORT, dst)
    return dst


def count_reads(monkeypatch) -> list[Path]:
    """Every parse of a manifest.json, by the build folder it was read from."""
    seen, real = [], store.manifest.read_manifest
    monkeypatch.setattr(store.manifest, "read_manifest", lambda bdir: seen.append(Path(bdir)) or real(bdir))
    return seen


def test_manifest_typed_fields_and_mapping():
    raw = json.loads((EXPORT / "manifest.json").read_text())
    m = store.load_manifest(EXPORT)
    assert (m.model, m.domain, m.build_fp, m.status) == (raw["model"], raw["domain"], raw["build_fp"], "complete")
    assert (m.n_problems, m.n_states, m.truncated) == (raw["n_problems"], raw["n_states"], raw["truncated"])
    assert m.complete and m.is_export and m.content_hash == raw["export"]["content_hash"]
    assert m.config.split == "test" and m.config.seed == raw["config"]["seed"]
    # still a mapping: plugins' manifest["model"], dict(...) and == against the parsed JSON keep working
    assert m["model"] == raw["model"] and m.get("nope") is None and dict(m) == raw and m == raw


def test_manifest_of_a_build_made_here_has_no_export():
    m = Manifest({"model": "x", "status": "running", "truncated": None})
    assert not m.is_export and not m.complete and m.content_hash is None and m.truncated == {}
    assert m.config.split == "test"  # a missing config takes BuildConfig's defaults


def test_build_reads_its_manifest_once_and_frozen_tables_once(export, monkeypatch):
    reads = count_reads(monkeypatch)
    b = Build(export)
    assert reads == []  # lazy: nothing read until asked
    assert b.manifest.model == b.manifest["model"] and b.manifest.build_fp
    t1, t2 = b.table("problems"), b.table("problems")
    assert t1 is t2 and t1.num_rows == b.manifest.n_problems
    assert reads == [export]
    mirror = b.at(export.parent / "elsewhere")
    assert mirror.manifest is b.manifest and mirror.path != b.path and reads == [export]


def test_build_is_path_like_for_older_callers(export):
    b = Build(export)
    assert Path(b) == export and str(b) == str(export) and b / "states" == export / "states" and b.name == "number"
    assert Build.of(b) is b and Build.of(export) == b and f"{b}: x" == f"{export}: x"


def test_result_shards_round_trip(export):
    import pyarrow as pa
    b = Build(export)
    assert b.stored("scratch", "mine", "fp1") is None and b.stored_any("scratch", "mine") == []
    b.store("scratch", "mine", pa.table({"x": [1.5]}), "fp1")
    assert b.stored("scratch", "mine", "fp1") == [{"x": 1.5}] and b.stored("scratch", "mine", "fp2") is None
    assert b.stored_any("scratch", "mine") == [{"x": 1.5}] and b.table("scratch").num_rows == 1
    b.store("scratch", "more", pa.table({"x": [2.5]}), "fp1")
    assert b.table("scratch").num_rows == 2  # a results table is read afresh (not kept like a frozen one)


def test_a_broken_manifest_is_the_same_one_line_error(tmp_path):
    (tmp_path / "manifest.json").write_text("[1]")
    with pytest.raises(StoreError, match=r"manifest.json: malformed manifest \(a JSON list"):
        _ = Build(tmp_path).manifest


def test_the_estimator_walk_parses_the_manifest_once(export):
    """`sveb eval --estimator grpo --build <export> --force`, board included: the build's manifest.json is parsed
    once, and the code outside the store calls the store's package face (sveb.store.X) at 5 places at most (the
    rest goes through the Build handle). Before the handle: 15 parses at 12 places, 17 package-face call sites."""
    from tools.store_trace import trace
    got = trace(["eval", "--estimator", "grpo", "--build", str(export), "--force"])
    mine = {k: n for k, n in got["reads"].items() if k[1] == export.resolve()}
    assert sum(mine.values()) == 1, mine
    assert len(got["via_face"]) <= 5, sorted(got["via_face"])
    assert any(k.endswith("-> locate_build") for k in got["entries"])  # the walk did run through the store


def test_no_string_keyed_manifest_lookups_outside_the_store():
    """The typed Manifest is read by attribute (manifest.model, not manifest["model"]) everywhere but where a manifest
    is parsed: store/, and BuildConfig.from_manifest (core/config.py), which types its config section
    (tools/manifest_lookups.py: 89 lookups outside store/ before the handle)."""
    from tools.manifest_lookups import scan
    found = {f: hits for f, hits in scan(Path("sveb")).items() if Path(f) != Path("sveb/core/config.py")}
    assert found == {}, found


def test_the_lookup_scan_finds_what_it_forbids(tmp_path):
    (tmp_path / "a.py").write_text("def f(b):\n    m = read_manifest(b)\n    return m['model'], m.get('domain')\n"
                                   "def g(data):\n    return data.manifest['build_fp'], data.manifest.model\n")
    from tools.manifest_lookups import scan
    assert [line for line, _ in scan(tmp_path)[str(tmp_path / "a.py")]] == [3, 3, 5]


@pytest.fixture
def seeds(tmp_path):
    """The committed number exports of seeds 0-2, laid out as in a clone (results/table4/exports/<name>)."""
    root = tmp_path / "results" / "table4" / "exports"
    for name in ("number", "number-seed1", "number-seed2"):
        shutil.copytree(EXPORT.parent / name, root / name)
    return root


def test_compare_leaderboard_submit_and_board_open_each_build_once(seeds, tmp_path):
    """`sveb compare` (one build, --seeds), `sveb leaderboard`, `sveb submit` and `sveb leaderboard add` open each
    build once as a Build and hand it down: every build's manifest.json is parsed once per command, its scope
    caption's sibling lookups included. Before (paths passed, manifests re-read): 2, 3, 7, 6 and 4 parses."""
    from tools.store_trace import trace
    allow = ["--allow-unequal-seeds", "--allow-mixed-dtype"]
    names = ("number", "number-seed1", "number-seed2")
    one = ["--root", str(seeds), "--domain", "number", "--build", str(seeds / "number")]
    runs = {
        "compare": (["compare", "-a", "grpo", "-b", "mcs-1", *one], names[:1]),
        "compare --seeds": (["compare", "-a", "grpo", "-b", "mcs-1", "--root", str(seeds), "--domain", "number",
                             "--seeds", "0,1,2", *allow], names),
        "leaderboard": (["leaderboard", "--root", str(seeds), "--out", str(tmp_path / "lb.csv"), *allow], names),
        "submit": (["submit", "-e", "grpo", *one, "--out", str(tmp_path / "bundle")], names[:1]),
        "leaderboard add": (["leaderboard", "add", str(tmp_path / "bundle"), "--board", str(tmp_path / "board"),
                             "--build", str(seeds / "number")], names[:1]),
    }
    for what, (argv, read) in runs.items():
        got = trace(argv)
        mine = {}
        for (_, path), n in got["reads"].items():
            if path.is_relative_to(tmp_path):
                mine[path.name] = mine.get(path.name, 0) + n
        assert mine == dict.fromkeys(read, 1), (what, mine, sorted(got["reads"]))
    assert (tmp_path / "lb.csv").stat().st_size and (tmp_path / "board" / "scores.parquet").exists()
