# Front door. `make run` builds and runs the demo model; `make test` runs
# every test (installing missing Debian packages first).
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: all build run test test-asan deps clean

all: build

$(DEPS_STAMP): scripts/install-deps.sh
	./scripts/install-deps.sh
	mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

build: $(DEPS_STAMP)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/mcpctl run models/demo/digits.onnx $(BUILD)/demo-out input=models/demo/sample_0.npy
	@python3 -c "import numpy as n; p=n.load('$(BUILD)/demo-out/probabilities.npy'); print('predicted digit:', int(p.argmax()), ' p=%.3f' % p.max())" 2>/dev/null || true

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit and conformance tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: $(DEPS_STAMP)
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DMCP_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
