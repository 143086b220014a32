# pt2 — the two commands: `make demo` and `make test` (both set up everything).
PYTHON ?= python3
BUILD  ?= build
JOBS   ?= $(shell nproc)

.PHONY: all bootstrap build develop demo test test-lit test-python clean

all: build

bootstrap:
	@sh scripts/bootstrap.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Registers python/ with the current Python (an editable install without pip).
develop: build
	$(PYTHON) -c 'import site, os; p = os.path.join(site.getsitepackages()[0], "pt2-dev.pth"); open(p, "w").write(os.path.abspath("python") + "\n"); print("wrote", p)'

demo: build
	PYTHONPATH=python $(PYTHON) examples/demo.py

test-lit: build
	cd $(BUILD) && ctest --output-on-failure

test-python: build
	PYTHONPATH=python $(PYTHON) -m pytest -q tests

test: test-lit test-python

clean:
	rm -rf $(BUILD)
