# rlpace: every target creates .venv itself from the pinned requirements.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.rlpace-installed
BASE   ?= HEAD
SETS   ?= cpu
# minutes `make bench` may take after .venv before its extra duets stop (BUDGET= : none)
BUDGET ?= 13

.PHONY: venv test lint bench bench-quick asv learn docs clean

venv: $(STAMP)

$(STAMP): ci/requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# pip compiles bytecode on one core (about 35 of its 55 s here); compileall uses
	@# every core. Like pip, it leaves a file that does not compile (torch ships
	@# Python 3.12 syntax in its test helpers) to compile, or fail, at import.
	$(PY) -m pip install --quiet --no-compile -r ci/requirements.txt
	@$(PY) -m compileall -q -q -j 0 $(VENV)/lib > /dev/null || :
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

lint: $(STAMP)
	$(PY) -m ruff check
	$(PY) -m ruff format --check
	$(VENV)/bin/zizmor --offline --no-progress --strict-collection .github/workflows

## The tests: lint, then every unit test; benchmark bodies run once each as smoke tests.
test: lint
	$(PY) -m pytest tests lib --doctest-modules --benchmark-disable -p no:cacheprovider --durations=10

## The main job: this working tree against $(BASE), CPU set, report under reports/pr/.
bench: $(STAMP)
	$(PY) -m rlpace.bench pr --base $(BASE) --sets $(SETS) --out-dir reports/pr \
		$(if $(strip $(BUDGET)),--time-budget $(BUDGET))

bench-quick: $(STAMP)
	$(PY) -m rlpace.bench pr --base $(BASE) --sets $(SETS) --out-dir reports/pr --quick

## asv against commits, offline: each commit built into a virtualenv with its pinned
## ci/requirements.txt; results in reports/asv/results, HTML in reports/asv/html,
## step changes and trend plots in reports/history/. By default only ASV_BASE and
## ASV_HEAD are measured (by `asv continuous`, which stores their results); set
## ASV_RANGE (e.g. ASV_RANGE=HEAD~3..HEAD) to also `asv run` a range of commits.
ASV_CONF   ?= asv_bench/asv.conf.json
ASV_RANGE  ?=
ASV_BASE   ?= HEAD~1
ASV_HEAD   ?= HEAD
ASV_FACTOR ?= 1.5
ASV_BENCH  ?= ^cpu\.
ASV_HISTORY ?= reports/history
ASV_STEP   ?= 0.1
ASV_COUNT_STEP ?= 0.01
ASV        := $(PY) -m asv
asv: $(STAMP)
	@# asv prints its machine questions even with --yes: keep them out of the log
	$(ASV) machine --yes --config $(ASV_CONF) > /dev/null
	$(if $(strip $(ASV_RANGE)),$(ASV) run --config $(ASV_CONF) --skip-existing-successful --record-samples --bench '$(ASV_BENCH)' $(ASV_RANGE))
	$(ASV) continuous --config $(ASV_CONF) --factor $(ASV_FACTOR) --bench '$(ASV_BENCH)' --no-only-changed $(ASV_BASE) $(ASV_HEAD)
	$(ASV) compare --config $(ASV_CONF) --factor $(ASV_FACTOR) $(ASV_BASE) $(ASV_HEAD)
	$(ASV) publish --config $(ASV_CONF)
	$(PY) -m rlpace.bench history --asv-config $(ASV_CONF) --out-dir $(ASV_HISTORY) --threshold $(ASV_STEP) --count-threshold $(ASV_COUNT_STEP)

clean:
	rm -rf reports/pr reports/bench build *.egg-info lib/*.egg-info

## The documentation: HTML with warnings as errors, the pages' examples, internal links.
docs: $(STAMP)
	$(PY) docs/build.py --out docs/_build

## Headless-Chromium screenshots of the home page and a guide into reports/docs/.
.PHONY: docs-screenshot
docs-screenshot: docs
	bash docs/screenshot.sh docs/_build/html reports/docs

## Proof that the trainers learn: PPO on CartPole-v1 and SAC on Pendulum-v1 to their targets.
learn: $(STAMP)
	$(PY) -m rlpace.train --learn reports/learning.md
