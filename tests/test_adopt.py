"""A new build starts from the shards of a build beside it that shares its early stages (sveb/sample/adopt.py):
another --mc samples only references; another seed shares nothing."""

from dataclasses import replace

from rich.console import Console

from sveb import store
from sveb.engines.scripted import ScriptedEngine
from sveb.sample.pipeline import build


class Counting(ScriptedEngine):
    def __init__(self):
        super().__init__()
        self.descs: dict[str, int] = {}

    def generate(self, requests, params, desc=""):
        self.descs[desc] = self.descs.get(desc, 0) + len(requests)
        return super().generate(requests, params, desc)


def _table(bdir, name):
    return store.read_table(bdir / name).to_pylist()


def test_another_mc_reuses_the_rollouts_and_states(small_cfg, tmp_path):
    cfg = replace(small_cfg, model="smollm2-135m")
    root = tmp_path / "root"
    first = build(cfg, root, engine=ScriptedEngine(), console=Console(quiet=True))
    eng = Counting()
    con = Console(record=True, width=200)
    second = build(replace(cfg, mc=12), root, engine=eng, console=con)
    assert second != first and f"shards of {first.name}" in con.export_text()
    for t in ("candidates", "screens", "rollouts", "states"):
        assert _table(second, t) == _table(first, t)
    refs = _table(second, "references")
    assert {len(r["mc_rewards"]) for r in refs} == {12}
    assert set(eng.descs) and all("refer" in d.lower() for d in eng.descs), eng.descs  # references only
    # another seed: other rollouts, nothing adopted
    eng = Counting()
    third = build(replace(cfg, seed=cfg.seed + 1), root, engine=eng, console=Console(quiet=True))
    assert third not in (first, second) and any("refer" not in d.lower() for d in eng.descs), eng.descs
