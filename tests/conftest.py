import os

os.environ.setdefault("SVEB_NO_WATCHDOG", "1")  # CliRunner runs commands in the pytest process

from pathlib import Path

import pytest

from sveb.core.config import BuildConfig, SamplingConfig
from tests.helpers.sources import write_chain_source

# The `slow` tier (`make test-unit` skips it; `make test` runs everything), from `--durations` runs: a test that makes
# a whole scripted build (it asks for one of BUILD_FIXTURES), every test of SLOW_MODULES (end to end on the scripted
# engine, package installs, Ray, sandbox time limits), the full-file dataset checks ([full]), SLOW_TESTS (simulations,
# graders run on every solution), and any test marked @pytest.mark.slow itself.
BUILD_FIXTURES = {"scripted_build", "tiny_llama_builds", "small_cfg", "chain_source"}
SLOW_MODULES = {
    "test_board_hostile", "test_board_on_cpu", "test_board_plugin_on_cpu", "test_code_datasets", "test_code_load",
    "test_context_on_cpu", "test_gpu_smoke", "test_probe_ceiling", "test_programming_source", "test_rl_on_cpu",
    "test_rl_export_on_cpu",
    "test_scaling_on_cpu", "test_seed_partition_on_cpu", "test_signals",
    "test_contract_on_cpu", "test_eval_on_cpu", "test_export_integrity", "test_export_on_cpu", "test_hostile_property",
    "test_keq_scripted_on_cpu", "test_kill9_resume_on_cpu", "test_leaderboard_on_cpu", "test_paper_preset",
    "test_pipeline_on_cpu", "test_plugin_on_cpu", "test_protocol_knobs", "test_protocol_study_on_cpu",
    "test_ray_on_cpu", "test_report", "test_rewards_load", "test_sandbox_hostile", "test_screening_on_cpu",
    "test_seeds_and_pairs_on_cpu", "test_table4_on_cpu", "test_truncation_on_cpu", "test_trust_on_cpu",
}
SLOW_TESTS = {
    "test_numca_sveb.py::test_abstract_path_equals_every_prefix",
    "test_rewards_code.py::test_assert_cases_share_one_process_and_a_cpu_budget",
    "test_composition.py::test_the_permutation_test_holds_its_level_on_nulls",
    "test_power.py::test_q_rejects_at_its_level_when_every_domain_has_the_same_true_delta",
    "test_power.py::test_a_true_delta_equal_to_the_mde_is_detected_about_80_percent_of_the_time",
    "test_probe_fit.py::test_cv_regularises_noise_and_keeps_signal",
    "test_neighbour_metrics.py::test_calibration_debiasing_is_unbiased_and_the_raw_one_is_not",
    "test_neighbour_metrics.py::test_spearman_correction_removes_the_attenuation",
    "test_domains.py::test_builtin_seeded_split_distinct",
    "test_domains.py::test_builtin_golds_grade_as_correct",
    "test_sources.py::test_loaded_code_problems_grade_their_reference_solutions",
    "test_disjoint_seeds.py::test_a_dataset_file_is_partitioned_by_seed",
    "test_gpu_paths.py::test_device_is_decided_without_initialising_cuda_here",
    "test_sources_cli.py::test_report_by_level_on_a_field_source",
    "test_conformance.py::test_the_shared_sets_agree_whole",
    "test_conformance.py::test_cli_prints_the_tally_and_exits_1_on_a_disagreement",
    "test_shear.py::test_sveb_preset_matches_its_direct_reading",
    "test_shear_readout.py::test_base_readout_is_base_rate_of_the_contrast_distances",
    "test_scoring.py::test_oracle_floor_bounds_every_predictor_that_knows_v",
    "test_scoring.py::test_interval_covers_the_truth_at_its_level",
    "test_scoring.py::test_paired_test_rejects_at_the_nominal_rate_under_the_null",
    "test_shear.py::test_rules_match_their_direct_reading",
    "test_programming_source.py::test_references_grade_1_through_the_code_grader",
    "test_hostile_input_on_cpu.py::test_read_only_storage_reads_and_refuses_writes_in_one_line",
}


def is_slow(item) -> bool:
    full = hasattr(item, "callspec") and "full" in item.callspec.id.split("-")
    return (item.module.__name__.rpartition(".")[2] in SLOW_MODULES or bool(BUILD_FIXTURES & set(item.fixturenames))
            or full or f"{item.path.name}::{item.originalname}" in SLOW_TESTS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def chain_source(tmp_path: Path) -> Path:
    return write_chain_source(tmp_path / "dapo.jsonl")


@pytest.fixture
def small_cfg(chain_source: Path) -> BuildConfig:
    return BuildConfig(domain="number", model="scripted", source=str(chain_source), problems=4, oversample=3,
                       rollouts=8, states_per_problem=2, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=3,
                       min_novel_numbers=0,
                       sampling=SamplingConfig(max_tokens=200), engine="scripted")


@pytest.fixture
def scripted_build(tmp_path: Path, small_cfg: BuildConfig):
    """(root, build dir) of a complete build made with the scripted engine."""
    from dataclasses import replace

    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    cfg = replace(small_cfg, model="smollm2-135m")  # a label here: the engine object is passed in
    root = tmp_path / "root"
    return root, build(cfg, root, engine=ScriptedEngine())


@pytest.fixture(scope="module")
def tiny_llama_builds(tmp_path_factory):
    """(root, train build, test build, model path) made with the scripted engine; the model is a tiny random
    Llama, so hidden states and critics are real and take seconds. One per test module."""
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    from tests.helpers.tiny_llama import tiny_llama
    tmp = tmp_path_factory.mktemp("tiny-builds")
    src = write_chain_source(tmp / "dapo.jsonl")
    model = tiny_llama(tmp / "llama")
    root = tmp / "root"
    out = {}
    for split, seed in (("train", 4), ("test", 3)):  # disjoint splits: the probe and ppo-1 train on "train"
        cfg = BuildConfig(domain="number", model=model, source=str(src), split=split, problems=3, oversample=3,
                          rollouts=8, states_per_problem=2, mc=4, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=seed,
                          min_novel_numbers=0, sampling=SamplingConfig(max_tokens=120), engine="scripted")
        out[split] = build(cfg, root, engine=ScriptedEngine())
    return root, out["train"], out["test"], model
