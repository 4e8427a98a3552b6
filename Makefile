# The two commands of the README. Both install what is missing first (install-deps.sh, apt only).
#   make run   builds the release preset (the CLI and the Python module) and runs the main job on the embedded default
#   make test  builds and runs every test: the -Werror build (C++, Python, notebooks) and ASan + UBSan
JOBS ?= $(shell nproc)

.PHONY: run test deps build asan slow
deps:
	./install-deps.sh

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS) --target placelab _core

run: build
	./build/release/cli/placelab place
	./build/release/cli/placelab compare

asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

# The sanitizer run goes first so that ctest's closing line is the full suite's.
test: asan
	cmake --preset ci
	cmake --build --preset ci -j $(JOBS)
	ctest --preset ci -j $(JOBS)

# The slow checks apart (ctest label "slow": every torchvision model, LLM-scale runs); not part of `make test`.
slow: build
	cmake --build --preset release -j $(JOBS)
	ctest --preset slow -j $(JOBS)
