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
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The broker-facing tests start Apache Kafka themselves (kafka_testbed.KafkaCluster): the
# first run has Maven fetch the pinned broker jars into .cache/ (about 20 s a version).
# The slowest tests are listed at the end (--durations).
test: $(STAMP)
	$(PY) -m pytest -q --durations=30 $(PYTEST_ARGS)

# The broker-facing selection (tests/test_kafka_broker.py: interop with librdkafka and
# Kafka's own tools, exactly-once streams killed and restarted, read_committed over aborted
# transactions, timestamp lookups, DeleteRecords, group offsets) against the Kafka at
# PYKAFKA_TEST_BOOTSTRAP=host:port, or against the Apache Kafka the tests start when it is
# unset. .github/workflows/kafka.yml runs it on docker-compose.yml's Kafka.
.PHONY: test-kafka lint-ci
test-kafka: $(STAMP)
	$(PY) -m pytest -q -m kafka tests/test_kafka_broker.py $(PYTEST_ARGS)

# The workflow and docker-compose.yml against the schemas check-jsonschema ships (no network).
lint-ci: $(STAMP)
	$(PY) -m pytest -q tests/test_ci_files.py

# Suites that stay out of `make test` to keep it within half an hour (virtualenvs of their
# own, Spark jobs and servers of their own, a 3-node cluster whose nodes die: pytest
# markers `sail`, `pyspark_versions`, `pythons`, `minimums`, `loading`, `jvm_referee`,
# `broker_faults`, `authorization` and `wide_topic`, deselected by default in
# pyproject.toml); .ci/run runs each after it.
# test-sail: batch reads and writes on a Sail server (tests/test_sail.py, venv-sail).
# test-pythons: each supported CPython (3.10 to 3.13; tests/test_pythons.py): its wheel built
# as make dist builds it, installed without a C compiler and checked (compiled paths in use,
# the same bytes as the pure path), and in venv-python-3.X (PySpark, pytest, hypothesis) a
# selection of the suite (protocol round trips, record batches, compiled/pure equivalence)
# and a Spark job (batch write and read, a stream). A first run makes the four envs (about
# 1 min each with pip's cache warm); later runs reuse them.
# test-minimums: the lowest versions we claim (tests/test_minimums.py): in venv-minimums-3.X,
# the lowest runtime dependencies pyproject.toml allows on that Python as uv's lowest resolution
# installs them (uv pinned in the dev extra), beside a PySpark at its oldest (4.1.0 on
# 3.10 and 3.13, 4.2.0 on 3.12, 4.3.0 with its own floor, pyarrow 18, on 3.11), the selection
# of test-pythons and its Spark job (with a read of 50 one-record partitions in one task).
# A first run makes the four envs and build envs: about 3.5 min with uv's cache warm (CI's
# fresh clone), 5 min with it cold (uv builds PySpark 4.1.0, 4.2.0 and 4.3.0 from their sdists,
# ~25 s each, and keeps the wheels in its cache); later runs reuse the envs: about 3 min.
# test-versions: batch, a stream and --py-files under each supported PySpark
# (tests/test_pyspark_versions.py: venv-pyspark-4.1, venv-pyspark-4.2, and venv-pyfiles
# for 4.3). A first run pip-installs PySpark (an sdist pip builds, ~400 MB) in each env:
# 3-4 min each with a cold pip cache, ~1 min with its wheel cached; later runs reuse them.
# test-jvm: Spark's own JVM Kafka connector as referee (tests/test_jvm_connector_differential.py:
# the same queries through format("kafka") and format("pykafka") under PySpark 4.2.0, in
# venv-pyspark-4.2.0, with the connector's jars Maven fetches into .cache/), and what each
# needs granted on an Apache Kafka with an authorizer (tests/test_jvm_connector_grants.py).
# test-faults: nodes of a 3-node Apache Kafka SIGKILLed and SIGSTOPped under a df.write, an
# exactlyOnce stream (the driver killed too) and a readStream (tests/test_kafka_faults.py,
# small sizes; make soak runs them at full size); and a 3-node Kafka with 200 other topics
# whose retriable errors must refresh the query's topics only (tests/test_metadata_scope.py);
# and an exactlyOnce stream with deadLetterTopic on local-cluster whose driver, executor JVMs
# and Python workers are killed (tests/test_dead_letter_faults.py, one Kafka node, about 2.5 min).
# test-authz: the grants each query needs (docs/security.md's table) as Spark queries on an
# Apache Kafka with an authorizer (tests/test_kafka_authorization_spark.py: a batch read by
# time, a readStream whose grant is revoked, writeStream and df.write, an exactlyOnce
# stream's marker groups); tests/test_kafka_authorization.py, in make test, does each row
# driver-side.
# test-loading: a job for each way of loading the connector (tests/test_load_paths.py:
# editable install, --py-files, PYTHONPATH, addPyFile) and a local Spark Connect server
# (tests/test_connect.py: the wheel on the server, addArtifacts from a client).
.PHONY: test-sail test-versions test-pythons test-minimums test-loading test-jvm test-faults test-authz
test-sail: $(STAMP)
	$(PY) -m pytest -q -m sail tests/test_sail.py $(PYTEST_ARGS)

test-versions: $(STAMP)
	$(PY) -m pytest -q -m pyspark_versions tests/test_pyspark_versions.py $(PYTEST_ARGS)

test-pythons: $(STAMP)
	$(PY) -m pytest -q -m pythons tests/test_pythons.py $(PYTEST_ARGS)

test-minimums: $(STAMP)
	$(PY) -m pytest -q -m minimums tests/test_minimums.py $(PYTEST_ARGS)

test-loading: $(STAMP)
	$(PY) -m pytest -q -m loading tests/test_load_paths.py tests/test_connect.py $(PYTEST_ARGS)

test-jvm: $(STAMP)
	$(PY) -m pytest -q -m jvm_referee tests/test_jvm_connector_differential.py tests/test_jvm_connector_grants.py $(PYTEST_ARGS)

test-faults: $(STAMP)
	$(PY) -m pytest -q -m broker_faults tests/test_kafka_faults.py tests/test_metadata_scope.py \
		tests/test_dead_letter_faults.py $(PYTEST_ARGS)

test-authz: $(STAMP)
	$(PY) -m pytest -q -m authorization tests/test_kafka_authorization_spark.py $(PYTEST_ARGS)

# test-security: how company clusters are secured, on Apache Kafka (marker security): Kerberos
# (SASL GSSAPI) against a real MIT KDC that kafka_testbed starts (tests/test_kerberos.py;
# scripts/ensure_kerberos.sh installs the KDC and the Kerberos library with apt-get where they
# are missing, then the `kerberos` extra goes into .venv), delegation tokens
# (tests/test_delegation_tokens.py) and rack-aware fetching on three nodes in three racks
# (tests/test_rack_fetch.py).
.PHONY: test-security
test-security: $(STAMP)
	scripts/ensure_kerberos.sh $(PY)
	$(PY) -m pytest -q -m security tests/test_kerberos.py tests/test_delegation_tokens.py tests/test_rack_fetch.py $(PYTEST_ARGS)

# test-wide: request counts on a topic of 10,000 partitions (tests/test_wide_topic.py, marker
# wide_topic; make test runs the same tests at 1,000 partitions): an Apache Kafka node of its
# own with a 2 GB heap, the topic created (in two steps) and filled in about 30 s.
.PHONY: test-wide
test-wide: $(STAMP)
	$(PY) -m pytest -q -m wide_topic tests/test_wide_topic.py $(PYTEST_ARGS)

# A broker and a Schema Registry on this machine, to try the connector on a laptop
# (python -m kafka_testbed; TESTBED_ARGS="--topic orders:3 --kafka" for Apache Kafka).
.PHONY: testbed
testbed: $(STAMP)
	$(PY) -m kafka_testbed $(TESTBED_ARGS)

# The demo has a virtualenv of its own, .venv-demo, with only what it needs (not the dev set
# of `make install`): this checkout with its `spark` extra (PySpark and the runtime
# dependencies) and its `testbed` extra (confluent-kafka, whose wheel holds the embedded
# broker, librdkafka's mock cluster). The first run installs about 500 MB (PySpark is most
# of it), showing pip's progress; later runs start at once.
DEMO_VENV := .venv-demo
DEMO_PY := $(DEMO_VENV)/bin/python
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_PY):
	@echo "== creating $(DEMO_VENV) for the demo"
	$(PYTHON) -m venv $(DEMO_VENV)

$(DEMO_STAMP): pyproject.toml | $(DEMO_PY)
	@echo "== installing pip, then the connector with PySpark into $(DEMO_VENV) (once)"
	$(DEMO_PY) -m pip install --upgrade pip
	$(DEMO_PY) -m pip install -e '.[spark,testbed]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@echo "== running examples/demo.py with $(DEMO_PY)"
	$(DEMO_PY) examples/demo.py $(if $(BOOTSTRAP),--bootstrap-servers $(BOOTSTRAP),)

# The docs site: docs/*.md built by MkDocs (mkdocs.yml) into site/, in strict mode, so a
# broken link or anchor, or a page missing from the nav, fails the build (.ci/run runs it).
.PHONY: docs
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

# Lint and types (pyproject.toml's [tool.ruff] and [tool.mypy]; .ci/run runs it after
# make docs): ruff's rules over the whole tree, its formatter's check, and mypy over the
# five product packages protocol/version.py names (the sans-IO protocol modules strictly).
.PHONY: lint
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy $$($(PY) -c 'from protocol.version import RUNTIME_PACKAGES as p; print(*p)')

# The sdist, a wheel for each supported CPython (3.10 to 3.13, pyenv's or python3.X on PATH:
# scripts/build_wheels.py) with the compiled record decoder and encoder inside, tagged
# manylinux_2_17 by auditwheel (docs/support.md says why), all checked with twine as a
# package index would, and a zip for spark-submit --py-files (the sources, and the compiled
# record codecs for this Python with a manifest of their hashes; another Python runs the
# pure path), all in dist/. Each wheel's Python gets a small build env (.venv-build-3.X,
# setuptools alone) on first use. make test-pythons installs each wheel and tests it.
dist: $(STAMP)
	rm -f dist/pyspark_pykafka-*
	$(PY) -m build --sdist --outdir dist .
	$(PY) scripts/build_wheels.py --out-dir dist
	$(PY) -m twine check --strict dist/*.tar.gz dist/*.whl
	$(PY) scripts/build_pyfiles_zip.py --out-dir dist

# Side-by-side performance against confluent-kafka, aiokafka and kafka-python (tests/bench/run.py,
# ~20 min on 2 cores; BENCH_ARGS e.g. "--scale 0.5 --rounds 5", or "--only streaming" for
# the streaming latency, connections and producer ids alone, ~3 min); writes tests/bench/results.md
# and quotes it in docs/performance.md (scripts/render_bench_summary.py).
.PHONY: bench
bench: $(STAMP)
	$(PY) tests/bench/run.py $(BENCH_ARGS)
	$(PY) scripts/render_bench_summary.py

# Reliability, measured (tests/RELIABILITY.md): `make soak` runs the fault, hostile-broker,
# timeout, fuzz and secret tests at full size (1 M records read through cut connections,
# 100 k written under 1,000 faults per broker kind, a 30-minute topic-to-topic stream
# through leader moves, broker outages and cut connections; an hour of an exactlyOnce stream
# at 3,000 x 1 KB records/s beside a readStream over 10,000 partitions: test_soak_hour.py)
# and renders the page from their
# figures, merged into tests/reliability-figures.json (the page's source: a run replaces its
# own tests' entries and keeps the others'); `make fuzz` fuzzes every decoder for FUZZ_SECONDS per target with atheris (the
# `fuzz` extra, installed on first use if it installs; else the hypothesis fuzzers with 50
# times their examples) and renders it.
RELIABILITY_TESTS := tests/test_faults.py tests/test_hostile_broker.py tests/test_timeouts.py \
	tests/test_fuzz_decoders.py tests/test_security.py tests/test_kafka_tls.py \
	tests/test_soak_stream.py tests/test_kafka_faults.py tests/test_soak_hour.py
FUZZ_SECONDS ?= 120
# The figures of these runs go to a file of their own (a concurrent `make test` records
# its smaller runs in the default one); soak starts it afresh, fuzz adds to it.
RELIABILITY_JSON ?= $(or $(TMPDIR),/tmp)/pyspark-pykafka-reliability-soak.json
.PHONY: soak fuzz reliability-report
# (-m 'not sail' replaces the default selection, which leaves out test_kafka_faults.py.)
soak: $(STAMP)
	rm -f $(RELIABILITY_JSON)
	PYKAFKA_SOAK=1 PYKAFKA_RELIABILITY_JSON=$(RELIABILITY_JSON) \
		$(PY) -m pytest -q -p no:cacheprovider -m 'not sail' $(RELIABILITY_TESTS) $(PYTEST_ARGS)
	$(PY) tests/helpers/reliability_report.py --json $(RELIABILITY_JSON)

fuzz: $(STAMP)
	-$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install -q -e '.[fuzz]' \
		|| echo "atheris did not install: running the hypothesis fuzzers instead"
	PYKAFKA_RELIABILITY_JSON=$(RELIABILITY_JSON) $(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS)
	$(PY) tests/helpers/reliability_report.py --json $(RELIABILITY_JSON)

reliability-report:
	$(PY) tests/helpers/reliability_report.py --json $(RELIABILITY_JSON)

# The hour of streaming alone (tests/test_soak_hour.py, issue 41; make soak runs it too): an
# exactlyOnce stream at 3,000 x 1 KB records/s beside a readStream over 10,000 partitions,
# sampled every 30 s and drawn into tests/RELIABILITY.md. SOAK_HOUR_SECONDS shortens it.
SOAK_HOUR_SECONDS ?= 3600
.PHONY: soak-hour
soak-hour: $(STAMP)
	PYKAFKA_SOAK_HOUR_SECONDS=$(SOAK_HOUR_SECONDS) PYKAFKA_RELIABILITY_JSON=$(RELIABILITY_JSON) \
		$(PY) -m pytest -q -p no:cacheprovider -m soak_hour tests/test_soak_hour.py $(PYTEST_ARGS)
	$(PY) tests/helpers/reliability_report.py --json $(RELIABILITY_JSON)

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-pyfiles .venv-sail .venv-pyspark-* .venv-python-* .venv-minimums-* .venv-build-* build \
		dist *.egg-info .pytest_cache site
