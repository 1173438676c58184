# presk: the two commands of the README, and their parts.
#   make demo   set up .venv, install presk, run the main job on the bundled corpus
#   make test   set up .venv, install presk and the example plugin, run pytest and lit

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.presk-installed
OUT    := build/demo

.PHONY: all install demo test test-narrow unit lit layout-points clean

all: test

# Re-installs only when the package's or the plugin's metadata changes.
$(STAMP): pyproject.toml examples/plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' -e ./examples/plugin
	touch $@

install: $(STAMP)

demo: $(STAMP)
	@mkdir -p $(OUT)
	@echo "== every corpus program parses, verifies and prints back identically"
	@for f in corpus/*.mlir corpus/nlp/*.mlir; do \
	  $(BIN)/presk-opt $$f -o $(OUT)/once.mlir && $(BIN)/presk-opt $(OUT)/once.mlir -o $(OUT)/twice.mlir && \
	  cmp -s $(OUT)/once.mlir $(OUT)/twice.mlir && echo "   $$f: round trip ok" || exit 1; \
	done
	@echo "== the GPT of the seeds (V=92, D=64, H=2, L=2), bound to B=2, T=32: $(OUT)/gpt.core.mlir"
	$(BIN)/presk dump corpus/nlp/gpt.mlir --stage core --dim B=2 --dim T=32 > $(OUT)/gpt.core.mlir
	@echo "== its loss on the reference interpreter, in f64 and with mpmath at 128 bits"
	$(BIN)/presk run corpus/nlp/gpt.mlir --entry loss --dim B=2 --dim T=32
	$(BIN)/presk run corpus/nlp/gpt.mlir --entry loss --dim B=2 --dim T=32 --bits 128
	@echo "== one AdamW step over its whole parameter record"
	$(BIN)/presk run corpus/nlp/gpt.mlir --entry adamw.step --dim B=2 --dim T=32 --output $(OUT)/adamw.npz
	@echo "== the other corpus entries"
	$(BIN)/presk run corpus/minigpt.mlir --entry loss --dim B=2 --dim T=8
	$(BIN)/presk run corpus/attention.mlir --entry SelfAttention.apply --dim B=2 --dim T=8
	$(BIN)/presk run corpus/layernorm.mlir --entry LayerNorm.apply --dim B=2 --dim T=8
	$(BIN)/presk run corpus/mlp.mlir --entry mse --dim B=4
	@echo "== PSK-Realize: the GPT's fusion groups and launches: $(OUT)/gpt.realize.mlir"
	$(BIN)/presk dump corpus/nlp/gpt.mlir --stage realize --realize f32 > $(OUT)/gpt.realize.mlir
	$(BIN)/presk launches corpus/nlp/gpt.mlir --entry loss --entry adamw.step --dim B=2 --dim T=32
	@echo "== PSK-Kernel: the loss's kernels ($(OUT)/loss.kernel.mlir), run exactly and compiled, in f32"
	$(BIN)/presk dump corpus/nlp/gpt.mlir --stage kernel --entry loss --dim B=2 --dim T=32 --realize f32 > $(OUT)/loss.kernel.mlir
	$(BIN)/presk run corpus/nlp/gpt.mlir --entry loss --dim B=2 --dim T=32 --realize f32 --backend kernel
	$(BIN)/presk run corpus/nlp/gpt.mlir --entry loss --dim B=2 --dim T=32 --realize f32 --backend native
	$(BIN)/presk bench corpus/nlp/gpt.mlir --entry loss --entry adamw.step --dim B=2 --dim T=32 --realize f32

unit: $(STAMP)
	$(BIN)/python -m pytest -q

lit: $(STAMP)
	$(BIN)/lit -q tests/filecheck tests/plan

# Every point of the layout space at larger shapes, on both executors; prints the point counts (docs/layouts.md §5).
layout-points: $(STAMP)
	PRESK_LAYOUT_POINTS=large $(BIN)/python -m pytest -s -q tests/unit/test_layout_points.py

# Both suites run even when the first fails, so one CI run reports everything.
# They share one kernel cache, new for the run: what one test compiles, the
# others load, and nothing is read from an earlier run's cache.
test: $(STAMP)
	@status=0; cache=$$(mktemp -d); \
	PRESK_CACHE_DIR=$$cache $(BIN)/python -m pytest -q || status=1; \
	PRESK_CACHE_DIR=$$cache $(BIN)/lit -q tests/filecheck tests/plan || status=1; \
	rm -rf $$cache; exit $$status

# The suite lowered for AVX2 (x86-64-v3): on an AVX-512 host it runs the
# narrower register file's code natively, so one machine tests both kinds.
test-narrow: $(STAMP)
	PRESK_TARGET=x86-64-v3 $(MAKE) test

clean:
	rm -rf build .pytest_cache .hypothesis $(VENV)
