# Front door. `make run` builds and runs the demo model; `make test` runs
# every test (installing missing Debian packages first).
SHELL      := /bin/bash
.SHELLFLAGS := -o pipefail -c
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: all build run predict test test-asan deps fetch install clean

all: build

$(DEPS_STAMP): scripts/install-deps.sh
	./scripts/install-deps.sh
	mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

# llama.cpp's source from the npm package node-llama-cpp (vocab test vectors,
# gguf-py, the benchmark's anchor) into .cache/llama.cpp, and the e2e tests'
# Node.js clients (the OpenAI SDK) into .cache/node; quick once there.
fetch: $(DEPS_STAMP)
	./tools/fetch-llama-cpp.sh
	./tools/fetch-node-clients.sh

build: $(DEPS_STAMP)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

PORT ?= 8080
# Builds, then serves the demo model in the foreground (Ctrl-C stops it).
run: build
	@echo "== serving the demo digit classifier (models/demo/digits.onnx) on http://127.0.0.1:$(PORT)"
	@echo "== in another terminal, classify a handwritten 2 (models/demo/sample_0.npy):"
	@echo "curl -s -X POST http://127.0.0.1:$(PORT)/v1/infer -H 'Content-Type: application/json' -d '$$(cat models/demo/sample_0.json)'"
	@echo "== or: $(BUILD)/bin/mcpctl infer digits input=models/demo/sample_0.npy --server http://127.0.0.1:$(PORT)"
	$(BUILD)/bin/mcp2026-server --model-path models/demo/digits.onnx --port $(PORT)

# One inference through the engine alone (no server).
predict: build
	$(BUILD)/bin/mcpctl run models/demo/digits.onnx $(BUILD)/demo-out input=models/demo/sample_0.npy

test: build fetch
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit and conformance tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: $(DEPS_STAMP) fetch
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DMCP_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

PREFIX ?= /usr/local
# Installs mcp2026-server, mcpctl, libmcp, its headers and mcp.pc under PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
