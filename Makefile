# elastic-sps: `make demo` runs the main job, `make test` the tests. Both install what is
# missing first (apt packages, the .venv and the Python packages), so a fresh machine needs
# nothing else.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := redis-server openjdk-17-jre-headless

# Apache Kafka's jars, from Maven Central, into a cache outside the repository
KAFKA_HOME ?= $(HOME)/.cache/elastic-sps/kafka-4.1.1
KAFKA_STAMP := $(KAFKA_HOME)/libs/.complete

.PHONY: help install constraints system-deps kafka docker-deps compose-up compose-down prometheus demo test test-containers test-unit test-integration test-e2e lint bench peers-venv clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

system-deps: ## apt-install redis-server, Java, Maven and kcat if they are missing
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

docker-deps: ## as root: apt-install Docker's engine, debootstrap and Debian's docker-compose (for compose and testcontainers)
	@if [ "$$(id -u)" = 0 ] && ! command -v dockerd >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    docker.io debootstrap iptables docker-compose >/dev/null || \
	    echo "warning: Docker could not be installed; the compose test will be skipped"; \
	fi

compose-up: docker-deps ## build every image without a registry and start the compose stack
	compose/stack.sh up

compose-down: ## stop the compose stack (volumes kept) and the private Docker engine, if any
	compose/stack.sh down
	compose/stack.sh engine-stop

prometheus: ## apt-install Prometheus for `elastic-sps up --prometheus` (make test does too)
	@command -v prometheus >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus; } \
	  || echo "warning: prometheus could not be installed; its e2e test will be skipped"

# The example user projects are installed as a user installs theirs (the built-in
# twitter topologies name sps_twitter's operators).
EXAMPLES := examples/twitter examples/sentiment examples/log examples/advertising \
  examples/orders examples/nexmark

$(STAMP): pyproject.toml constraints.txt $(addsuffix /pyproject.toml,$(EXAMPLES))
	@command -v python3 >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3 python3-venv; }
	[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -c constraints.txt -e '.[dev]' $(addprefix -e ,$(EXAMPLES))
	touch $(STAMP)

constraints: ## pin every dependency's version as installed in .venv (after changing a bound)
	{ sed -n '1,3p' constraints.txt; $(PY) -m pip freeze --exclude-editable \
	  | grep -v -i -E '^(elastic-sps|sps-|sps_)'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

$(KAFKA_STAMP): compose/kafka/pom.xml
	mvn -q -B -f compose/kafka/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(KAFKA_HOME)/libs
	touch $(KAFKA_STAMP)

kafka: system-deps $(KAFKA_STAMP) ## fetch Apache Kafka's broker jars with Maven (the embedded broker)

install: system-deps kafka $(STAMP) ## create .venv, install the project and its dev tools, fetch Kafka
	@# bytecode as a wheel's install writes it: an editable install leaves it to the first
	@# import, which PYTHONDONTWRITEBYTECODE stops, and then every process compiles anew
	@$(PY) -m compileall -q shared services examples >/dev/null

demo: install ## run the demo (see README)
	$(VENV)/bin/elastic-sps demo

# Where a Docker engine answers (or a private one can be started: compose/stack.sh), the
# integration tests run once, against testcontainers, after the rest (but the local-cluster
# one and Spark's capacity, which test Spark, and a test that restarts an embedded server),
# then the compose test;
# elsewhere every test runs on embedded servers and the compose test is reported as skipped
# with the reason. One fixture chooses the servers (tests/conftest.py, SPS_TEST_SERVERS).
ON_CONTAINERS := integration and not cluster and not engine and not embedded

test: install prometheus docker-deps ## unit, integration and e2e tests (integration on testcontainers where Docker runs), then the compose test
	@if host=$$(compose/stack.sh engine); then \
	  export DOCKER_HOST=$$host; \
	  $(PY) -m pytest -m "not compose and not ($(ON_CONTAINERS))" --durations=20; local=$$?; \
	  compose/stack.sh build && SPS_TEST_IMAGES_BUILT=1 \
	  SPS_TEST_SERVERS=containers $(PY) -m pytest -m "($(ON_CONTAINERS)) or compose" --durations=10; \
	  containers=$$?; compose/stack.sh engine-stop; \
	  [ $$local = 0 ] && [ $$containers = 0 ]; \
	else \
	  $(PY) -m pytest -m "not compose" --durations=20 && $(PY) -m pytest -m compose; \
	fi

test-containers: install ## the integration tests on testcontainers + the compose test
	@if host=$$(compose/stack.sh engine); then \
	  export DOCKER_HOST=$$host; \
	  compose/stack.sh build && SPS_TEST_IMAGES_BUILT=1 \
	  SPS_TEST_SERVERS=containers $(PY) -m pytest -m "($(ON_CONTAINERS)) or compose"; \
	  status=$$?; compose/stack.sh engine-stop; exit $$status; \
	else \
	  $(PY) -m pytest -m compose; \
	fi

test-unit: install ## unit tests only
	$(PY) -m pytest -m unit

test-integration: install ## tests against a real redis-server / Kafka-protocol broker
	$(PY) -m pytest -m integration

test-e2e: install ## the whole ensemble
	$(PY) -m pytest -m e2e

lint: install ## ruff and mypy
	$(VENV)/bin/ruff check shared services tests benchmarks examples
	@# mypy cannot follow the package-dir mapping: it checks the installed layout as links
	rm -rf build/typecheck && mkdir -p build/typecheck/elastic_sps
	for f in shared/*; do ln -s "$$PWD/$$f" build/typecheck/elastic_sps/; done
	ln -s "$$PWD/services" build/typecheck/elastic_sps/services
	$(VENV)/bin/mypy

PEERS_VENV := .venv-peers
$(PEERS_VENV)/.stamp:
	python3 -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q quixstreams==3.28.1 "bytewax[kafka]==0.21.1" redis
	touch $@

peers-venv: $(PEERS_VENV)/.stamp ## quix-streams and Bytewax in their own venv (quix pins an older confluent-kafka), for bench_peers and bench_nexmark

bench: install peers-venv ## every benchmark whose figures the README and docs/ cite, with the flags they cite (hours: most start their own broker, redis-server and Spark)
	PYTHONPATH=. $(PY) benchmarks/bench_simulator.py
	PYTHONPATH=. $(PY) benchmarks/bench_simulator_dag.py
	PYTHONPATH=. $(PY) benchmarks/bench_las.py
	PYTHONPATH=. $(PY) benchmarks/bench_shedding_sim.py
	PYTHONPATH=. $(PY) benchmarks/bench_stabiliser.py
	PYTHONPATH=. $(PY) benchmarks/bench_bandit.py
	PYTHONPATH=. $(PY) benchmarks/bench_control.py
	PYTHONPATH=. $(PY) benchmarks/bench_control.py --group dominance
	PYTHONPATH=. $(PY) benchmarks/bench_control.py --group rescales
	PYTHONPATH=. $(PY) benchmarks/bench_mape_latency.py
	PYTHONPATH=. $(PY) benchmarks/bench_dataplane.py --events 30000
	PYTHONPATH=. $(PY) benchmarks/bench_steps.py --events 20000 --rounds 3 --json
	PYTHONPATH=. $(PY) benchmarks/bench_ingress.py --events 100000
	PYTHONPATH=. $(PY) benchmarks/bench_capacity.py --seconds 4
	PYTHONPATH=. $(PY) benchmarks/bench_cpu_replicas.py --json
	PYTHONPATH=. $(PY) benchmarks/bench_state.py --json
	PYTHONPATH=. $(PY) benchmarks/bench_faults.py --duration 30 --json
	PYTHONPATH=. $(PY) benchmarks/bench_faults.py --stateful --faults kill:worker,kill:dataplane,redis --json
	PYTHONPATH=. $(PY) benchmarks/bench_shedding_goal.py --tau-ms 2500 --topology twitter_remote --runs 1 --peak-rate 3000
	PYTHONPATH=. $(PY) benchmarks/bench_peers.py --runs 3 --json
	PYTHONPATH=. $(PY) benchmarks/bench_hops.py --rate 3000 --runs 3
	PYTHONPATH=. $(PY) benchmarks/bench_nexmark.py --runs 3 --queries q5,q7 --events 15000 --seconds 20 --warm-seconds 5 --json
	PYTHONPATH=. $(PY) benchmarks/bench_nexmark_resize.py --json
	PYTHONPATH=. $(PY) benchmarks/nexmark_live.py --json
	PYTHONPATH=. $(PY) benchmarks/nexmark_elastic.py --query q7 --peak-rate 3000 --json

clean: ## remove the venv and run outputs
	rm -rf $(VENV) $(PEERS_VENV) runs .pytest_cache .mypy_cache .ruff_cache
