"""The Hista/Numca authors' data files, both ways: `sveb export --format hista-json` of a scripted build, `sveb import
--format hista-json` back (same grpo and numca scores), a hand-written file, malformed records refused in one line with
nothing written, and their input records {problem, solution, verifier} as the build source `hista-json=PATH`."""

import hashlib
import json
import math
import random

import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.estimators import BUILTIN
from sveb.evaluate import evaluate
from sveb.store.hista_io import export_hista_json, import_hista_json
from sveb.store.hista_json import KEYS, HistaJsonError, noise_maes, refusal, solution_of, verifier_of

SCORE_KEYS = ("n_states", "n_problems", "mae", "mae_ci_low", "mae_ci_high", "rmse", "debiased_mse", "ref_noise",
              "oracle_floor", "own_share", "bias", "calib_slope", "concordance", "sign_agreement", "sign_pairs")


def rec(problem="What is 2 + 3?", response="I add. 2 + 3 = 5. The answer is \\boxed{5}.", cut=10, **kw):
    r = {"problem": problem, "solution": "5", "verifier": "default", "correct_responses": [response],
         "wrong_responses": ["2 + 3 = 6. The answer is \\boxed{6}.", "I guess \\boxed{7}."], "response": response,
         "sampled_response": response[:cut], "output_reward": 1.0, "unbiased_state_value": 0.65,
         "unbiased_state_value_noise": []}
    return {**r, **kw}


def hand_written():
    """Two problems, three states: a response already in its pool, one appended (reward 1: 0.7 > 0.5), one appended
    with reward 0 (0.2); the second problem has no correct response."""
    fresh = "2 + 3 is 5, so \\boxed{5}."
    return [rec(),
            rec(response=fresh, cut=8, output_reward=0.7, unbiased_state_value=0.9,
                unbiased_state_value_noise=[0.1, 0.05, 0.0]),
            rec(problem="What is 7 * 6?", solution="42", correct_responses=[], wrong_responses=["\\boxed{41}"],
                response="7 * 6 = 43, \\boxed{43}", cut=9, output_reward=0.2, unbiased_state_value=0.1)]


def write(path, records):
    path.write_text(json.dumps(records))
    return path


@pytest.fixture
def round_trip(scripted_build, tmp_path):
    root, bdir = scripted_build
    path, n, recut = export_hista_json(bdir, tmp_path / "sveb.json")
    imported = import_hista_json(path, tmp_path / "imported", domain="number")
    return bdir, path, imported


def test_export_writes_the_authors_records(round_trip):
    bdir, path, _ = round_trip
    records = json.loads(path.read_text())
    states = store.read_table(bdir / "states").to_pylist()
    refs = {r["state_id"]: r for r in store.read_table(bdir / "references").to_pylist()}
    assert len(records) == len(states) and all(list(r) == list(KEYS) for r in records)
    for r, s in zip(records, states):
        assert r["verifier"] == "default" and r["response"].startswith(r["sampled_response"])
        assert r["sampled_response"] == s["prefix_text"]
        assert r["unbiased_state_value"] == pytest.approx(refs[s["state_id"]]["value"])
        assert len(r["unbiased_state_value_noise"]) == refs[s["state_id"]]["n_ref"] == 10
        assert r["unbiased_state_value_noise"][-1] == pytest.approx(0.0)  # all n draws: the target itself
        assert len(r["correct_responses"]) + len(r["wrong_responses"]) == 8  # G rollouts


def _on_a_repeated_response(bdir) -> bool:
    """Some state's rollout has the same text as an earlier rollout of its problem. The authors' records keep a
    state's response text, not its rollout index, so the import puts such a state on the first rollout of that
    text: its step pairs (states of one rollout) can then differ, and only they."""
    texts: dict[str, list[str]] = {}
    for r in sorted(store.read_table(bdir / "rollouts").to_pylist(), key=lambda r: r["rollout_idx"]):
        texts.setdefault(r["problem_id"], []).append(r["response_text"])
    return any(texts[s["problem_id"]].index(texts[s["problem_id"]][s["rollout_idx"]]) != s["rollout_idx"]
               for s in store.read_table(bdir / "states").to_pylist())


def test_export_then_import_gives_identical_grpo_and_numca_scores(round_trip):
    bdir, _, imported = round_trip
    keys = [k for k in SCORE_KEYS if not (_on_a_repeated_response(bdir) and k.startswith("sign_"))]
    for name in ("grpo", "numca"):
        for protocol in ("held-out", "in-group"):
            a = evaluate(bdir, name, {}, protocol)
            b = evaluate(imported, name, {}, protocol)
            assert {k: a[k] for k in keys} == pytest.approx({k: b[k] for k in keys}, nan_ok=True), name
    assert store.content_hash(imported) == store.read_manifest(imported)["export"]["content_hash"]


def test_import_then_export_gives_the_file_back(round_trip, tmp_path):
    _, path, imported = round_trip
    again, _, _ = export_hista_json(imported, tmp_path / "again.json")
    assert json.loads(again.read_text()) == json.loads(path.read_text())
    with pytest.raises(HistaJsonError, match="exists"):
        export_hista_json(imported, again)


def test_a_hand_written_file_imports_and_scores(tmp_path):
    path = write(tmp_path / "generated.json", hand_written())
    r = CliRunner().invoke(app, ["import", "--format", "hista-json", str(path), "--out", str(tmp_path / "b"),
                                 "--model", "Qwen/Qwen2.5-1.5B-Instruct"])
    assert r.exit_code == 0, r.output
    b = tmp_path / "b"
    m = store.read_manifest(b)
    assert m["export"]["format"] == "hista-json" and m["model"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert m["export"]["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert m["export"]["t_unit"] == "characters" and m["domain"] == "math"  # verifier "default"
    rolls = store.read_table(b / "rollouts").to_pylist()
    first = [(x["response_text"], x["reward"]) for x in rolls[:4]]
    assert [w for _, w in first] == [1.0, 0.0, 0.0, 1.0]  # correct, wrong, wrong, the appended response (0.7 > 0.5)
    assert rolls[-1]["reward"] == 0.0 and len(rolls) == 6  # 0.2 -> 0
    states = store.read_table(b / "states").to_pylist()
    assert [(s["rollout_idx"], s["t"]) for s in states] == [(0, 10), (3, 8), (1, 9)]
    assert states[0]["prefix_text"] == hand_written()[0]["response"][:10]
    refs = store.read_table(b / "references").to_pylist()
    assert [(x["value"], x["n_ref"], x["mc_rewards"]) for x in refs] == [(0.65, 20, []), (0.9, 3, []), (0.1, 20, [])]
    problems = store.read_table(b / "problems").to_pylist()
    assert [json.loads(p["meta"])["verifier"] for p in problems] == ["default", "default"]
    assert [p["answer"] for p in problems] == ["5", "42"]
    r = CliRunner().invoke(app, ["eval", "--build", str(b), "-e", "grpo", "-e", "numca", "--protocol", "held-out",
                                 "--protocol", "in-group"])
    assert r.exit_code == 0, r.output
    est = {x["state_id"]: x["value"] for x in store.read_table(b / "estimates").to_pylist()
           if x["estimator"] == "grpo" and x["protocol"] == "held-out"}
    assert est[states[0]["state_id"]] == pytest.approx(1 / 3)  # wrong, wrong, appended: its own rollout held out
    assert est[states[2]["state_id"]] == pytest.approx(0.0)
    from sveb.score.pooling import base_view
    assert base_view(b, [])[0].seeds == [None]  # the authors' file records no seed: none is claimed
    m = store.read_manifest(b)
    for config in ({**(m.get("config") or {}), "seed": None}, {**(m.get("config") or {}), "seed": 3}):
        store.write_manifest(b, {**m, "config": config})
        assert base_view(b, [])[0].seeds == [config["seed"]]  # a null seed is unknown, not seed 0


def test_token_level_estimators_and_mcs_are_refused_on_an_import(tmp_path):
    b = import_hista_json(write(tmp_path / "g.json", hand_written()), tmp_path / "b")
    m = store.read_manifest(b)
    for name in ("hista", "ppo-n"):
        r = CliRunner().invoke(app, ["eval", "--build", str(b), "-e", name])
        assert r.exit_code == 1 and "unavailable for an imported hista-json build" in r.output, r.output
        assert "Traceback" not in r.output
    r = CliRunner().invoke(app, ["eval", "--build", str(b), "-e", "mcs-2"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "mcs-2: unavailable for an imported hista-json build" in r.output, r.output
    caps = {e.name: e for e in BUILTIN}  # by what each class declares, not by its name
    assert "unavailable for an imported hista-json build" in refusal("mcs-2", m, caps["mcs-2"])
    assert "token ids" in refusal("shear", m, caps["shear"]) and "\n" not in refusal("shear", m, caps["shear"])
    assert all(refusal(n, m, caps[n]) for n in ("hista", "ppo-1", "ppo-n", "pacs", "probe", "probe-mc", "logprob"))
    assert refusal("grpo", m, caps["grpo"]) is None and refusal("numca", m, caps["numca"]) is None
    assert refusal("hista", {"export": {"tables": {}}}, caps["hista"]) is None  # an SVEB export: everything runs


def _bad(records, i, **change):
    out = [dict(r) for r in records]
    for k, v in change.items():
        if v is KeyError:
            del out[i][k]
        else:
            out[i][k] = v
    return out


@pytest.mark.parametrize("change, field", [
    ({"unbiased_state_value": KeyError}, "unbiased_state_value"),
    ({"correct_responses": "not a list"}, "correct_responses"),
    ({"output_reward": "1"}, "output_reward"),
    ({"problem": 3}, "problem"),
    ({"sampled_response": "something else"}, "sampled_response"),
    ({"unbiased_state_value": math.nan}, "unbiased_state_value"),
    ({"output_reward": math.inf}, "output_reward"),
    ({"unbiased_state_value_noise": [0.1, math.nan]}, "unbiased_state_value_noise"),
    ({"unbiased_state_value": 1.5}, "unbiased_state_value"),
])
def test_a_malformed_record_is_one_line_naming_it_and_writes_nothing(tmp_path, change, field):
    path = write(tmp_path / "bad.json", _bad(hand_written(), 1, **change))
    out = tmp_path / "new" / "build"
    r = CliRunner().invoke(app, ["import", "--format", "hista-json", str(path), "--out", str(out)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    line = " ".join(r.output.split())  # the console may wrap one line
    assert f"record 1: field '{field}'" in line and r.output.count("error:") == 1, r.output
    assert not out.exists() and not out.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_not_a_list_and_not_json_are_refused(tmp_path):
    with pytest.raises(HistaJsonError, match="expected a JSON list"):
        import_hista_json(write(tmp_path / "a.json", {"problem": "x"}), tmp_path / "a")
    (tmp_path / "b.json").write_text("[{")
    with pytest.raises(HistaJsonError, match="not a JSON file"):
        import_hista_json(tmp_path / "b.json", tmp_path / "b")
    with pytest.raises(HistaJsonError, match="record 0: not a JSON object"):
        import_hista_json(write(tmp_path / "c.json", [3]), tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_cli_export_and_verifier_mapping(scripted_build, tmp_path):
    root, bdir = scripted_build
    r = CliRunner().invoke(app, ["export", "--format", "hista-json", "--root", str(root), "--build", bdir.name[:8],
                                 "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 0 and "records" in r.output, r.output
    assert len(json.loads((tmp_path / "x.json").read_text())) == store.read_manifest(bdir)["n_states"]
    code = {"domain": "programming", "answer_type": "code", "answer": "", "tests": '[{"input": "1"}]', "meta": "{}"}
    assert verifier_of(code) == "code" and solution_of(code) == '[{"input": "1"}]'
    for domain, want in (("math", "default"), ("number", "default"), ("science", "general"), ("general", "general")):
        assert verifier_of({"domain": domain, "meta": '{"level": 1}'}) == want
    assert verifier_of({"domain": "math", "meta": '{"verifier": null}'}) is None  # kept as the file had it


def test_noise_maes_as_the_authors_compute_them():
    got = noise_maes([1.0, 0.0, 1.0, 1.0], random.Random(0))
    assert len(got) == 4 and got[-1] == 0.0 and all(0 <= x <= 0.75 for x in got)
    assert got[0] in (0.25, 0.75)


INPUTS = [{"problem": f"What is {a} + {b}?", "solution": str(a + b), "verifier": "default", "id": i}
          for i, (a, b) in enumerate((a, b) for a in range(1, 8) for b in range(1, 8))]


def test_input_records_as_a_build_source(tmp_path):
    from sveb.data_builders.load import default_domain, load_problems
    from sveb.data_builders.look import problem_lines
    path = write(tmp_path / "train.json", INPUTS + [
        {"problem": "Name a noble gas.", "solution": "neon", "verifier": "general"},
        {"problem": "Add two ints.", "solution": '[{"input": "1 2\\n", "output": "3\\n", "type": "stdin_stdout"}]',
         "verifier": "code"}])
    src = f"hista-json={path}"
    assert default_domain(src) == "math"  # the most common verifier, "default"
    assert default_domain(f"hista-json={write(tmp_path / 'g.json', INPUTS[:1] + [{'verifier': 'general'}] * 2)}") \
        == "general"
    lines, _ = problem_lines("math", src, "all", as_json=True)
    rows = [json.loads(x) for x in lines]
    assert len(rows) == len(INPUTS)  # the string and code rows do not fit math: skipped and counted
    assert rows[0]["question"] == "What is 1 + 1?" and rows[0]["answer"] == "2" and rows[0]["answer_type"] == "math"
    assert rows[0]["meta"]["verifier"] == "default" and rows[0]["meta"]["id"] == 0
    code, skipped = load_problems("programming", src, 5, 0, "train", min_tests=1)
    test, _ = load_problems("programming", src, 5, 0, "test", min_tests=1)
    tests = json.loads((code + test)[0]["tests"])
    assert tests[0]["input"] == "1 2\n" and (code + test)[0]["answer_type"] == "code"
    general, _ = load_problems("general", src, 99, 0, "train")
    general += load_problems("general", src, 99, 0, "test")[0]
    assert {p["answer_type"] for p in general} == {"math", "string"}
    r = CliRunner().invoke(app, ["ls", "problems", "--source", "hista-json", "-n", "1"])
    assert r.exit_code == 1 and "hista-json=PATH" in r.output


def test_a_scripted_build_from_input_records_exports_back(tmp_path):
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.data_builders.look import resolve_domain
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    path = write(tmp_path / "train.json", INPUTS)
    src = f"hista-json={path}"
    cfg = BuildConfig(domain=resolve_domain(None, src), model="smollm2-135m", source=src, problems=3, oversample=3,
                      rollouts=6, states_per_problem=1, mc=4, mc_extra=0, min_acc=0.0, max_acc=1.0, seed=1,
                      sampling=SamplingConfig(max_tokens=200), engine="scripted")
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine())
    out, n, _ = export_hista_json(bdir, tmp_path / "out.json")
    records = json.loads(out.read_text())
    by_q = {r["problem"]: r for r in INPUTS}
    assert n == 3 and all(r["verifier"] == "default" and r["solution"] == by_q[r["problem"]]["solution"]
                          for r in records)


def test_two_copies_of_one_import_are_not_pooled_as_two_seeds(tmp_path):
    import shutil
    path = write(tmp_path / "generated.json", hand_written())
    b = tmp_path / "b"
    assert CliRunner().invoke(app, ["import", "--format", "hista-json", str(path), "--out", str(b),
                                    "--model", "m"]).exit_code == 0
    assert CliRunner().invoke(app, ["eval", "--build", str(b), "-e", "grpo"]).exit_code == 0
    m = store.read_manifest(b)
    root = tmp_path / "root"
    one, two = (shutil.copytree(b, root / "m" / m["domain"] / name) for name in ("x", "y"))
    r = CliRunner().invoke(app, ["leaderboard", "--root", str(root), "--out", str(tmp_path / "lb.csv")])
    assert r.exit_code == 1 and "one build" in r.output and "twice" in r.output and "Traceback" not in r.output
    flat = "".join(r.output.split())  # the line may wrap in the terminal
    assert "".join(str(one).split()) in flat and "".join(str(two).split()) in flat
    shutil.rmtree(two)
    r = CliRunner().invoke(app, ["leaderboard", "--root", str(root), "--out", str(tmp_path / "lb.csv")])
    assert r.exit_code == 0, r.output
