"""The engine registry (sveb.engines.registry): builtin entries, lookups that import nothing heavy, the builtin
engines' fingerprints as they were before the registry, and the one-line errors."""

import importlib.metadata
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

from sveb.core.config import BuildConfig
from sveb.core.errors import BuildError
from sveb.engines import EngineError, registry
from sveb.sample.rules import engine_key, stage_fps, validate


def test_builtin_names_resolve_to_their_classes_declarations():
    """A builtin entry declares its fingerprint and uses_model so that a lookup imports nothing; its class says the
    same (the class is what a plugin's entry reads)."""
    assert [e.name for e in registry.BUILTIN] == ["vllm", "hf", "scripted"]
    for e in registry.BUILTIN:
        cls = e.load()
        assert (cls.fingerprint, cls.uses_model) == (e.fingerprint, e.uses_model), e.name
        assert callable(cls.from_options)
    assert registry.uses_model("vllm") and registry.uses_model("hf") and not registry.uses_model("scripted")


@pytest.mark.parametrize("engine,batch,key,references", [
    ("vllm", 64, "vllm", "86529c69630f"),
    ("hf", 64, "hf/batch=64", "0a69422cd3f7"),
    ("hf", 8, "hf/batch=8", "01bddf684d70"),
    ("scripted", 64, "scripted", "3e0f803fe622"),
])
def test_builtin_engines_keep_the_fingerprints_builds_were_made_with(engine, batch, key, references):
    """Pinned from the code before the registry (commit c657523): an existing build keeps its place. (A bump of
    SCHEMA_VERSION or of the seed draw moves every fingerprint on purpose: repin from the engine_key column then.)"""
    cfg = BuildConfig(engine=engine, batch_size=batch, dtype="float32")
    assert engine_key(cfg) == key
    assert stage_fps(cfg)["references"] == references


def test_the_engine_is_in_the_rollouts_fingerprint_and_vllm_ignores_the_batch_size():
    fps = {e: stage_fps(BuildConfig(engine=e, dtype="float32")) for e in ("vllm", "hf", "scripted")}
    assert len({f["rollouts"] for f in fps.values()}) == 3
    assert len({f["problems"] for f in fps.values()}) == 1  # the problems do not depend on the engine
    assert stage_fps(BuildConfig(engine="vllm", batch_size=8, dtype="float32")) == fps["vllm"]


def test_a_misspelt_engine_is_one_line_with_the_nearest_name():
    with pytest.raises(EngineError, match=r"^--engine vlm: unknown engine; did you mean vllm\? \(or pass module:"):
        registry.entry("vlm")
    with pytest.raises(BuildError, match=r"^--engine zzz: unknown engine; known: vllm, hf, scripted \(or pass"):
        validate(BuildConfig(engine="zzz"))
    with pytest.raises(BuildError, match=r"^--engine no_such_module_j:Toy: cannot load no_such_module_j:Toy \("):
        validate(BuildConfig(engine="no_such_module_j:Toy"))


def test_a_class_that_is_not_an_engine_is_refused_by_name(tmp_path, monkeypatch):
    (tmp_path / "not_an_engine_j.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EngineError, match=r"^--engine not_an_engine_j:Thing: .* is not an engine class"):
        registry.entry("not_an_engine_j:Thing")


def test_a_fingerprint_naming_no_config_field_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "bad_fp_j.py").write_text("class E:\n    fingerprint = '{name}/{no_such_field}'\n"
                                          "    def generate(self, requests, params, desc=''):\n        return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EngineError, match=r"^--engine bad_fp_j:E: its fingerprint template .* names no field"):
        registry.fingerprint_key(BuildConfig(engine="bad_fp_j:E"))


def test_a_plugin_cannot_shadow_a_builtin_engine(monkeypatch):
    eps = [EntryPoint("vllm", "evil_j:Engine", registry.GROUP), EntryPoint("extra-j", "extra_j:E", registry.GROUP)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: eps if group == registry.GROUP else [])
    monkeypatch.setattr(registry, "_PLUGINS", None)
    known = registry.entries()
    assert known["vllm"].target == "sveb.engines.vllm:VLLMEngine" and known["extra-j"].target == "extra_j:E"
    assert registry.names()[:3] == ["vllm", "hf", "scripted"]


def test_lookups_and_fingerprints_import_no_heavy_backend():
    """`import sveb`, a registry lookup and a build's fingerprints load neither vllm, transformers nor torch."""
    code = ("import sys; from sveb.core.config import BuildConfig; from sveb.engines import entry, fingerprint_key; "
            "from sveb.sample.rules import stage_fps, validate; "
            "[entry(n) for n in ('vllm', 'hf', 'scripted')]; "
            "[stage_fps(BuildConfig(engine=n, dtype='float32')) for n in ('vllm', 'hf', 'scripted')]; "
            "validate(BuildConfig(engine='hf')); "
            "print(sorted(m for m in ('vllm', 'transformers', 'torch') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_make_engine_starts_the_scripted_engine_without_a_model():
    from sveb.engines import make_engine
    from sveb.engines.scripted import ScriptedEngine
    eng = make_engine("scripted", "")
    assert isinstance(eng, ScriptedEngine) and eng.tokenizer.decode([104, 105]) == "hi"


def test_ls_engines_lists_the_builtins_and_a_plugin(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from sveb.cli import app
    (tmp_path / "listed_j.py").write_text('class E:\n    """a listed toy"""\n    uses_model = False\n'
                                          '    def generate(self, requests, params, desc=""):\n        return []\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("listed-j", "listed_j:E", registry.GROUP)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: eps if group == registry.GROUP else [])
    monkeypatch.setattr(registry, "_PLUGINS", None)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["ls", "engines"])
    assert r.exit_code == 0, r.output
    rows = {ln.split()[0]: ln for ln in r.output.splitlines() if ln.strip()}
    assert "fingerprint hf/batch={batch_size}" in rows["hf"] and "no model" in rows["scripted"]
    assert "no model" not in rows["vllm"]
    assert "a listed toy" in rows["listed-j"] and "fingerprint {name}" in rows["listed-j"]
    assert "from plugin" in rows["listed-j"]


MODEL_FREE = '''
class Shifted:
    """characters shifted by one: ids that neither a model's tokenizer nor the scripted engine's make"""
    eos_token_id = 0
    def encode(self, text):
        return [ord(c) + 1 for c in text]
    def decode(self, ids):
        return "".join(chr(i - 1) for i in ids)
    def encode_chat(self, messages):
        return self.encode("".join(m["content"] for m in messages))

class Free:
    uses_model = False
    own_tokenizer = Shifted
    def __init__(self, options):
        self.tokenizer = Shifted()
    def generate(self, requests, params, desc=""):
        return []

class Modelled(Free):
    uses_model = True   # declares a tokenizer too, but reads its model: its builds' models have their own
'''


def test_a_registered_model_free_engine_is_read_as_one_by_caption_judge_and_tokenizer(tmp_path, monkeypatch):
    """The engine's declaration (uses_model = False, own_tokenizer), not its name, decides what the scope caption
    says of its builds' model, and which tokenizer the judge and sveb.estimators.lm_read read a stand-in model
    without a tokenizer with: a toy registered by entry point gets scripted's treatment with no edit to SVEB."""
    from sveb.core.errors import UsageError
    from sveb.core.manifest import Manifest
    from sveb.estimators import make
    from sveb.estimators.lm_read import load_tokenizer
    from sveb.lm.checkpoints import release_resident
    from sveb.present import scope
    from sveb.store import Build
    from tests.helpers.tiny_llama import tiny_llama
    monkeypatch.setenv("SVEB_CPU_DTYPE", "float32")
    (tmp_path / "free_j.py").write_text(MODEL_FREE)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("free-j", "free_j:Free", registry.GROUP), EntryPoint("modelled-j", "free_j:Modelled",
                                                                            registry.GROUP)]
    real = importlib.metadata.entry_points  # torch and transformers read their own groups on import
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda **kw: eps if kw.get("group") == registry.GROUP else real(**kw))
    monkeypatch.setattr(registry, "_PLUGINS", None)
    assert registry.model_free("free-j") and registry.model_free("scripted")
    assert not registry.model_free("modelled-j") and not registry.model_free("vllm")
    # a name registered nowhere (a plugin not installed here, a module:Class path in a manifest) imports nothing
    assert not registry.model_free("free_j:Free") and not registry.model_free("gone-j")

    def policy(engine):
        return scope.derive([{"model": "m", "config": {"engine": engine}}])["policy"]
    assert policy("free-j") == "m (the engine free-j: no language model)"
    assert policy("scripted") == "m (SVEB's scripted test engine: no language model)"  # as before the registry
    assert policy("modelled-j") == policy("vllm") == policy("free_j:Free") == "m (Hugging Face hub)"

    folder = tiny_llama(tmp_path / "llama")  # weights only: no tokenizer
    assert type(load_tokenizer(folder, "free-j")).__name__ == "Shifted"
    assert type(load_tokenizer(folder, "scripted")).__name__ == "CharTokenizer"
    for engine in ("modelled-j", "vllm", ""):
        with pytest.raises(UsageError, match=r"^model .*llama: no tokenizer could be loaded"):
            load_tokenizer(folder, engine)

    def judged(engine):
        est = make("judge")
        est.load(Build(tmp_path / engine, Manifest({"model": folder, "config": {"engine": engine}})), None)
        return est
    try:
        est = judged("free-j")  # the policy as judge: its answer words read with the toy's ids
        assert type(est._tok).__name__ == "Shifted"
        assert (est._yes, est._no) == ([ord("Y") + 1, ord("y") + 1], [ord("N") + 1, ord("n") + 1])
        assert judged("scripted")._yes == [ord("Y"), ord("y")]
        with pytest.raises(UsageError, match="no tokenizer could be loaded"):
            judged("modelled-j")
    finally:
        release_resident()
