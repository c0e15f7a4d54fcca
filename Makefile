# Front door. `make run` builds and runs the demo model; `make test` runs
# every test (installing missing Debian packages first).
SHELL      := /bin/bash
.SHELLFLAGS := -o pipefail -c
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

DEMO_SAMPLE ?= sample_0.npy
run: build
	@echo "== demo: handwritten digit classifier (models/demo/digits.onnx) on models/demo/$(DEMO_SAMPLE)"
	$(BUILD)/bin/mcpctl run models/demo/digits.onnx $(BUILD)/demo-out input=models/demo/$(DEMO_SAMPLE) | tee $(BUILD)/demo-out.summary
	@echo "== predicted digit: $$(sed -n 's/^label: .*{\([0-9]*\)}$$/\1/p' $(BUILD)/demo-out.summary)  (true digit: $$(awk '$$1=="$(DEMO_SAMPLE)"{print $$2}' models/demo/samples.txt))"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit and conformance tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: $(DEPS_STAMP)
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DMCP_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
