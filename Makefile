# The README's two commands: `make run` and `make test`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan
MODEL ?= $(if $(wildcard models/en-de/config.json),models/en-de,tests/data/text/marian_en_de)

.PHONY: all bootstrap build test test-asan run bench clean

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

# The unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: bootstrap
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit

run: build
	./$(BUILD)/transformerd serve --model $(MODEL) --host 127.0.0.1 --port 8080

# The engine against transformers, side by side (makes its own venv).
bench: build
	sh bench/engine/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
