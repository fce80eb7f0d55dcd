# rlpace: every target creates .venv itself from the pinned requirements.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.rlpace-installed
BASE   ?= HEAD
SETS   ?= cpu

.PHONY: venv test lint bench bench-quick asv learn docs clean

venv: $(STAMP)

$(STAMP): ci/requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r ci/requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

lint: $(STAMP)
	$(PY) -m ruff check lib tests asv_bench
	$(PY) -m ruff format --check lib tests asv_bench

## The tests: lint, then every unit test; benchmark bodies run once each as smoke tests.
test: lint
	$(PY) -m pytest tests lib --doctest-modules --benchmark-disable -p no:cacheprovider

## The main job: this working tree against $(BASE), CPU set, report under reports/pr/.
bench: $(STAMP)
	$(PY) -m rlpace.bench pr --base $(BASE) --sets $(SETS) --out-dir reports/pr

bench-quick: $(STAMP)
	$(PY) -m rlpace.bench pr --base $(BASE) --sets $(SETS) --out-dir reports/pr --quick

clean:
	rm -rf reports/pr reports/bench build *.egg-info lib/*.egg-info

## Proof that the trainers learn: PPO on CartPole-v1 and SAC on Pendulum-v1 to their targets.
learn: $(STAMP)
	$(PY) -m rlpace.train --learn reports/learning.md
