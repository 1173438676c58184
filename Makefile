# presk: the two commands of the README, and their parts.
#   make demo   set up .venv, install presk, run the main job on the bundled corpus
#   make test   set up .venv, install presk and the example plugin, run pytest and lit, and the
#               tests of the register widths again lowered for x86-64-v3 (AVX2)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.presk-installed
OUT    := build/demo

.PHONY: all install bytecode demo test test-narrow unit lit layout-points clean

all: test

# Re-installs only when the package's or the plugin's metadata changes. uv installs what pip would, in
# a quarter of the time (10 s against 37 on a clean clone, wheels cached); pip does it where uv cannot.
INSTALL_ARGS := -e '.[test]' -e ./examples/plugin
$(STAMP): pyproject.toml examples/plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv && \
	  $(BIN)/python -m uv pip install --quiet --python $(BIN)/python --compile-bytecode $(INSTALL_ARGS) || \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check $(INSTALL_ARGS)
	touch $@

# With PYTHONDONTWRITEBYTECODE set (it is on our CI machines) Python caches nothing it compiles, so
# every process of the suite (lit's presk-opt runs, the CLI tests' subprocesses) would compile presk
# and its dependencies again: 1.6 s to import presk's CLI instead of 0.7. The install compiles the
# dependencies (`--compile-bytecode`; pip does by default), and this presk's own modules, skipping
# those already current.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 presk examples/plugin > /dev/null

install: $(STAMP)

demo: $(STAMP) bytecode
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
	@echo "== the GPT trained natively in f32 on the characters of standard-library docstrings (GPT-2's init,"
	@echo "   validation on the last tenth every 20 steps; the loss starts at ln 92 = 4.52): $(OUT)/train_gpt.png"
	$(BIN)/presk train corpus/nlp/gpt.mlir --loss loss --step adamw.step --dim B=4 --dim T=32 --realize f32 \
	  --data stdlib --lr 1e-3 --steps 60 --eval-every 20 --plot $(OUT)/train_gpt.png
	@echo "== layouts chosen by the cost model (--plan auto; the first use measures this machine's profile, about a minute)"
	$(BIN)/presk bench corpus/nlp/gpt.mlir --entry loss --dim B=8 --dim T=64 --realize f32 --rounds 11
	$(BIN)/presk bench corpus/nlp/gpt.mlir --entry loss --dim B=8 --dim T=64 --realize f32 --rounds 11 --plan auto \
	  --save-plan $(OUT)/gpt.plan.json

unit: $(STAMP) bytecode
	$(BIN)/python -m pytest -q

lit: $(STAMP) bytecode
	$(BIN)/lit -q tests/filecheck tests/plan

# Every point of the layout space at larger shapes, on both executors; prints the point counts (docs/layouts.md §5).
layout-points: $(STAMP) bytecode
	PRESK_LAYOUT_POINTS=large $(BIN)/python -m pytest -s -q tests/unit/test_layout_points.py

# The tests whose outcome depends on the target's register widths: pytest's
# `target` marker (tests/unit/conftest.py) and these lit tests. `make test`
# runs them a second time lowered for x86-64-v3 (AVX2); on an AVX-512 host
# that code runs natively, so one machine tests both kinds of register file.
NARROW_TARGET := x86-64-v3
# "yes" where the host's vector registers are wider or more than the narrow target's (an AVX-512 host): only
# there does lowering for it test other widths. An AVX2 host already ran every test at them.
export WIDER_THAN_NARROW := from presk.target import host_machine as h, target_named as t; \
  n = t("$(NARROW_TARGET)"); print("yes" if (h().vector_bits, h().vector_registers) > (n.vector_bits, n.vector_registers) else "no")
NARROW_LIT := tests/plan \
  $(addprefix tests/filecheck/psk_kernel/,layout_passes.mlir pack_blocked.mlir passes_refused.mlir \
    tile_remainders.mlir vectorize.mlir vectorize_dump.mlir vectorize_width.mlir epilogue_refused.mlir) \
  $(addprefix tests/filecheck/psk_realize/,launch_lanes.mlir launch_pack.mlir launch_epilogue.mlir \
    launch_epilogue_unverified.mlir)
AND_NARROW ?= yes
JOBS ?= $(shell nproc)
# pytest-xdist hands whole files to JOBS workers, the longest first (tests/unit/conftest.py's
# LONGEST_FILES): a file's module fixtures (the calibration's profile, a lowered program) are made once.
PYTEST_PARALLEL := -n $(JOBS) --dist loadfile --no-loadscope-reorder

# Every suite runs even when another fails, so one CI run reports everything:
# pytest on every core, then (on a host whose registers are wider than the
# narrow target's) its register-width tests lowered for that target; lit
# beside them at the lowest priority (`nice`), taking the cores' idle time (a
# worker's last file, a test that waits) and every core once pytest is done,
# then lit's tests of the widths lowered for the narrow target on such a host.
# lit starts with its slowest tests (its "smart" order, from the times of its
# last run; a clean clone has the committed .lit_test_times.txt), so they run
# beside pytest rather than alone once it is done.
# They share one kernel cache, new for the run: what one test compiles, the
# others load, and nothing is read from an earlier run's cache (its keys hold
# the target, so both kinds share it). lit's output is printed after pytest's.
test: $(STAMP) bytecode
	@cache=$$(mktemp -d); lits=$$(mktemp); export PRESK_CACHE_DIR=$$cache; status=0; \
	narrow=$$([ -n "$(AND_NARROW)" ] && $(BIN)/python -c "$$WIDER_THAN_NARROW"); \
	echo "== $$(date +%T) pytest on $(JOBS) workers, lit beside it"; \
	( code=0; nice -n 19 $(BIN)/lit -q -j $(JOBS) tests/filecheck tests/plan || code=1; \
	  if [ "$$narrow" = yes ]; then \
	    echo "== $$(date +%T) lit's tests of the widths, lowered for $(NARROW_TARGET)"; \
	    PRESK_TARGET=$(NARROW_TARGET) nice -n 19 $(BIN)/lit -q -j $(JOBS) $(NARROW_LIT) || code=1; \
	  fi; echo "== $$(date +%T) lit done"; exit $$code ) > $$lits 2>&1 & lit=$$!; \
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) || status=1; \
	if [ "$$narrow" = yes ]; then \
	  echo "== $$(date +%T) pytest -m target, lowered for $(NARROW_TARGET)"; \
	  PRESK_TARGET=$(NARROW_TARGET) $(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m target || status=1; \
	elif [ -n "$(AND_NARROW)" ]; then \
	  echo "== this host's vector registers are $(NARROW_TARGET)'s: the tests ran at its widths"; \
	fi; echo "== $$(date +%T) pytest done"; wait $$lit || status=1; echo "== lit"; cat $$lits; \
	echo "== $$(date +%T) done"; rm -rf $$cache $$lits; exit $$status

# The whole suite lowered for AVX2 (x86-64-v3): on an AVX-512 host it runs the
# narrower register file's code natively, so one machine tests both kinds.
test-narrow: $(STAMP)
	PRESK_TARGET=$(NARROW_TARGET) $(MAKE) test AND_NARROW=

clean:
	rm -rf build .pytest_cache .hypothesis $(VENV)
