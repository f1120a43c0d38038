# Every target creates ./.venv and installs the package (building the C core) when needed.
# The test venv skips pip's compile step (serial: the venv took 88 s against 55) and
# compiles the installed modules' bytecode on every core instead: otherwise the suite's
# four workers, the Spark workers and the many child interpreters all compile the same
# modules at once on their first import (a fresh clone's make test: 13 min 36 s without,
# 11 min 23 s with; the packages' own tests/ folders, which nothing imports, are left
# out). compileall's status is ignored: bytecode only saves time.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PIPELINE_STAMP := $(VENV)/.installed-pipeline

.PHONY: pipeline demo demo-orders test suite typecheck docs asan lint bench bench-quick bench-spark clean

$(STAMP): setup.cfg setup.py pyproject.toml jetstream_sync/_build_ffi.py $(wildcard csrc/*.c csrc/*.h)
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -U pip setuptools wheel cffi
	$(VPY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-compile -e '.[test]'
	-$(VPY) -m compileall -q -q -j 0 -x '/tests/' "$$($(VPY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" jetstream_sync
	$(VPY) -c "import jetstream_sync as j; assert j.__impl__ == 'c', j.__impl__"
	touch $(STAMP)

$(PIPELINE_STAMP): setup.cfg setup.py pyproject.toml jetstream_sync/_build_ffi.py $(wildcard csrc/*.c csrc/*.h)
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -U pip setuptools wheel cffi
	$(VPY) -m pip install -q --disable-pip-version-check --no-build-isolation -e '.[spark,server]'
	$(VPY) -c "import jetstream_sync as j; assert j.__impl__ == 'c', j.__impl__"
	touch $(PIPELINE_STAMP)

## pipeline: the main job: 1,000,000 orders through JetStream, a Spark batch job and a
## streaming query into a RESULTS stream and a KV bucket (needs Java 17+; local
## nats-server unless NATS_URL is set). ARGS="--events 100000" passes options.
pipeline: $(PIPELINE_STAMP)
	$(VPY) examples/pipeline.py $(ARGS)

demo: pipeline

## demo-orders: the small order demo (publish/consume/request; no Spark)
demo-orders: $(PIPELINE_STAMP)
	$(VPY) examples/demo.py

## test: mypy --strict, the strict docs build, the test suite, and the parser tests (the fuzz
## tests among them) under ASan/UBSan. The suite runs in the foreground; the other stages run
## beside it, their output printed after it (tests/support/stages.py). Every stage runs
## whatever another's result; a summary names each stage's result and when it ended, and
## the exit status is non-zero if any stage failed.
test: $(STAMP)
	$(VPY) -m tests.support.stages

## suite: the whole test suite on TEST_WORKERS pytest-xdist workers, but for the parser fuzz
## tests (marked fuzz), which make asan runs against the sanitized build of the same C code;
## tests that share a Spark session, the cluster or a module's fixture run on one worker
## (tests/conftest.py). Python may cache bytecode (in __pycache__, ignored by git) whatever
## PYTHONDONTWRITEBYTECODE says, so that the workers and the suite's many child interpreters
## do not each compile it again. Four workers on 2 cores: at most two run JVMs (the Spark
## session's lane and the other Spark tests' lane), and the others' tests wait on servers and
## timers much of the time; a fresh clone's make test took 10 min 19 s with three (suite 565 s)
## and the suite 446 s with four, the venv made.
TEST_WORKERS ?= 4

suite: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not fuzz"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

## typecheck: mypy --strict over the package (settings in pyproject.toml)
typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict jetstream_sync

## docs: build the user guide and the API reference with --strict, into a temporary directory
docs: $(STAMP)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$tmp"

asan: $(STAMP)
	PYTHON=$(VPY) bash csrc/asan.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check jetstream_sync tests examples benchmarks

## bench: S1-S7 and MEM for jetstream_sync, nats-py and the raw limit (docs/performance.md)
bench: $(STAMP)
	$(VPY) -m benchmarks

bench-quick: $(STAMP)
	$(VPY) -m benchmarks --quick

## bench-spark: the Spark data source against nats-py in mapPartitions (docs/spark/performance.md)
bench-spark: $(STAMP)
	$(VPY) -m benchmarks spark

clean:
	rm -rf $(VENV) build *.egg-info jetstream_sync/_ffi*.so jetstream_sync/_ffi.c

# ---- Supported Pythons and the wheel (issue 31) ------------------------------------------
.PHONY: test-pythons wheel clean-pythons

PYTHONS ?=
TEST_PYTHONS_ARGS ?=

## test-pythons: the suite on each Python of setup.cfg's classifiers found here (pyenv, PATH),
## each in its own .venv-X.Y; a version not found is reported as skipped. By default the
## suite minus the benchmarks, the packaging tests and the Spark cluster/pipeline runs
## (tests/support/run_pythons.py says why); PYTHONS="3.12 3.13" picks versions,
## TEST_PYTHONS_ARGS=--full runs the whole suite, --not-default leaves out make test's.
test-pythons:
	$(PYTHON) -m tests.support.run_pythons $(TEST_PYTHONS_ARGS) $(PYTHONS)

## wheel: dist/ gets the sdist and a manylinux abi3 wheel (python -m build, auditwheel repair)
wheel: $(STAMP)
	$(VPY) -m tests.support.wheel dist

clean: clean-pythons
clean-pythons:
	rm -rf .venv-3.* dist
