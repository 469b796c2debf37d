"""Issue 34: careless and hostile input. Each failure the issue lists, as a test: one clear line (exit 1, no
traceback) naming what is actually wrong, before any model, engine or hidden-state pass starts."""

import json
import sys
import time

import pytest

from tests.helpers.cli import cli, edit_manifest, files_of, forge_table, one_line_error, refused

# ---- 1. misleading errors -------------------------------------------------------------------------------------

def test_a_wrong_build_path_says_so_not_no_complete_build(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    a_file = tmp_path / "build.txt"
    a_file.write_text("not a build")
    no_manifest = tmp_path / "export"
    (no_manifest / "references").mkdir(parents=True)
    cases = {tmp_path / "no-such-build": "no such folder", a_file: "is a file, not a build or export folder",
             no_manifest: "holds no manifest.json"}
    for spec, msg in cases.items():
        text = one_line_error(cli("eval", "--root", root, "--build", spec), f"--build {spec}", msg)
        assert "no complete build" not in text
    one_line_error(cli("eval", "--root", root, "--build", "./nowhere"), "--build ./nowhere: no such folder")


def test_an_unknown_domain_gets_a_did_you_mean(tmp_path):
    one_line_error(cli("eval", "--root", tmp_path, "--domain", "maths"), "--domain maths: unknown domain",
                   "did you mean math?")
    from sveb.core.config import BuildConfig
    from sveb.core.errors import BuildError
    from sveb.sample.rules import validate
    with pytest.raises(BuildError, match="did you mean math"):
        validate(BuildConfig(domain="maths"))


def test_a_path_like_model_is_never_sent_to_the_hub(tmp_path, monkeypatch):
    import huggingface_hub

    from sveb.core.models import ModelError, check_model, resolve

    def no_hub(*a, **k):
        raise AssertionError("sent to the hub")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    monkeypatch.setattr(huggingface_hub.HfApi, "auth_check", no_hub)
    for spec in ("./no_such_model", "../x/y", str(tmp_path / "none"), "~/no_such_model"):
        for fn in (lambda s: check_model(s, weights=False), check_model, resolve):
            with pytest.raises(ModelError, match="no such directory"):
                fn(spec)
    a_file = tmp_path / "weights.bin"
    a_file.write_bytes(b"x")
    with pytest.raises(ModelError, match="is a file, not a model directory"):
        resolve(str(a_file))
    one_line_error(cli("eval", "--model", "./no_such_model", "--root", tmp_path),
                   "--model ./no_such_model: no such directory")


def test_import_of_a_missing_path_says_it_does_not_exist(tmp_path):
    one_line_error(cli("import", "/nonexistent", "--out", tmp_path / "x"), "/nonexistent: no such folder")
    assert not (tmp_path / "x").exists()


def test_ls_builds_of_a_missing_root_is_an_error(tmp_path):
    one_line_error(cli("ls", "builds", "--root", tmp_path / "nonexistent"), "no such folder")
    (tmp_path / "f").write_text("")
    one_line_error(cli("ls", "builds", "--root", tmp_path / "f"), "is a file")
    assert cli("ls", "builds", "--root", tmp_path).exit_code == 0


@pytest.mark.parametrize("speed", ["-100", "0", "nan"])
def test_plan_refuses_a_non_positive_speed(speed):
    one_line_error(cli("plan", "--tok-per-s", speed, "--domains", "number"), "--tok-per-s", "must be a positive")


def test_ray_to_an_unknown_host_fails_fast():
    from sveb.sample.distributed import RayError, RayOptions, connect
    t0 = time.monotonic()
    for address in ("nohost:1", "ray://nohost:10001", "127.0.0.1:1"):
        with pytest.raises(RayError, match=f"--ray {address}: cannot reach"):
            connect(RayOptions(address=address))
    with pytest.raises(RayError, match="expected host:port"):
        connect(RayOptions(address="nohost"))
    assert time.monotonic() - t0 < 30


def test_an_import_path_resolves_from_the_modules_own_folder(tmp_path, monkeypatch):
    """The README's `sveb eval -e my_estimators:GroupMedian` run where my_estimators.py lies: the `sveb` script's
    sys.path holds its bin folder, not the current directory."""
    import os

    from sveb.estimators import make
    (tmp_path / "my_estimators_i34.py").write_text(
        "from dataclasses import dataclass\nimport numpy as np\nfrom sveb.estimators.base import Estimator\n\n"
        "@dataclass\nclass GroupMedian(Estimator):\n    empty: float = 0.5\n\n"
        "    def estimate(self, group, states):\n        return np.full(len(states), self.empty)\n")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd(), str(tmp_path))])
    monkeypatch.chdir(tmp_path)
    est = make("my_estimators_i34:GroupMedian", {"empty": "0.25"})
    assert est.empty == 0.25


# ---- 2. cheap checks before expensive work ---------------------------------------------------------------------

def test_demo_checks_its_domains_before_the_engine_starts(tmp_path, monkeypatch):
    import sveb.core.signals
    import sveb.engines

    def no_engine(*a, **k):
        raise AssertionError("the engine was started")
    monkeypatch.setattr(sveb.engines, "make_engine", no_engine)
    monkeypatch.setattr(sveb.core.signals, "install", lambda: None)
    one_line_error(cli("demo", "--domains", "maths", "--root", tmp_path / "root", "--results", tmp_path / "res"),
                   "--domain maths: unknown domain", "did you mean math?")
    one_line_error(cli("demo", "--domains", "number maths", "--root", tmp_path / "root", "--results",
                       tmp_path / "res"), "--domain maths")
    assert not (tmp_path / "root").exists() and not (tmp_path / "res").exists()


@pytest.mark.parametrize("param, msg", [("max_k=-3", "hista: -P max_k=-3: must be >= 1"),
                                        ("k=-3", "-P k: unknown parameter for estimator 'hista'")])
def test_hista_parameters_fail_before_the_model_loads(tmp_path, monkeypatch, param, msg):
    import sveb.lm.hidden

    class NoModel:
        def __init__(self, *a, **k):
            raise AssertionError("the model was loaded")
    monkeypatch.setattr(sveb.lm.hidden, "HiddenStates", NoModel)
    one_line_error(cli("eval", "-e", "hista", "-P", param, "--root", tmp_path), msg)


from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from sveb.estimators.base import Estimator  # noqa: E402


@dataclass
class OneTooMany(Estimator):
    def estimate(self, group, states):
        return np.full(len(states) + 1, 0.5)


@dataclass
class OneTooFew(Estimator):
    def estimate(self, group, states):
        return np.full(len(states) - 1, 0.5)


@pytest.mark.parametrize("cls", ["OneTooMany", "OneTooFew"])
@pytest.mark.parametrize("protocol", ["held-out", "in-group"])
def test_an_estimator_returning_the_wrong_number_of_values_is_refused(scripted_build, cls, protocol):
    root, bdir = scripted_build
    name = f"test_hostile_input_on_cpu:{cls}"
    one_line_error(cli("eval", "-e", name, "--protocol", protocol, "--build", bdir),
                   f"estimator {name} returned", "expected one value per state")
    assert not list((bdir / "estimates").glob(f"*{cls}*"))


# ---- 3. export trust -------------------------------------------------------------------------------------------

@pytest.fixture
def export_dir(scripted_build, tmp_path):
    from sveb.store.export import export_build
    root, bdir = scripted_build
    weights = tmp_path / "model"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"weights")
    (weights / "config.json").write_text("{}")
    return export_build(bdir, tmp_path / "export", model_dir=weights)


def test_an_export_without_its_table_hashes_is_refused(export_dir):
    def drop_references(m):
        del m["export"]["tables"]["references"]
        return m
    edit_manifest(export_dir, drop_references)
    refused(export_dir, "no hash for table references")


def test_an_export_without_its_export_section_is_refused(export_dir):
    edit_manifest(export_dir, lambda m: {k: v for k, v in m.items() if k != "export"})
    refused(export_dir, "no export table hashes", "not written by `sveb build`")


@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (1.5, "1.5"), (-0.25, "-0.25")])
def test_a_reference_outside_0_1_is_refused_before_scoring(export_dir, value, shown):
    def bad(rows):
        rows[0]["value"] = value
        return rows
    forge_table(export_dir, "references", bad)
    refused(export_dir, "the reference of state", f"is {shown}, not a finite number in [0, 1]")


def test_a_reward_outside_0_1_is_refused_before_scoring(export_dir):
    def bad(rows):
        rows[2]["reward"] = 2.0
        return rows
    forge_table(export_dir, "rollouts", bad)
    refused(export_dir, "has reward 2.0, not a finite number in [0, 1]")


@pytest.mark.parametrize("fn, msg", [
    (lambda m: [], "malformed manifest (a JSON list, expected an object)"),
    (lambda m: {**m, "config": "oops"}, "malformed manifest (config is \"oops\", expected an object)"),
    (lambda m: {k: v for k, v in m.items() if k != "model"}, "no model"),
    (lambda m: {**m, "status": "running"}, "status 'running'"),
    (lambda m: {**m, "export": {**m["export"], "content_hash": "0" * 16}}, "is not the hash of its tables"),
    (lambda m: {**m, "export": {**m["export"], "tables": {**m["export"]["tables"], "../x": {"sha256": "0"}}}},
     "unknown table '../x'"),
    (lambda m: {**m, "export": {**m["export"], "tables": []}}, "no export table hashes"),
    (lambda m: {**m, "export": "x"}, "malformed manifest (export is"),
])
def test_a_malformed_manifest_is_one_line_and_writes_nothing(export_dir, fn, msg):
    edit_manifest(export_dir, fn)
    refused(export_dir, msg)


def test_expect_pins_the_content_hash(export_dir, tmp_path):
    from sveb import store
    real = store.read_manifest(export_dir)["export"]["content_hash"]
    refused(export_dir, "--expect 0123456789abcdef: build", f"has content hash {real}", "not the build you pinned",
            args=("--expect", "0123456789abcdef"))
    refused(export_dir, "--expect xyz: expected a content hash", args=("--expect", "xyz"))
    r = cli("eval", "--build", export_dir, "-e", "grpo", "--expect", real[:10])
    assert r.exit_code == 0, r.output
    r = cli("submit", "-e", "grpo", "--build", export_dir, "--expect", "0123456789abcdef", "--out", tmp_path / "b")
    assert r.exit_code == 1 and "not the build you pinned" in r.output and not (tmp_path / "b").exists()


# ---- 4. read-only storage --------------------------------------------------------------------------------------

def _can_mount_read_only(tmp_path) -> bool:
    """A real read-only file system (EROFS, which stops root too): a private mount namespace with a read-only
    bind mount. Not every machine allows it (the test is skipped there; the simulated ones below still run)."""
    import shutil
    import subprocess
    if not shutil.which("unshare"):
        return False
    d = tmp_path / "probe-ro"
    d.mkdir()
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && "
                        f"! touch {d}/x 2>/dev/null"], capture_output=True)
    return r.returncode == 0 and not (d / "x").exists()


def test_read_only_storage_reads_and_refuses_writes_in_one_line(scripted_build, export_dir, tmp_path):
    import os
    import shlex
    import shutil
    import subprocess
    if not _can_mount_read_only(tmp_path):
        pytest.skip("no read-only bind mount here (unshare -m)")
    root, bdir = scripted_build
    ro, w = tmp_path / "ro", tmp_path / "w"
    ro.mkdir()
    w.mkdir()
    shutil.move(str(export_dir), ro / "export")
    shutil.copytree(root, ro / "root")
    (ro / "board").mkdir()
    before = files_of(ro)
    py = shlex.quote(sys.executable)
    cmds = {  # name: (arguments, cache, expected rc, fragment of the one error line)
        "eval": (f"eval --build {ro}/export -e grpo", w / "cache", 0, None),
        "eval-again": (f"eval --build {ro}/export -e grpo", w / "cache", 0, None),
        "submit": (f"submit -e grpo --build {ro}/export --out {w}/bundle", w / "cache", 0, None),
        "leaderboard-read": (f"leaderboard --build {ro}/export --out {w}/lb.csv", w / "cache", 0, None),
        "eval-root": (f"eval --root {ro}/root -e grpo", w / "cache", 0, None),
        "report": (f"report --root {ro}/root --out {ro}/report", w / "cache", 1, f"--out {ro}/report: cannot write"),
        "leaderboard": (f"leaderboard --root {ro}/root --out {ro}/lb.csv", w / "cache", 1,
                        f"--out {ro}/lb.csv: cannot write"),
        "add": (f"leaderboard add {w}/bundle --board {ro}/board --build {ro}/export", w / "cache", 1,
                f"--board {ro}/board: cannot write"),
        "html": (f"leaderboard html --board {ro}/board --out {ro}/site", w / "cache", 1, f"--out {ro}/site: cannot"),
        "export": (f"export --root {ro}/root --out {ro}/exp2", w / "cache", 1, f"--out {ro}/exp2: cannot write"),
        "cache-read-only": (f"eval --build {ro}/export -e mcs-2", ro / "cache", 1,
                            "is read-only and its scores go to the cache"),
    }
    script = [f"mount --bind {ro} {ro}", f"mount -o remount,bind,ro {ro}"]
    for name, (args, cache, _, _) in cmds.items():
        script.append(f"SVEB_CACHE={cache} {py} -m sveb.cli {args} >{w}/{name}.out 2>&1; echo $? >{w}/{name}.rc")
    env = {**os.environ, "SVEB_NO_WATCHDOG": "1", "COLUMNS": "200"}
    subprocess.run(["unshare", "-m", "sh", "-c", " && ".join(script[:2]) + "; " + "; ".join(script[2:])],
                   check=True, env=env, timeout=600)
    for name, (_, _, rc, fragment) in cmds.items():
        output = (w / f"{name}.out").read_text()
        assert int((w / f"{name}.rc").read_text()) == rc, (name, output)
        assert "Traceback" not in output, (name, output)
        if fragment:
            errors = [x for x in output.splitlines() if x.startswith("error:")]
            assert len(errors) == 1 and fragment in errors[0], (name, output)
    assert files_of(ro) == before  # nothing written on the read-only side
    mirrors = list((w / "cache" / "readonly").glob("*/export"))
    assert len(mirrors) == 1 and list((mirrors[0] / "scores").glob("part-*.parquet"))
    assert "is read-only: its scores go to" in (w / "eval.out").read_text()
    assert "grpo" in (w / "leaderboard-read.out").read_text()
    from sveb.board.bundle import read_bundle
    meta, table = read_bundle(w / "bundle")
    assert table.num_rows > 0 and meta["estimator"]["name"] == "grpo"


def test_a_read_only_export_is_scored_in_a_writable_mirror(export_dir, tmp_path, monkeypatch):
    """The same on any machine: the export reported read-only (as os.access says on read-only storage)."""
    from sveb import store
    from sveb.store.builds import results_view
    real = store.writable
    monkeypatch.setattr(store, "writable", lambda p: not str(p).startswith(str(export_dir)) and real(p))
    monkeypatch.setenv("SVEB_CACHE", str(tmp_path / "cache"))
    before = files_of(export_dir)
    r = cli("eval", "--build", export_dir, "-e", "grpo")
    assert r.exit_code == 0, r.output
    mirror = results_view(export_dir)
    assert mirror != export_dir and list((mirror / "scores").glob("part-*.parquet"))
    assert files_of(export_dir) == before
    r = cli("submit", "-e", "grpo", "--build", export_dir, "--protocol", "held-out", "--out", tmp_path / "bundle")
    assert r.exit_code == 0, r.output
    assert files_of(export_dir) == before


def test_a_write_refused_by_storage_is_one_line(tmp_path, monkeypatch, scripted_build):
    import errno

    import sveb.present.leaderboard
    root, bdir = scripted_build
    assert cli("eval", "--root", root, "-e", "grpo").exit_code == 0

    def refuse(rows, path):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(sveb.present.leaderboard, "write_csv", refuse)
    one_line_error(cli("leaderboard", "--root", root, "--out", tmp_path / "lb.csv"),
                   f"cannot write {tmp_path / 'lb.csv'}: Read-only file system")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    one_line_error(cli("report", "--root", root, "--out", a_file / "report"), f"{a_file} is a file, not a folder")


# ---- 5. archives -----------------------------------------------------------------------------------------------

@pytest.fixture
def two_bundles(scripted_build, tmp_path):
    root, bdir = scripted_build
    out = {}
    for name in ("grpo", "mcs-2"):
        r = cli("submit", "-e", name, "--root", root, "--build", bdir.name, "--out", tmp_path / f"b-{name}")
        assert r.exit_code == 0, r.output
        out[name] = tmp_path / f"b-{name}"
    return bdir, out


def _tar_declaring(path, members):
    """A .tar.gz of headers only: each (name, declared size, type) with no data after it (a bomb's first bytes)."""
    import gzip
    import tarfile
    buf = b""
    for i, (name, size, kind) in enumerate(members):
        info = tarfile.TarInfo(name)
        info.size, info.type = size, kind
        buf += info.tobuf(format=tarfile.GNU_FORMAT)
        if i < len(members) - 1:  # the data of every member but the last (the bomb's is never there)
            buf += b"{}".ljust(-(-size // 512) * 512, b"\0") if size else b""
    path.write_bytes(gzip.compress(buf + b"\0" * 1024))
    return path


def test_an_archive_over_the_limit_is_refused_before_anything_is_unpacked(two_bundles, tmp_path, monkeypatch):
    import tarfile
    import zipfile

    from sveb.board import archive
    bdir, bundles = two_bundles
    lb = tmp_path / "board"

    def never(*a, **k):
        raise AssertionError("something was unpacked")
    monkeypatch.setattr(archive, "_extract_tar", never)
    monkeypatch.setattr(archive, "_extract_zip", never)
    bomb = _tar_declaring(tmp_path / "bomb.tar.gz", [("b/bundle.json", 100, tarfile.REGTYPE),
                                                     ("b/estimates.parquet", 2 ** 31, tarfile.REGTYPE)])
    one_line_error(cli("leaderboard", "add", bomb, "--board", lb, "--build", bdir),
                   "unpacks to more than 256 MiB", "--max-bundle-mb")
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("b/bundle.json", "{}")
        zf.writestr("b/estimates.parquet", b"\0" * (3 * 2 ** 20))  # 3 MiB of zeros: a few KiB packed
    assert big.stat().st_size < 2 ** 20
    one_line_error(cli("leaderboard", "add", big, "--board", lb, "--build", bdir, "--max-bundle-mb", 2),
                   "unpacks to more than 2 MiB")
    one_line_error(cli("leaderboard", "add", big, "--board", lb, "--build", bdir, "--max-bundle-mb", 0.001),
                   "packed, over the 0.001 MiB bundle limit")
    assert not lb.exists()


def test_archive_members_outside_the_bundle_are_refused(tmp_path):
    import io
    import tarfile
    import zipfile

    from sveb.board.archive import unpack
    from sveb.board.bundle import BundleError
    cases = {"abs.tar.gz": [("/etc/bundle.json", 0, tarfile.REGTYPE)],
             "up.tar.gz": [("b/../../bundle.json", 0, tarfile.REGTYPE)],
             "link.tar.gz": [("b/bundle.json", 0, tarfile.SYMTYPE)],
             "dev.tar.gz": [("b/bundle.json", 0, tarfile.CHRTYPE)]}
    msgs = {"abs.tar.gz": "is an absolute path", "up.tar.gz": "points outside the bundle",
            "link.tar.gz": "is a link or a special file", "dev.tar.gz": "is a link or a special file"}
    for name, members in cases.items():
        with pytest.raises(BundleError, match=msgs[name]):
            unpack(_tar_declaring(tmp_path / name, members), tmp_path / f"x-{name}")
    z = tmp_path / "abs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("/abs/bundle.json", "{}")
    with pytest.raises(BundleError, match="is an absolute path"):
        unpack(z, tmp_path / "x-zip")
    z = tmp_path / "link.zip"
    with zipfile.ZipFile(z, "w") as zf:
        info = zipfile.ZipInfo("b/bundle.json")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="is a link or a special file"):
        unpack(z, tmp_path / "x-zip2")
    del io


def test_leaderboard_add_is_all_or_nothing_and_names_the_refused_bundle(two_bundles, tmp_path):
    import shutil
    bdir, bundles = two_bundles
    lb = tmp_path / "board"
    bad = tmp_path / "bad"
    shutil.copytree(bundles["mcs-2"], bad)
    (bad / "estimates.parquet").write_bytes(b"not parquet")
    one_line_error(cli("leaderboard", "add", bundles["grpo"], bad, "--board", lb, "--build", bdir),
                   f"{bad}", "estimates.parquet: unreadable", "nothing was added")
    assert not lb.exists() or not any(lb.rglob("*.json"))
    r = cli("leaderboard", "add", bundles["grpo"], bundles["mcs-2"], "--board", lb, "--build", bdir)
    assert r.exit_code == 0 and r.output.count("added:") == 2, r.output


def test_provenance_the_board_cannot_reproduce_is_self_declared(two_bundles, tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sveb import board
    bdir, bundles = two_bundles
    lb = tmp_path / "board"
    renamed = tmp_path / "renamed"  # mcs-2's values under a new name, claiming builtin provenance
    shutil.copytree(bundles["mcs-2"], renamed)
    from sveb.board.bundle import estimates_key, read_bundle

    def rekey(folder):  # a forger recomputes the bundle's key: it is a checksum, not a signature
        meta, table = read_bundle(folder)
        (folder / "bundle.json").write_text(json.dumps({**meta, "key": estimates_key(meta, table)}))
    m = json.loads((renamed / "bundle.json").read_text())
    m["estimator"]["name"] = "super-estimator"
    (renamed / "bundle.json").write_text(json.dumps(m))
    rekey(renamed)
    nudged = tmp_path / "nudged"  # "builtin grpo" whose values are not grpo's
    shutil.copytree(bundles["grpo"], nudged)
    t = pq.read_table(nudged / "estimates.parquet").to_pylist()
    t[0]["value"] = 0.5 if t[0]["value"] != 0.5 else 0.25
    pq.write_table(pa.Table.from_pylist(t), nudged / "estimates.parquet")
    rekey(nudged)
    got = board.add_all(lb, [bundles["mcs-2"], renamed], [bdir])
    assert [s for _, s in got] == ["added", "added"]
    checks = {r["estimator"]: r["provenance_check"] for r in board.rows(lb) if r.get("kind") == "build"}
    assert checks == {"mcs-2": "verified", "super-estimator": "self-declared"}
    board.add(tmp_path / "board2", nudged, [bdir])
    assert {r["provenance_check"] for r in board.rows(tmp_path / "board2") if r.get("kind") == "build"} == \
        {"self-declared"}
    from sveb.present.site import write_site
    board.add(lb, bundles["grpo"])
    page = write_site(lb, tmp_path / "site").read_text()
    rows = {r.split('"')[1]: "(self-declared)" in r for r in page.split("<tr data-estimator=")[1:]}
    assert rows == {"grpo": False, "mcs-2": False, "super-estimator": True}


# ---- 6. files --------------------------------------------------------------------------------------------------

def test_board_site_and_export_files_follow_the_umask(two_bundles, tmp_path, scripted_build):
    import os
    import stat
    bdir, bundles = two_bundles
    old = os.umask(0o022)
    try:
        lb, site = tmp_path / "board", tmp_path / "site"
        assert cli("leaderboard", "add", *bundles.values(), "--board", lb, "--build", bdir).exit_code == 0
        assert cli("leaderboard", "html", "--board", lb, "--out", site).exit_code == 0
        from sveb.store.export import export_build
        weights = tmp_path / "model"
        weights.mkdir()
        (weights / "model.safetensors").write_bytes(b"w")
        ex = export_build(bdir, tmp_path / "export", model_dir=weights)
        for folder in (lb, site, ex):
            for p in [folder, *folder.rglob("*")]:
                mode = stat.S_IMODE(p.stat().st_mode)
                assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))
    finally:
        os.umask(old)


def test_report_and_html_refuse_a_folder_they_did_not_write(two_bundles, tmp_path, scripted_build):
    root, _ = scripted_build
    bdir, bundles = two_bundles
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    one_line_error(cli("report", "--root", root, "--out", mine), f"--out {mine}: exists, is not empty and was not "
                   "written by `sveb report`", "--force")
    lb = tmp_path / "board"
    assert cli("leaderboard", "add", *bundles.values(), "--board", lb, "--build", bdir).exit_code == 0
    one_line_error(cli("leaderboard", "html", "--board", lb, "--out", mine), "not written by `sveb leaderboard html`")
    assert (mine / "notes.txt").read_text() == "keep me" and sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    # their own earlier output is rewritten; --force writes into the user's folder
    for args in (("report", "--root", root, "--out", tmp_path / "rep"), ("leaderboard", "html", "--board", lb,
                                                                          "--out", tmp_path / "site")):
        assert cli(*args).exit_code == 0
        r = cli(*args)
        assert r.exit_code == 0, r.output
    r = cli("report", "--root", root, "--out", mine, "--force")
    assert r.exit_code == 0 and (mine / "index.html").exists() and (mine / "notes.txt").exists()


def test_a_mistyped_source_leaves_no_stub_build(tmp_path):
    root = tmp_path / "root"
    one_line_error(cli("build", "--source", "gsm8kk", "--domain", "math", "--root", root),
                   "--source gsm8kk", "did you mean gsm8k?")
    assert not root.exists() or not list(root.rglob("manifest.json"))
    r = cli("ls", "builds", "--root", tmp_path)
    assert r.exit_code == 0 and "running" not in r.output
