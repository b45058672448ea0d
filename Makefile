# mqbench — see README.md. Every target sets up what it needs; nothing is reinstalled when up to date.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SCENARIOS ?= scenarios/smoke.yaml
# How brokers are started by compare, crosscheck and evaluate: auto (default; evaluate: process), process, containers
BACKEND ?=
BROKER_PACKAGES := rabbitmq-server nats-server mosquitto redis-server activemq
# The brokers' own benchmark tools for `make crosscheck` (redis-benchmark; mosquitto_pub/sub).
TOOL_PACKAGES := redis-tools mosquitto-clients
NATSCLI := github.com/nats-io/natscli/nats@v0.5.0
# nats-server as NATS releases it today (Debian 12 ships 2.9.10, whose JetStream replicas can diverge after a
# paused leader resumes: docs/brokers.md); the provisioner prefers this build to Debian's binary.
NATS_SERVER := github.com/nats-io/nats-server/v2@v2.15.2
BROWSER_PACKAGES := chromium
PYTEST_ARGS ?=
# The brokers `make test` runs through the containers backend too (their images are built when missing).
TEST_IMAGES := rabbitmq,kafka,redis,nats,mqtt
DOCKER_PACKAGES := docker.io debootstrap

JVM_JAR := jvm/target/mqbench-jvm.jar
# Debian's Maven 3.8.7 writes colour resets (ESC[0m) to a pipe even in batch mode, into the console's first lines
export MAVEN_OPTS := $(strip $(MAVEN_OPTS) -Djansi.noreset=true)
JVM_SOURCES := jvm/pom.xml $(shell find jvm/src -name '*.java' 2>/dev/null)

LATEST_RUN = $$(ls -1dt results/*/manifest.json 2>/dev/null | head -1 | xargs -r dirname)

.PHONY: compare test report regress baseline evaluate brokers toxiproxy toolchain lint jvm crosscheck nats-cli mqttbench \
	nats-server docker images

# The virtual environment, rebuilt only when pyproject.toml or the C loops change. uv (from PyPI) installs the
# same requirements as pip in less time on this machine (41 s against 45-65 s); pip does it where uv cannot be
# installed. Both compile the bytecode (uv only when asked): with PYTHONDONTWRITEBYTECODE set, as it is here,
# every import of every process would otherwise compile its sources again. Where the package index's answers
# cannot be cached (as here), uv builds pyspark from its source again on every install and keeps each build in
# its cache (0.5-1.4 GiB a time: 33 GiB after a day of fresh clones filled this machine's disk), so its cache is
# pruned after each install down to what the last one used.
$(STAMP): pyproject.toml setup.py harness/runner/_hotloop.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing mqbench and its requirements into $(VENV)"; \
	if $(PY) -m pip install --quiet 'uv>=0.5'; then \
	  $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[dev]'; status=$$?; \
	  $(VENV)/bin/uv cache prune --quiet; test $$status -eq 0; \
	else echo "setup: uv could not be installed (above); pip installs instead"; $(PY) -m pip install --quiet -e '.[dev]'; fi
	@touch $@

## compare: run the default scenario on every system that can run here (mqcore and pyzmq need no broker)
# The virtual environment and the JVM worker are set up side by side (neither needs the other).
compare:
	@$(MAKE) --no-print-directory -j2 $(STAMP) jvm
	$(VENV)/bin/mqbench compare $(SCENARIOS) $(if $(BACKEND),--backend $(BACKEND))

## report: summarise the newest run (or RUNS="results/a results/b") into report.html, figures and summary.md
report: $(STAMP)
	$(VENV)/bin/mqbench report $(RUNS)

## regress: measure mqcore against pyzmq in one run and compare the ratios with results/baseline/
# Thresholds for our 2-core CI machine (docs/regression.md): a core kept busy by another process moved the
# mqcore/zmq ratios by up to ~26% (throughput) and ~50% (RTT p50/p99) on unchanged code; a 2x slowdown is -50%.
REGRESS_THRESHOLDS ?= --threshold 0.25 --metric-threshold lat_p50_us=0.6 --metric-threshold lat_p99_us=0.6 \
	--report-only mqcore:busy-poll
regress: $(STAMP)
	$(VENV)/bin/mqbench compare scenarios/regress.yaml --no-report
	$(VENV)/bin/mqbench regress "$(LATEST_RUN)" --baseline results/baseline $(REGRESS_THRESHOLDS)

## baseline: re-record results/baseline/ from three runs of scenarios/regress.yaml, pooled (commit it after)
baseline: $(STAMP)
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	for i in 1 2 3; do $(VENV)/bin/mqbench compare scenarios/regress.yaml --out "$$out" --no-report || exit 1; done; \
	$(VENV)/bin/mqbench baseline "$$out"/*/ --out results/baseline

## evaluate: slow consumers, broker/peer crashes, recovery, durability, measured feature matrix (docs/evaluation.md),
## the network scenarios across hosts (docs/network.md: needs root and toxiproxy), then what each guarantee costs
## and what replicated clusters do when a node dies, pauses or is cut off (docs/clusters.md: needs root)
evaluate: $(STAMP) brokers toxiproxy jvm
	$(VENV)/bin/mqbench compare scenarios/evaluation.yaml --backend $(or $(BACKEND),process)
	$(VENV)/bin/mqbench compare scenarios/network.yaml --backend $(or $(BACKEND),process)
	$(VENV)/bin/mqbench compare scenarios/replicated.yaml --backend $(or $(BACKEND),process)
	$(VENV)/bin/mqbench compare scenarios/node-faults.yaml --backend $(or $(BACKEND),process)

## toxiproxy: Shopify's Toxiproxy server (network faults between hosts) from the Go module proxy into
## .brokers/bin/toxiproxy-server; with CI=true a missing Go toolchain is a failure
TOXIPROXY_VERSION := v2.12.0
toxiproxy:
	@bin=$$(realpath -m $${MQBENCH_BROKERS_DIR:-.brokers}/bin); \
	if [ -x $$bin/toxiproxy-server ] || command -v toxiproxy-server >/dev/null; then exit 0; fi; \
	if ! command -v go >/dev/null; then echo "toxiproxy: needs Go (https://go.dev) to build; network faults will be skipped"; \
	  [ "$$CI" != "true" ]; exit; fi; \
	echo "toxiproxy: building $(TOXIPROXY_VERSION) into $$bin"; tmp=$$(mktemp -d); \
	GOBIN=$$tmp go install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION) && \
	mkdir -p $$bin && mv $$tmp/server $$bin/toxiproxy-server; rc=$$?; rm -rf $$tmp; \
	[ $$rc -eq 0 ] || [ "$$CI" != "true" ]

## brokers: install the broker binaries from Debian's packages (as root, on Debian/Ubuntu), then fetch the
## Apache Kafka and Apache RocketMQ jars with Maven into .brokers/ (harness/brokers/maven/*.xml pin them)
brokers:
	@missing=""; for p in $(BROKER_PACKAGES) $(TOOL_PACKAGES) $(BROWSER_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	if [ -z "$$missing" ]; then echo "brokers: all packages present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "brokers: installing$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "brokers: cannot install$$missing (needs root and apt-get); broker tests will be skipped"; \
	  [ "$$CI" != "true" ]; fi
	@$(MAKE) --no-print-directory $(JVM_BROKERS) nats-cli nats-server mqttbench

## nats-server: the pinned nats-server release built with the machine's Go into .brokers/bin (rebuilt when the
## pin changes: the binary's --version must name it)
nats-server:
	@bin=$$(realpath -m $${MQBENCH_BROKERS_DIR:-.brokers}/bin); want=$${NATS_SERVER_PIN:-$(NATS_SERVER)}; want=$${want##*@}; \
	if [ -x $$bin/nats-server ] && $$bin/nats-server --version 2>/dev/null | grep -q "$$want$$"; then \
	  echo "brokers: nats-server $$want present"; exit 0; fi; \
	if ! command -v go >/dev/null; then echo "brokers: nats-server $$want needs Go (apt-get install golang-go); Debian's nats-server is used"; \
	  [ "$$CI" != "true" ]; exit; fi; \
	echo "brokers: building $(NATS_SERVER) into $$bin"; tmp=$$(mktemp -d); \
	if GOBIN=$$tmp go install $(NATS_SERVER); then mkdir -p $$bin && mv $$tmp/nats-server $$bin/nats-server; rc=0; \
	else echo "brokers: go install $(NATS_SERVER) failed (above)"; rc=1; fi; rm -rf $$tmp; \
	[ $$rc -eq 0 ] || [ "$$CI" != "true" ]

## nats-cli: `nats bench` (natscli, pinned) built with the machine's Go into .brokers/bin, for crosscheck
nats-cli:
	@bin=$$(realpath -m $${MQBENCH_BROKERS_DIR:-.brokers}/bin); \
	if [ -x $$bin/nats ]; then echo "brokers: natscli present"; exit 0; fi; \
	if ! command -v go >/dev/null; then echo "brokers: natscli needs Go (apt-get install golang-go); nats bench is skipped"; \
	  [ "$$CI" != "true" ]; exit; fi; \
	echo "brokers: building $(NATSCLI) into $$bin"; \
	GOBIN=$$bin go install $(NATSCLI) || { echo "brokers: go install $(NATSCLI) failed (above)"; [ "$$CI" != "true" ]; }

## mqttbench: our MQTT benchmark client (tools/mqttbench, Eclipse Paho for Go, deps pinned in its go.sum) built
## with the machine's Go into .brokers/bin (rebuilt when its sources are newer), for crosscheck's MQTT reference
## at its best: mosquitto's own clients print every message, so their figure is a floor
mqttbench:
	@bin=$$(realpath -m $${MQBENCH_BROKERS_DIR:-.brokers}/bin); \
	if [ -x $$bin/mqttbench ] && [ -z "$$(find tools/mqttbench -type f -newer $$bin/mqttbench)" ]; then \
	  echo "brokers: mqttbench present"; exit 0; fi; \
	if ! command -v go >/dev/null; then echo "brokers: mqttbench needs Go (apt-get install golang-go); the MQTT crosscheck's tool at its best is skipped"; \
	  [ "$$CI" != "true" ]; exit; fi; \
	echo "brokers: building tools/mqttbench into $$bin"; mkdir -p $$bin; \
	(cd tools/mqttbench && go build -trimpath -o $$bin/mqttbench .) || { echo "brokers: go build of tools/mqttbench failed (above)"; [ "$$CI" != "true" ]; }

# One jar folder per pom, complete only once .complete exists (a cut download is fetched again); .complete
# holds the pom's checksum, so a jar added to a pom (a benchmark tool) is fetched into an existing folder too.
JVM_BROKERS := $(patsubst harness/brokers/maven/%.xml,jvm-broker-%,$(wildcard harness/brokers/maven/*.xml))
jvm-broker-%: harness/brokers/maven/%.xml
	@pom=$<; version=$$(sed -n 's:.*<broker.version>\(.*\)</broker.version>.*:\1:p' $$pom); \
	dir=$$(realpath -m $${MQBENCH_BROKERS_DIR:-.brokers}/$*-$$version); sum=$$(sha256sum < $$pom | cut -c1-64); \
	if [ "$$(cat $$dir/lib/.complete 2>/dev/null)" = "$$sum" ]; then echo "brokers: $* $$version present"; exit 0; fi; \
	if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then \
	  echo "brokers: $* needs Java and Maven: apt-get install maven openjdk-17-jre-headless"; \
	  [ "$$CI" != "true" ]; exit; fi; \
	echo "brokers: fetching $* $$version with Maven into $$dir"; rm -rf $$dir/lib $$dir/lib.part; \
	if mvn -q -B -Dstyle.color=never -f $$pom dependency:copy-dependencies -DincludeScope=runtime \
	     -DoutputDirectory=$$dir/lib.part; then \
	  mv $$dir/lib.part $$dir/lib && echo "$$sum" > $$dir/lib/.complete; \
	else echo "brokers: Maven could not fetch $* $$version (see above); its tests will be skipped"; \
	  rm -rf $$dir/lib.part; [ "$$CI" != "true" ]; fi

## docker: Debian's Docker engine and debootstrap, for the containers backend and `make images` (as root with apt
## when missing; nothing is started here)
docker:
	@missing=""; command -v dockerd >/dev/null || missing="docker.io"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "docker: installing$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "docker: cannot install$$missing (needs root and apt-get); the containers backend is skipped"; \
	  [ "$$CI" != "true" ]; fi

## images: each broker's image for the containers backend: the pinned official one when a registry serves it,
## else built here from a Debian base and the packages/jars the process backend runs (docs/brokers.md)
images: $(STAMP) docker brokers
	$(VENV)/bin/mqbench images $(if $(SYSTEMS),--systems $(SYSTEMS))

## toolchain: a C compiler and Python's headers, for the runner's C loops (as root with apt: installs them)
toolchain:
	@if command -v cc >/dev/null && $(PYTHON) -c "import os, sys, sysconfig; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_path('include'), 'Python.h')))"; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "toolchain: installing gcc and python3-dev (harness/runner/_hotloop.c)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc python3-dev >/dev/null; \
	else echo "toolchain: no C compiler or Python headers: the runner will use its Python loops" \
	  "(docs/harness-cost.md)"; fi

## test: the whole suite, then the performance-regression check (make regress) that guards mqcore, its
## summary by pandas unless MQBENCH_ENGINE says otherwise (the suite tests Spark's tables against pandas'; on
## the check's 13 million raw rows Spark's summary took 103 s of a 48-minute CI run here, docs/pipeline.md);
## in CI (CI=true) a missing broker or browser fails instead of skipping. A Docker engine is started for the
## containers tests when none answers (tools/docker-engine; stopped at the end, every container removed)
test: toolchain $(STAMP) brokers toxiproxy jvm docker
	@set +e; mkdir -p .pytest_cache; engine=$$PWD/.pytest_cache/dockerd.pid; \
	tools/docker-engine start $$engine || exit 1; trap "MQBENCH_PYTHON=$(PY) tools/docker-engine stop $$engine" EXIT; \
	$(VENV)/bin/mqbench images --systems $(TEST_IMAGES) || [ "$$CI" != "true" ] || exit 1; \
	now=.pytest_cache/current-test; err=.pytest_cache/stderr.log; rm -f $$now; \
	MQBENCH_CURRENT_TEST=$$now $(PY) -m pytest $(PYTEST_ARGS) 2> >(trap "" INT; tee $$err >&2); rc=$$?; wait $$!; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; exit 1; fi; \
	if [ $$rc -gt 128 ]; then \
	  echo "pytest was killed by SIG$$(kill -l $$((rc - 128))) while running $$(cat $$now 2>/dev/null || echo 'no test')."; \
	  echo "What it printed to stderr as it died (all of it is in $$err):"; \
	  grep -m1 -B6 -A24 'Fatal Python error' $$err || tail -30 $$err; fi; exit $$rc
	@MQBENCH_ENGINE=$${MQBENCH_ENGINE:-pandas} $(MAKE) --no-print-directory regress

## jvm: build the JVM worker (jvm/: JeroMQ and the brokers' Java clients) with Maven, only when jvm/ changed;
## without mvn/javac it installs them as root with apt, else says what to install (CI=true: that fails)
jvm: $(JVM_JAR)

$(JVM_JAR): $(JVM_SOURCES)
	@if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "jvm: installing maven and a JDK 17 (apt)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null; \
	  fi; \
	fi; \
	if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then \
	  echo "jvm: cannot build the JVM worker: install Maven and a JDK 17 (apt-get install maven" \
	    "openjdk-17-jdk-headless); jeromq and the Java clients are skipped"; [ "$$CI" != "true" ]; exit; \
	fi; \
	echo "jvm: building $@ (mvn package)"; \
	if (cd jvm && mvn -q -B -Dstyle.color=never package); then touch $@; \
	else echo "jvm: the Maven build failed (above); jeromq and the Java clients are skipped"; [ "$$CI" != "true" ]; fi

## crosscheck: each broker's own benchmark tool beside the harness on the same broker (docs/truthfulness.md)
crosscheck: $(STAMP) brokers jvm
	$(VENV)/bin/mqbench crosscheck scenarios/crosscheck.yaml $(if $(BACKEND),--backend $(BACKEND))

## lint: ruff and mypy over both packages
lint: $(STAMP)
	$(PY) -m ruff check mqcore harness tests
	$(PY) -m mypy mqcore harness
