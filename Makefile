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

demo: $(STAMP)
	$(PY) examples/demo.py $(if $(BOOTSTRAP),--bootstrap-servers $(BOOTSTRAP),)

# A wheel (pip install dist/*.whl) and a zip for spark-submit --py-files, both in dist/.
dist: $(STAMP)
	$(PY) -m pip wheel -q --no-deps -w dist .
	$(PY) scripts/build_pyfiles_zip.py --out-dir dist

# Side-by-side performance against confluent-kafka and kafka-python (tests/bench/run.py,
# ~10 min on 2 cores; BENCH_ARGS e.g. "--scale 0.5 --rounds 5"); writes tests/bench/results.md.
.PHONY: bench
bench: $(STAMP)
	$(PY) tests/bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-pyfiles build dist *.egg-info .pytest_cache
