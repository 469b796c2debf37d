"""benchmarks/policy_shift.py: two builds' screening pass rates, paired by problem, on draws whose truth is known."""

import importlib.util
from pathlib import Path

import numpy as np


def _mod():
    spec = importlib.util.spec_from_file_location("policy_shift", Path(__file__).parents[1] / "benchmarks" /
                                                  "policy_shift.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _builds(rng, problems, shift, na=8, nb=20):
    """Two builds of one candidate pool: per problem a true pass rate; B's is `shift` higher."""
    p = rng.uniform(0.1, 0.6, problems)
    a = {f"p{i}": ((1, i), list(rng.random(na) < p[i])) for i in range(problems)}
    b = {f"p{i}": ((1, i), list(rng.random(nb) < min(1.0, p[i] + shift))) for i in range(problems)}
    return a, b


def test_one_policy_is_rarely_called_shifted_and_a_shift_is_found():
    mod = _mod()
    rng = np.random.default_rng(7)
    # same policy: over 40 pairs of builds the permutation p is below 0.05 about 5% of the time, never most
    small = [mod.shift(*_builds(rng, 60, 0.0), permutations=400, seed=k)["p_perm"] < 0.05 for k in range(40)]
    assert sum(small) <= 6
    r = mod.shift(*_builds(rng, 60, 0.25), permutations=2000)
    assert r["p_perm"] < 0.01 and r["ci_low"] > 0.1 and r["ci_high"] < 0.4 and r["problems"] == 60
    assert r["samples_a"] == 480 and r["samples_b"] == 1200


def test_problems_with_other_prompts_are_left_out_and_counted():
    mod = _mod()
    a, b = _builds(np.random.default_rng(1), 10, 0.0)
    b["p3"] = ((2, 3), b["p3"][1])
    del b["p4"]
    r = mod.shift(a, b, permutations=50)
    assert r["problems"] == 8 and r["other_prompt"] == 1


def test_per_problem_reads_rows_in_their_order():
    mod = _mod()
    rows = [{"problem_id": "x", "prompt_token_ids": [1, 2], "reward": 1.0},
            {"problem_id": "y", "prompt_token_ids": [3], "reward": 0.0},
            {"problem_id": "x", "prompt_token_ids": [1, 2], "reward": 0.0}]
    assert mod.per_problem(rows) == {"x": ((1, 2), [1.0, 0.0]), "y": ((3,), [0.0])}


def test_main_reads_two_builds_screens_from_parquet(tmp_path, capsys):
    import pyarrow as pa
    import pytest

    from sveb import store
    from sveb.core import schema
    mod = _mod()

    def build(name, rewards):
        rows = [{"problem_id": f"p{i}", "rollout_idx": k, "prompt_token_ids": [1, i], "response_token_ids": [5],
                 "response_text": "x", "reward": float(r), "finish_reason": "stop", "seed": k}
                for i, rs in enumerate(rewards) for k, r in enumerate(rs)]
        cols = {f.name: [r.get(f.name) for r in rows] for f in schema.ROLLOUTS}
        store.write_shard(store.shard_path(tmp_path / name / "screens", 0), pa.table(cols, schema=schema.ROLLOUTS),
                          "fp")
        return tmp_path / name

    a = build("a", [[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    b = build("b", [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    r = mod.main([str(a), str(b), "--permutations", "200"])
    assert r["problems"] == 3 and r["pass_a"] == pytest.approx(0.25) and r["pass_b"] == pytest.approx(2 / 3)
    assert "3 shared problems" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no screens shards"):
        mod.main([str(a), str(tmp_path / "nothing")])
