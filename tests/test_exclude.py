"""`--exclude`: a build never draws the problems of earlier builds, the other seeds do not move, the problems
fingerprint follows the excluded set's content, and a bad path is a one-line error naming it (no model)."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pytest

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig
from sveb.core.errors import UsageError
from sveb.data_builders import normalise_question
from sveb.data_builders.exclude import read
from sveb.data_builders.load import load_problems
from sveb.sample.rules import stage_fps, validate


def _export(folder, problems: list[dict]):
    """A folder shaped like a build or export: manifest.json and a problems/ table."""
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"build_fp": folder.name}))
    store.write_shard(store.shard_path(folder / "problems", 0), pa.Table.from_pylist(problems, schema=schema.PROBLEMS),
                      "x")
    return folder


def _ids(problems):
    return [p["problem_id"] for p in problems]


def test_excluded_problems_are_never_drawn_and_other_seeds_do_not_move(tmp_path):
    seed3 = load_problems("number", "builtin", 150, 3, "test")[0]
    seed4 = load_problems("number", "builtin", 150, 4, "test")[0]
    gone = seed3[:20]
    exp = _export(tmp_path / "results" / "old" / "exports" / "number-seed3", gone)
    new3 = load_problems("number", "builtin", 150, 3, "test", exclude=(str(tmp_path / "results"),))[0]
    assert len(new3) == 150 and not set(_ids(new3)) & set(_ids(gone))
    assert set(_ids(seed3[20:])) <= set(_ids(new3))  # the rest of the seed stays; 20 more come from its own slot
    assert not set(_ids(new3)) & set(_ids(seed4))    # still disjoint from the other seeds
    # the other seeds' draws are what they were without --exclude (the exclusion follows the slot dealing)
    assert load_problems("number", "builtin", 150, 4, "test", exclude=(str(exp),))[0] == seed4
    # the same level mix as before: each level's share is refilled from the same level
    levels = lambda ps: sorted(json.loads(p["meta"])["level"] for p in ps)  # noqa: E731
    assert levels(new3) == levels(seed3)


def test_a_question_is_matched_by_its_normalised_text_as_well_as_its_id(tmp_path):
    seed = load_problems("number", "builtin", 40, 5, "test")[0]
    renamed = [{**p, "problem_id": "0" * 16, "question": "  " + p["question"].upper() + " "} for p in seed[:3]]
    ex = read((str(_export(tmp_path / "b", renamed)),))
    assert all(p in ex for p in seed[:3]) and not any(p in ex for p in seed[3:])
    assert normalise_question(renamed[0]["question"]) in ex.questions


def test_an_id_file_excludes_its_ids(tmp_path):
    seed = load_problems("number", "builtin", 60, 6, "test")[0]
    ids = tmp_path / "ids.txt"
    ids.write_text("# earlier builds\n" + "\n".join(_ids(seed[:5])) + "\n\n")
    new = load_problems("number", "builtin", 60, 6, "test", exclude=(str(ids),))[0]
    assert not set(_ids(new)) & set(_ids(seed[:5])) and len(new) == 60


def test_a_dataset_source_honours_exclude_too(tmp_path):
    src = tmp_path / "dapo.jsonl"
    qs = [f"What is {a} * {b} + {c}?" for a in range(2, 21) for b in range(2, 21) for c in range(1, 10)]
    src.write_text("\n".join(json.dumps({"prompt": q, "solution": str(eval(q[8:-1]))}) for q in qs))
    first = load_problems("number", str(src), 30, 2, "test")[0]
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(_ids(first[:4])))
    new = load_problems("number", str(src), 30, 2, "test", exclude=(str(ids),))[0]
    assert not set(_ids(new)) & set(_ids(first[:4])) and set(_ids(first[4:])) <= set(_ids(new))


def test_the_problems_fingerprint_follows_the_excluded_content_not_the_path(tmp_path):
    seed = load_problems("number", "builtin", 20, 3, "test")[0]
    a, b = _export(tmp_path / "a", seed[:4]), _export(tmp_path / "elsewhere" / "a", seed[:4])
    c = _export(tmp_path / "c", seed[:5])
    cfg = BuildConfig(domain="number", engine="scripted", seed=3)
    fp = lambda **kw: stage_fps(replace(cfg, **kw))["problems"]  # noqa: E731
    assert fp() != fp(exclude=(str(a),)) != fp(exclude=(str(c),))
    assert fp(exclude=(str(a),)) == fp(exclude=(str(b),))
    assert stage_fps(cfg)["problems"] == fp(exclude=())  # builds without --exclude keep their fingerprints
    # the manifest's config round-trips the paths
    assert BuildConfig.from_manifest({"config": {"exclude": [str(a)]}}).exclude == (str(a),)


def test_bad_paths_are_one_line_errors_naming_them(tmp_path):
    cfg = BuildConfig(domain="number", engine="scripted")
    with pytest.raises(UsageError, match=r"--exclude .*nowhere: no such file or directory"):
        validate(replace(cfg, exclude=(str(tmp_path / "nowhere"),)))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"--exclude .*empty: holds no build or export"):
        validate(replace(cfg, exclude=(str(tmp_path / "empty"),)))
    bad = tmp_path / "ids.txt"
    bad.write_text("0123456789abcdef\nnot-an-id\n")
    with pytest.raises(UsageError, match=r"--exclude .*ids.txt line 2: 'not-an-id' is not a problem id") as e:
        validate(replace(cfg, exclude=(str(bad),)))
    assert "\n" not in str(e.value)


def test_a_seed_that_cannot_fill_its_level_mix_after_exclusion_says_so(tmp_path):
    whole = load_problems("number", "builtin", 150, 7, "test")[0]
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(p["problem_id"] for p in whole if json.loads(p["meta"])["level"] == 1))
    with pytest.raises(UsageError, match=r"--seed 7: builtin number .* of level 1 in this seed's slot once --exclude "
                                         r"removed \d+, 46 needed") as e:
        load_problems("number", "builtin", 150, 7, "test", exclude=(str(ids),))
    assert "\n" not in str(e.value)
