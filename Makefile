# The README's two commands: `make run` and `make test`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# `make run` serves every model under models/ (models/en-de, and models/de-en
# once it is there); MODEL=DIR serves that one model instead.
MODEL ?=
MODELS_DIR ?= $(if $(wildcard models/*/config.json),models,)
RUN_MODELS = $(if $(MODEL),--model $(MODEL),$(if $(MODELS_DIR),--models-dir $(MODELS_DIR),--model tests/data/text/marian_en_de))

.PHONY: all bootstrap build test test-asan test-tsan test-pack run bench clean

all: build

bootstrap:
	@sh tools/bootstrap.sh

build: bootstrap
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

test: build
	@sh tools/bootstrap.sh --with-browser
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-tsan
	$(MAKE) test-pack

# What a lent GPU runs first (tools/gpu-prebuilt.sh pack: Release, -O3,
# warnings as errors, the CUDA module for sm_90), built and packed here and
# the pack used on the CPU, so that it cannot rot between two GPUs; skipped
# without a CUDA toolkit.
test-pack: bootstrap
	BUILD=$(BUILD) sh tools/gpu-prebuilt.sh selftest

# The unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: bootstrap
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit

# The daemon's tests again under ThreadSanitizer: the HTTP threads, the
# scheduler and the shared workers (test_pool), the watchdog and the drain, with one engine thread per worker
# (OpenBLAS is not instrumented; with one thread neither it nor the CPU
# backend's pool starts a thread).
TSAN_TESTS ?= test_server_http|test_server_harden|test_models|test_stream|test_cache|test_unload|test_pool|test_docpool
test-tsan: bootstrap
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_TSAN=ON -DTD_CUDA=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target transformerd test_server_http test_server_harden test_models test_stream test_cache test_unload test_pool test_docpool
	cd $(TSAN_BUILD) && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) -R '^($(TSAN_TESTS))$$'

run: build
	./$(BUILD)/transformerd serve $(RUN_MODELS) --host 127.0.0.1 --port 8080

# The engine against transformers, side by side (makes its own venv).
bench: build
	sh bench/engine/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-dev
