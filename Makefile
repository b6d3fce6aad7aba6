# Shortcuts for developers. The README's two commands need no make (a fresh machine has none):
#   make run    = scripts/run.sh: install what is missing, build the server, serve on $(LISTEN)
#   make test   = scripts/test.sh: install what is missing, build (release + ASan/UBSan), run all
#   make deb    = scripts/build-deb.sh: the Debian package, in build/deb/
.PHONY: run test deb build build-asan deps deps-test bench fuzz format clean

LISTEN ?= 127.0.0.1:8080

run:
	LISTEN=$(LISTEN) ./scripts/run.sh

test:
	./scripts/test.sh

deb:
	./scripts/build-deb.sh

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

# Each target for FUZZ_SECONDS on its corpus, or only FUZZ=<name>. What a run finds goes to
# build/fuzz/corpus/<name>, not into the committed corpus: docs/style.md says how to merge it.
fuzz:
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	for dir in tests/fuzz/$${FUZZ:-*}/; do \
	  name=$$(basename $$dir); \
	  mkdir -p build/fuzz/corpus/$$name; \
	  ./build/fuzz/fuzz_$$name -max_total_time=$${FUZZ_SECONDS:-120} \
	    build/fuzz/corpus/$$name $$dir/corpus || exit 1; \
	done

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build
