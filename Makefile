# Quick start: `make demo` and `make test`. Both create (or reuse) .venv in the repo and install
# what they need into it, pinned by constraints.txt: the demo the provider alone, the tests also
# the test extra (pytest, DB drivers, playwright, ruff, mypy), the openlineage extra (its tests
# must run, not skip) and a Chromium for the UI test.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The provider and its runtime dependencies (what `make demo` needs).
STAMP_RUN  := $(VENV)/.installed-run
# ... plus the test and openlineage extras (what `make test`, `make bench` and `make chaos` need).
STAMP_TEST := $(VENV)/.installed-test
# The browser of the UI test: $ZETA_CHROMIUM when set (the test reads the same variable), else Debian's.
CHROMIUM ?= $(if $(ZETA_CHROMIUM),$(ZETA_CHROMIUM),/usr/bin/chromium)
export ZETA_CHROMIUM := $(CHROMIUM)
# The Java that Spark will use: $JAVA_HOME's when set, else the one on PATH.
JAVA ?= $(if $(JAVA_HOME),$(JAVA_HOME)/bin/java,java)

.PHONY: install install-run lint test demo bench chaos mutation clean java17

$(STAMP_RUN): setup.py constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	$(BIN)/pip install --quiet -c constraints.txt -e .
	@touch $@

$(STAMP_TEST): $(STAMP_RUN)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,openlineage]'
	@touch $@

install-run: $(STAMP_RUN)

install: $(STAMP_TEST) $(CHROMIUM)

# The UI test drives Debian's Chromium through playwright (no browser download); installed when
# missing. An existing $(CHROMIUM) is a satisfied target: no apt-get. apt-get only provides the default path.
$(CHROMIUM):
	@test "$@" = /usr/bin/chromium || { echo "ZETA_CHROMIUM=$@ does not exist; point it to a Chromium binary" >&2; exit 1; }
	apt-get update -qq && apt-get install -y -qq chromium

# The multi-host test's host with a skewed wall clock runs under Debian's libfaketime (package
# faketime) and a small fix the harness compiles with gcc (zeta_harness/hosts.py); each installed
# with apt-get only when missing.
LIBFAKETIME_GLOB := /usr/lib/*/faketime/libfaketime.so.1
.PHONY: libfaketime
install: libfaketime
libfaketime:
	@if ! ls $(LIBFAKETIME_GLOB) >/dev/null 2>&1; then apt-get update -qq && apt-get install -y -qq faketime; fi
	@command -v gcc >/dev/null || { apt-get update -qq && apt-get install -y -qq gcc libc6-dev; }

# The hung-mount test serves the state root through FUSE (zeta_harness/hung_mount.py): Debian's
# fuse3 (fusermount3 and libfuse 3, which mfusepy of the test extra loads); apt-get only when missing.
.PHONY: fuse3
install: fuse3
fuse3:
	@command -v fusermount3 >/dev/null || { apt-get update -qq && apt-get install -y -qq fuse3; }

# PySpark 4 needs Java 17 or newer: say so before Spark fails with a JVM error.
java17:
	@version=$$($(JAVA) -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p' | head -n 1); \
	if [ -z "$$version" ]; then \
	  echo "Java 17 is missing: PySpark needs Java 17 or newer. Install it (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME." >&2; exit 1; \
	elif [ "$$version" -lt 17 ]; then \
	  echo "Java $$version found ($(JAVA)); PySpark needs Java 17 or newer. Install it or point JAVA_HOME to one." >&2; exit 1; \
	fi

## lint: ruff on the package, the test harness, tests, DAGs, scripts and benchmarks; mypy on the package and the harness; import-linter's layer contracts (seconds; `make test` runs it first)
lint: $(STAMP_TEST)
	$(BIN)/ruff check airflow_provider_zeta zeta_harness tests dags scripts benchmarks docs/examples
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: lint, then the whole suite on real Airflow components, SQLite and PostgreSQL (the command CI runs)
test: install java17 lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## demo: run the example pipeline on an embedded Airflow (SQLite, LocalExecutor, local Spark)
demo: install-run java17
	$(BIN)/python scripts/demo.py

## bench: benchmark scripts under benchmarks/; figures go to docs/benchmarks.md
bench: install java17
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

## chaos: the long chaos soak (real Spark, SQLite and PostgreSQL, provider vs stock operators), then
## the multi-host soak (CeleryExecutor across namespace hosts, repeated host kills)
chaos: install java17
	$(BIN)/python scripts/chaos.py --doc docs/chaos.md $(CHAOS_ARGS)
	$(BIN)/python -m pytest -m soak tests/test_multi_host.py

## mutation: mutation testing of core/ with the unit tests (mutmut, opt-in, hours on 2 cores: one
## module at a time with MUTATION_ARGS='airflow_provider_zeta.core.monitor.*'); one worker at the
## lowest priority, so the machine's other work goes first; `$(BIN)/mutmut results` lists the survivors
MUTATION_JOBS ?= 1
mutation: install
	$(BIN)/pip install --quiet -c constraints.txt mutmut
	nice -n 19 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache *.egg-info mutants
