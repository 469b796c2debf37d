"""The committed board and site (results/board, results/site: Table 4's, tools/board_from_table4.py) as a clone
reads them: a board copied away from its builds must not be rewritten by reading it (its paired columns would be
lost), and the site made from it again must be the committed one, byte for byte (bundle archives packed without
times or owners)."""

import shutil
import tarfile
from pathlib import Path

from typer.testing import CliRunner

from sveb.board.bundle import pack_tgz
from sveb.cli import app

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _site(board: Path, out: Path) -> Path:
    r = CliRunner().invoke(app, ["leaderboard", "html", "--board", str(board), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_reading_the_committed_board_without_its_builds_rewrites_nothing(tmp_path):
    board = tmp_path / "board"
    shutil.copytree(RESULTS / "board", board)
    before = {p.name: p.read_bytes() for p in board.glob("scores.*")}
    page = (_site(board, tmp_path / "site") / "index.html").read_text()
    assert {p.name: p.read_bytes() for p in board.glob("scores.*")} == before
    assert "no difference" in page and "baseline" in page  # the stored verdicts, not an unpaired recomputation


def test_the_committed_site_regenerates_identically(tmp_path):
    """The board names its builds relative to itself (../table4/exports/...): laid out as in a clone, the site made
    from it again is the committed one, scope captions included."""
    board = tmp_path / "results" / "board"
    shutil.copytree(RESULTS / "board", board)
    (tmp_path / "results" / "table4").symlink_to(RESULTS / "table4")
    out = _site(board, tmp_path / "site")
    page = (out / "index.html").read_text()
    assert "Scope:" in page and "SmolLM2-135M-Instruct" in page and "builtin generator" in page
    committed = RESULTS / "site"
    names = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    for name in names:
        if not name.endswith(".png"):  # plots: the same files; their pixels follow the plotting library
            assert (out / name).read_bytes() == (committed / name).read_bytes(), name


def test_a_packed_bundle_is_the_same_bytes_every_time_and_unpacks_whole(tmp_path):
    src = tmp_path / "b1"
    (src / "sub").mkdir(parents=True)
    (src / "bundle.json").write_text("{}")
    (src / "sub" / "estimates.parquet").write_bytes(b"x" * 100)
    one = pack_tgz(src, tmp_path / "one.tar.gz").read_bytes()
    (src / "bundle.json").touch()  # a later time stamp
    assert pack_tgz(src, tmp_path / "two.tar.gz").read_bytes() == one
    with tarfile.open(tmp_path / "one.tar.gz") as tf:
        assert sorted(tf.getnames()) == ["b1", "b1/bundle.json", "b1/sub", "b1/sub/estimates.parquet"]
        assert {m.mtime for m in tf.getmembers()} == {0}
