"""The leaderboard site from a scripted board: one static page that renders and sorts in a real headless browser
(Debian's chromium), with every estimator, its cost and provenance, the cost plot and a link to each bundle."""

import re
import shutil
import subprocess
import tarfile

import pytest
from typer.testing import CliRunner

from sveb import board
from sveb.board.submit import submit
from sveb.cli import app

NAMES = ("grpo", "numca", "mcs-1", "mcs-4")


@pytest.fixture
def site(scripted_build, tmp_path):
    root, bdir = scripted_build
    lb = tmp_path / "board"
    for name in NAMES:
        board.add(lb, submit(bdir, name, {}, ["held-out", "in-group"], tmp_path / f"b-{name}"), [bdir])
    r = CliRunner().invoke(app, ["leaderboard", "html", "--board", str(lb), "--out", str(tmp_path / "site")])
    assert r.exit_code == 0, r.output
    return tmp_path / "site", lb


def _rows(page: str) -> list[list[tuple[str, str]]]:
    """Per table: (estimator, MAE sort value) of each body row, in page order."""
    out = []
    for body in re.findall(r"<tbody>(.*?)</tbody>", page, re.S):
        out.append(re.findall(r'<tr data-estimator="([^"]+)"><td data-v="[^"]*"[^>]*>.*?</td><td data-v="([^"]*)"',
                              body, re.S))
    return out


def test_site_is_self_contained_and_complete(site):
    out, lb = site
    page = (out / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from the network when viewed
    assert "<script>" in page and "<style>" in page and "cost-number.png" in page
    assert (out / "cost-number.png").stat().st_size > 10_000
    tables = _rows(page)
    assert len(tables) == 2  # one domain x one build x two protocols
    for t in tables:
        assert [n for n, _ in t] == list(("grpo", "numca", "mcs-1", "mcs-4"))  # registry order by default
    for key in {r["bundle"] for r in board.rows(lb)}:  # every bundle linked, and the archive holds it
        assert f'href="bundles/{key}.tar.gz"' in page
        with tarfile.open(out / "bundles" / f"{key}.tar.gz") as tf:
            assert f"{key}/bundle.json" in tf.getnames()
    assert page.count(">builtin: sveb") == 2 * len(NAMES)  # shown once per row


def _browser():
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def test_site_renders_and_sorts_in_a_headless_browser(site, tmp_path):
    exe = _browser()
    if exe is None:
        pytest.skip("no chromium/chrome installed: the site was not checked in a browser (apt-get install chromium)")
    out, _ = site

    def dump(fragment: str) -> str:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run",
                            f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                            (out / "index.html").as_uri() + fragment], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout
    plain, sorted_ = _rows(dump("")), _rows(dump("#sort=mae"))  # the hook clicks the MAE header of every table
    assert len(plain) == len(sorted_) == 2
    for before, after in zip(plain, sorted_):
        assert sorted(n for n, _ in after) == sorted(NAMES)  # every estimator is shown
        assert [float(v) for _, v in after] == sorted(float(v) for _, v in before)  # ascending MAE after the click
        assert [n for n, _ in before] != [n for n, _ in after]  # and the rows really moved
    assert 'class="asc"' in dump("#sort=mae")
