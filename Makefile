# gobatch: `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
GO ?= go
# The race detector on this project's 2-core machines takes sampler's tests to several minutes
# (past go test's default 10-minute timeout when the machine is shared): the timeout is a hang
# detector here, not a time budget.
GOFLAGS_TEST ?= -race -count=1 -timeout 30m

.PHONY: all build sysdeps tools go-build clib venv pyinstall wheel wheelhouse test go-test py-test check faults demo bench clean fmt vet

all: build

build: go-build clib

# The PROJ C library, which the sampler's projections use (through github.com/twpayne/go-proj,
# cgo, found with pkg-config): Debian's pkg-config, libproj-dev and proj-data, installed with
# apt-get when pkg-config or PROJ is missing (tools/install_proj.sh, which says first what it
# installs and which installed packages it upgrades).
sysdeps:
	@pkg-config --exists proj 2>/dev/null || sh tools/install_proj.sh

# The servers the object-store tests and benchmarks run on 127.0.0.1 (readers/objstore,
# internal/s3test): versitygw, an S3 server that checks SigV4, built with go install into the
# repository's .tools/bin (ignored) once. The tests fail, saying to run this, when it is missing.
VERSITYGW := .tools/bin/versitygw
tools: $(VERSITYGW)

$(VERSITYGW):
	GOBIN=$(CURDIR)/.tools/bin $(GO) install github.com/versity/versitygw/cmd/versitygw@v1.8.0

go-build: sysdeps
	@mkdir -p bin
	$(GO) build -o bin/shmloader ./cmd/shmloader
	$(GO) build -o bin/faultproxy ./cmd/faultproxy

clib:
	@mkdir -p build
	$(MAKE) -C pybind OUT=$(CURDIR)/build

# The venv is rebuilt only when the requirements change.
$(VENV)/.stamp: python/requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r python/requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

# Installs `import gobatch` into the venv the way a user would (`pip install ./python`):
# the package's build compiles the C consumer library and the shmloader binary.
pyinstall: venv sysdeps
	$(VPY) -m pip install -q --no-build-isolation --force-reinstall --no-deps ./python

# The platform wheel a user without Go, a C compiler or PROJ installs (README "Install"):
# dist/gobatch-<version>-py3-none-manylinux_<glibc>_x86_64.whl. It needs Go, gcc, PROJ
# (sysdeps) and a small build venv of its own (python/requirements-build.txt, in
# build/venv-wheel), never the development venv. pip builds the package as pyinstall does,
# with PROJ's proj.db and proj.ini copied in (GOBATCH_BUNDLE_PROJ_DATA, python/setup.py);
# `auditwheel repair` then copies libproj and the libraries it needs into gobatch.libs/, points
# shmloader's RPATH there ($ORIGIN-relative) and picks the manylinux tag the symbols allow;
# `auditwheel show` prints what the wheel needs from the system. Rebuilt when a tracked source
# of the package changes.
BVENV := build/venv-wheel
BVPY := $(BVENV)/bin/python
WHEEL_SRC := $(shell git ls-files go.mod go.sum '*.go' pybind python/gobatch python/setup.py python/pyproject.toml 2>/dev/null)
wheel: dist/.wheel-stamp

$(BVENV)/.stamp: python/requirements-build.txt
	rm -rf $(BVENV)
	$(PY) -m venv $(BVENV)
	$(BVPY) -m pip install -q --upgrade pip
	$(BVPY) -m pip install -q -r python/requirements-build.txt
	touch $@

dist/.wheel-stamp: $(WHEEL_SRC) $(BVENV)/.stamp | sysdeps
	rm -rf python/build build/wheel dist/gobatch-*.whl
	GOBATCH_BUNDLE_PROJ_DATA=$$(pkg-config --variable=datadir proj) \
	  $(BVPY) -m pip wheel -q --no-deps --no-build-isolation -w build/wheel ./python
	rm -f python/gobatch/_data/proj/proj.db python/gobatch/_data/proj/proj.ini
	PATH=$(CURDIR)/$(BVENV)/bin:$$PATH $(BVPY) -m auditwheel repair -w dist build/wheel/gobatch-*.whl
	PATH=$(CURDIR)/$(BVENV)/bin:$$PATH $(BVPY) -m auditwheel show dist/gobatch-*.whl
	@ls -l dist/gobatch-*.whl
	touch $@

# numpy as a local wheel, for python/tests/loader/test_wheel.py's offline install (downloaded once).
WHEELHOUSE := build/wheelhouse
wheelhouse: $(WHEELHOUSE)/.stamp

$(WHEELHOUSE)/.stamp: $(VENV)/.stamp
	$(VPY) -m pip download -q --only-binary :all: --no-deps -d $(WHEELHOUSE) \
	  numpy==$$($(VPY) -c 'import numpy; print(numpy.__version__)')
	touch $@

test: build pyinstall tools wheel wheelhouse go-test py-test

go-test: sysdeps tools
	$(GO) vet ./...
	$(GO) test $(GOFLAGS_TEST) ./...

# Every Python test but the fault trials (tests/faults), which `make faults` runs, each in a
# mount namespace of its own and FAULT_REPS times (CI runs both).
py-test: tools
	cd python && ../$(VPY) -m pytest -q -p no:cacheprovider --ignore=tests/faults tests

# The edit-test loop's tier, under 2 minutes on this project's machine: go vet, every Go test
# without the race detector (make test runs them with it), and the Python tests of the ring,
# the leases, the Loader and the configurations (CHECK_PY), which start no fault trial, object
# store server, training run or ocf-data-sampler reference. make test runs everything.
CHECK_PY ?= tests/ring/test_ring_protocol.py tests/ring/test_leases.py tests/loader/test_loader.py tests/sampler/test_layouts.py \
	tests/loader/test_plan.py tests/loader/test_newcomer_errors.py tests/ocf/test_ocf_config.py
check: build pyinstall
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	cd python && ../$(VPY) -m pytest -q -p no:cacheprovider $(CHECK_PY)

# Fault trials (docs/PROTOCOL.md 1.1, 3.5.1, appendix A): processes stopped at exact protocol
# states through GOBATCH_FAILPOINT, named rings squatted, followed and truncated, FAULT_REPS times
# each. tools/faultns.py runs every trial (each Go fault test, each test id of
# python/tests/faults/test_faults_*.py) in its own mount namespace with a private /dev/shm, bounded by
# FAULT_TIMEOUT seconds; prints one FAULT line per trial with its count and worst latency (for
# producer deaths, 3.7: the takeover or restart and the longest wait for a batch, every batch
# checked exactly once and in order), and a FAULTNS line with each trial's verdict. Issue 21's
# node loader figures are FAULT_REPS=100 (raise FAULT_TIMEOUT with it); CI's short form is
# `make faults FAULT_REPS=2 FAULT_STREAM=20000`.
FAULT_REPS ?= 20
FAULT_TIMEOUT ?= 600
# Length of the long-stream trial (tests/faults/test_faults_stream.py: producers killed repeatedly, every
# batch checked); the issue's 10^6 here, CI's short form fewer.
FAULT_STREAM ?= 1000000
faults: build pyinstall
	set -o pipefail; GOBATCH_FAULT_REPS=$(FAULT_REPS) timeout 900 $(PY) tools/faultns.py --timeout $(FAULT_TIMEOUT) \
	  go ./ring/ 'Fault|Failpoint' | grep -E '^(FAULT|--- FAIL|FAIL|panic)|_test.go'
	GOBATCH_FAULT_REPS=$(FAULT_REPS) GOBATCH_FAULT_STREAM=$(FAULT_STREAM) timeout 1800 $(PY) tools/faultns.py --timeout $(FAULT_TIMEOUT) \
	  pytest $(CURDIR)/$(VPY) $$(cd python && ls tests/faults/test_faults_*.py)

demo: build pyinstall
	$(VPY) benchmarks/demo.py

bench: build pyinstall tools
	$(VPY) benchmarks/run_all.py

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin build dist python/build python/gobatch/_bin python/gobatch/_lib python/gobatch/_data
