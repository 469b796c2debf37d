"""BuildConfig.from_manifest: the manifest's config typed, old and imported manifests included."""

import dataclasses
import json

import pytest

from sveb.core.config import MAX_TOKENS, BuildConfig, SamplingConfig
from sveb.core.errors import ConfigError, SvebError
from sveb.store.hista_io import import_hista_json


def manifest_of(cfg: BuildConfig) -> dict:
    """As sveb/sample/pipeline.py writes it, read back from JSON (tuples become lists)."""
    return json.loads(json.dumps({"config": dataclasses.asdict(cfg), "model": cfg.model, "domain": cfg.domain}))


def test_round_trip_with_asdict():
    cfg = BuildConfig(domain="math", split="train", problems=50, step_pairs=True, min_acc=0.2, fields=(("q", "p"),),
                      sampling=SamplingConfig(temperature=1.0, max_tokens=256), protocol="paper", engine="scripted")
    assert BuildConfig.from_manifest(manifest_of(cfg)) == cfg
    assert BuildConfig.from_manifest(manifest_of(BuildConfig())) == BuildConfig()


def test_an_old_manifest_takes_the_defaults_the_old_code_assumed():
    old = manifest_of(BuildConfig(domain="code", seed=2))
    for newer in ("protocol", "dtype", "step_pairs", "screen", "min_tests", "fields", "split"):
        del old["config"][newer]
    del old["config"]["sampling"]["max_tokens"]
    old["config"]["removed_knob"] = 3  # a field an older version had: ignored
    cfg = BuildConfig.from_manifest(old)
    assert (cfg.split, cfg.protocol, cfg.sampling.max_tokens, cfg.domain, cfg.seed) == ("test", "sveb", 512, "code", 2)
    assert MAX_TOKENS == 512
    assert BuildConfig.from_manifest({"model": "m", "domain": "general"}) == BuildConfig(model="m", domain="general")


def test_a_hista_json_import_has_a_partial_config(tmp_path):
    rec = {"problem": "What is 2 + 3?", "solution": "5", "verifier": "default", "correct_responses": ["\\boxed{5}"],
           "wrong_responses": ["\\boxed{6}"], "response": "\\boxed{5}", "sampled_response": "\\box",
           "output_reward": 1.0, "unbiased_state_value": 0.5, "unbiased_state_value_noise": []}
    path = tmp_path / "g.json"
    path.write_text(json.dumps([rec, {**rec, "problem": "What is 1 + 1?", "solution": "2",
                                      "wrong_responses": ["\\boxed{3}", "\\boxed{4}"]}]))
    b = import_hista_json(path, tmp_path / "b", model="Qwen/Qwen2.5-1.5B-Instruct")
    m = json.loads((b / "manifest.json").read_text())
    assert m["config"]["rollouts"] is None  # group sizes differ: not one G
    cfg = BuildConfig.from_manifest(m)
    assert (cfg.split, cfg.source, cfg.domain, cfg.model) == ("test", "hista-json=g.json", "math",
                                                              "Qwen/Qwen2.5-1.5B-Instruct")
    assert (cfg.rollouts, cfg.mc, cfg.mc_extra, cfg.protocol) == (BuildConfig.rollouts, 20, 0, "sveb")


@pytest.mark.parametrize("config, key", [({"problems": "8"}, "config.problems"),
                                         ({"step_pairs": 1}, "config.step_pairs"),
                                         ({"seed": True}, "config.seed"), ({"min_acc": "low"}, "config.min_acc"),
                                         ({"sampling": {"max_tokens": 1.5}}, "config.sampling.max_tokens"),
                                         ({"sampling": [512]}, "config.sampling"),
                                         ({"fields": ["q"]}, "config.fields")])
def test_a_wrong_type_is_one_line_naming_the_key(config, key):
    with pytest.raises(ConfigError) as e:
        BuildConfig.from_manifest({"config": config})
    assert isinstance(e.value, SvebError) and key in str(e.value) and "\n" not in str(e.value)
    assert BuildConfig.from_manifest({"config": {"min_acc": 0}}).min_acc == 0.0  # an int where a float goes is fine
