# Quick start: `make demo` and `make test`. Both create (or reuse) .venv in the repo and install
# what they need into it, pinned by constraints.txt.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The browser of the UI test: $ZETA_CHROMIUM when set (the test reads the same variable), else Debian's.
CHROMIUM ?= $(if $(ZETA_CHROMIUM),$(ZETA_CHROMIUM),/usr/bin/chromium)
export ZETA_CHROMIUM := $(CHROMIUM)

.PHONY: install test demo bench chaos clean

$(STAMP): setup.py constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	@touch $@

install: $(STAMP) $(CHROMIUM)

# The UI test drives Debian's Chromium through playwright (no browser download); installed when
# missing. An existing $(CHROMIUM) is a satisfied target: no apt-get. apt-get only provides the default path.
$(CHROMIUM):
	@test "$@" = /usr/bin/chromium || { echo "ZETA_CHROMIUM=$@ does not exist; point it to a Chromium binary" >&2; exit 1; }
	apt-get update -qq && apt-get install -y -qq chromium

## test: the whole suite on real Airflow components, SQLite and PostgreSQL (the command CI runs)
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## demo: run the example pipeline on an embedded Airflow (SQLite, LocalExecutor, local Spark)
demo: install
	$(BIN)/python scripts/demo.py

## bench: benchmark scripts under benchmarks/; figures go to docs/benchmarks.md
bench: install
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

## chaos: the long chaos soak (real Spark, SQLite and PostgreSQL, provider vs stock operators)
chaos: install
	$(BIN)/python scripts/chaos.py --doc docs/chaos.md $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache *.egg-info
