# The quick start: `make demo` runs the demo on an embedded broker, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo install clean dist

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Suites that build virtualenvs of their own and so stay out of `make test` (pytest markers
# `sail` and `pyspark_versions`, deselected by default in pyproject.toml); CI runs them after it.
# test-sail: batch reads and writes on a Sail server (tests/test_sail.py, .venv-sail).
# test-versions: batch, a stream and --py-files under each supported PySpark
# (tests/test_pyspark_versions.py: .venv-pyspark-4.1, .venv-pyspark-4.2, and .venv-pyfiles
# for 4.3). A first run pip-installs PySpark (an sdist pip builds, ~400 MB) in each env:
# 3-4 min each with a cold pip cache, ~1 min with its wheel cached; later runs reuse them.
.PHONY: test-sail test-versions
test-sail: $(STAMP)
	$(PY) -m pytest -q -m sail tests/test_sail.py $(PYTEST_ARGS)

test-versions: $(STAMP)
	$(PY) -m pytest -q -m pyspark_versions tests/test_pyspark_versions.py $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) examples/demo.py $(if $(BOOTSTRAP),--bootstrap-servers $(BOOTSTRAP),)

# A wheel (pip install dist/*.whl; platform-specific when the optional C decoder compiled)
# and a zip for spark-submit --py-files (pure Python), both in dist/.
dist: $(STAMP)
	$(PY) -m pip wheel -q --no-deps -w dist .
	$(PY) scripts/build_pyfiles_zip.py --out-dir dist

# Side-by-side performance against confluent-kafka, aiokafka and kafka-python (tests/bench/run.py,
# ~20 min on 2 cores; BENCH_ARGS e.g. "--scale 0.5 --rounds 5"); writes tests/bench/results.md
# and quotes it in README.md (scripts/render_bench_summary.py).
.PHONY: bench
bench: $(STAMP)
	$(PY) tests/bench/run.py $(BENCH_ARGS)
	$(PY) scripts/render_bench_summary.py

# Reliability, measured (tests/RELIABILITY.md): `make soak` runs the fault, hostile-broker,
# timeout, fuzz and secret tests at full size (1 M records read through cut connections,
# 100 k written under 1,000 faults per broker kind) and renders the page from their
# figures; `make fuzz` fuzzes every decoder for FUZZ_SECONDS per target with atheris (the
# `fuzz` extra, installed on first use if it installs; else the hypothesis fuzzers with 50
# times their examples) and renders it.
RELIABILITY_TESTS := tests/test_faults.py tests/test_hostile_broker.py tests/test_timeouts.py \
	tests/test_fuzz_decoders.py tests/test_security.py tests/test_tls_broker.py
FUZZ_SECONDS ?= 120
# The figures of these runs go to a file of their own (a concurrent `make test` records
# its smaller runs in the default one); soak starts it afresh, fuzz adds to it.
RELIABILITY_JSON ?= $(or $(TMPDIR),/tmp)/pyspark-pykafka-reliability-soak.json
.PHONY: soak fuzz reliability-report
soak: $(STAMP)
	rm -f $(RELIABILITY_JSON)
	PYKAFKA_SOAK=1 PYKAFKA_RELIABILITY_JSON=$(RELIABILITY_JSON) \
		$(PY) -m pytest -q -p no:cacheprovider $(RELIABILITY_TESTS) $(PYTEST_ARGS)
	$(PY) tests/reliability_report.py --json $(RELIABILITY_JSON)

fuzz: $(STAMP)
	-$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install -q -e '.[fuzz]' --config-settings editable_mode=compat \
		|| echo "atheris did not install: running the hypothesis fuzzers instead"
	PYKAFKA_RELIABILITY_JSON=$(RELIABILITY_JSON) $(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS)
	$(PY) tests/reliability_report.py --json $(RELIABILITY_JSON)

reliability-report:
	$(PY) tests/reliability_report.py --json $(RELIABILITY_JSON)

clean:
	rm -rf $(VENV) .venv-pyfiles .venv-sail .venv-pyspark-* build dist *.egg-info .pytest_cache
