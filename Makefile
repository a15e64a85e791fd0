# Thin wrapper over CMake.  Each target installs the Debian packages it needs
# first (scripts/deps.sh, as root), so it works on a fresh Debian 12 machine:
# `make` and `make run` only the build packages, `make test` and `make bench`
# also those the tests or the benchmarks use.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX     ?= /usr/local
CMAKE_ARGS ?=

.PHONY: all deps deps-test deps-bench build run test test-release test-asan test-tsan install bench fuzz clean

all: build

deps:
	@sh scripts/deps.sh build

deps-test:
	@sh scripts/deps.sh test

deps-bench:
	@sh scripts/deps.sh bench

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on a generated example: deduplicate a crawler's URL list.
# Quiet: the build's output is shown only when it fails.
run: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target dedup_cli >$(BUILD)/run-build.log 2>&1 || \
		{ cat $(BUILD)/run-build.log; echo "make run: the build failed (log: $(BUILD)/run-build.log)" >&2; exit 1; }
	@sh scripts/run-example.sh $(BUILD)/dedup

# The whole suite, twice: optimised, then ASan+UBSan; threaded tests once more
# under TSan.
test: test-release test-asan test-tsan

# The optimised pass holds the long failover and kill trials, which mostly
# wait on Redis (about 0.6 of a core each), so it runs one test more than
# there are cores.
test-release: deps-test build
	@cd $(BUILD) && ctest --output-on-failure -j $$(( $(JOBS) + 1 ))

test-asan: deps-test
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEDUP_SANITIZE=ON -DDEDUP_BENCH=OFF >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	@cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -E '^bench'

test-tsan: deps-test
	@cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEDUP_TSAN=ON -DDEDUP_BENCH=OFF >/dev/null
	@cmake --build $(BUILD_TSAN) -j $(JOBS) --target threads_tests
	@cd $(BUILD_TSAN) && TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp \
		ctest --output-on-failure -j $(JOBS) -L threads

install: build
	@cmake --install $(BUILD)

bench: deps-bench build
	@sh bench/run.sh $(BUILD)

fuzz: deps-test
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DDEDUP_FUZZ=ON -DDEDUP_BENCH=OFF -DDEDUP_TESTS=OFF \
		-DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) build-fuzz
