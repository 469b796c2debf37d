"""The small demo presets run vLLM eager (a machine's first start would compile for longer than eager decoding
costs them); the large ones compile; `--eager/--no-eager` overrides; the engine is started as the config says."""

import pytest

from sveb.experiment.presets import EAGER, PRESETS, preset_configs


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_preset_has_its_default_and_the_flag_overrides_it(preset):
    tests, train = preset_configs(preset, "number", "vllm", [0, 1])
    want = preset in ("demo", "quick")
    assert EAGER.get(preset, False) is want
    assert all(c.eager is want for c in [*tests, train])
    for flag in (True, False):
        tests, train = preset_configs(preset, "number", "vllm", [0], eager=flag)
        assert all(c.eager is flag for c in [*tests, train])


def test_eager_leaves_every_fingerprint_alone():
    from sveb.sample.rules import stage_fps
    (a,), _ = preset_configs("demo", "number", "vllm", eager=True)
    (b,), _ = preset_configs("demo", "number", "vllm", eager=False)
    assert a.eager != b.eager and stage_fps(a) == stage_fps(b)


@pytest.mark.parametrize("flag", [True, False])
def test_the_sampler_starts_the_engine_as_the_config_says(tmp_path, monkeypatch, flag):
    import sveb.engines
    import sveb.experiment.runner as runner
    from sveb.experiment.runner import Sampler
    calls = []
    monkeypatch.setattr(runner, "resolve", lambda model: model)  # no weights are read: the engine is a stand-in
    monkeypatch.setattr(sveb.engines, "make_engine", lambda *a, **k: calls.append(k) or object())
    (cfg,), _ = preset_configs("demo", "number", "vllm", eager=flag)
    Sampler("vllm").ready(cfg, tmp_path / "root")
    assert len(calls) == 1 and calls[0]["eager"] is flag


def test_the_demo_command_passes_the_flag(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import sveb.experiment.demo as demo
    from sveb.cli import app
    seen = []
    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: seen.append(a[-1]))
    for args, want in (([], None), (["--eager"], True), (["--no-eager"], False)):
        r = CliRunner().invoke(app, ["demo", "--root", str(tmp_path), *args])
        assert r.exit_code == 0, r.output
        assert seen[-1] is want
