# Two commands do everything on a fresh Debian 12 machine:
#   make run    install what is missing, build, serve ./www (or a welcome page) on 127.0.0.1:8080
#   make test   install what is missing, build (release + ASan/UBSan), run every test tier
.PHONY: run test build build-asan deps deps-test bench fuzz format clean

LISTEN ?= 127.0.0.1:8080
ROOT_ARG := $(if $(wildcard www),--root www,)

run: deps build
	./build/release/peregrine --listen $(LISTEN) $(ROOT_ARG)

test: deps-test
	./scripts/run-tests.sh

build:
	cmake --preset release >/dev/null
	cmake --build --preset release

build-asan:
	cmake --preset asan >/dev/null
	cmake --build --preset asan

deps:
	./scripts/install-deps.sh build

deps-test:
	./scripts/install-deps.sh test

bench: build
	./scripts/install-deps.sh bench
	python3 bench/run.py

fuzz:
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	for dir in tests/fuzz/*/; do \
	  name=$$(basename $$dir); \
	  ./build/fuzz/fuzz_$$name -max_total_time=$${FUZZ_SECONDS:-120} $$dir/corpus || exit 1; \
	done

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build
