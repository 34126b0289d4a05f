# Tests, demo and benchmarks. Each top-level target installs what it
# needs first (scripts/install-deps.sh is idempotent and quick when done).

ASAN_BUILD := build-asan
SAN_FLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# Kernel faults are turned into errors by opcore's own SIGSEGV handler.
ASAN_ENV   := ASAN_OPTIONS=allow_user_segv_handler=1:detect_leaks=1:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:use_sigaltstack=0:detect_stack_use_after_return=0 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# valgrind cannot decode AVX-512: kernels built under it target a plainer CPU.
VALGRIND_MARCH := $(if $(filter x86_64,$(shell uname -m)),x86-64-v2,)
VALGRIND   := valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
PIP_FLAGS  := -q --disable-pip-version-check --no-build-isolation

deps:
	@scripts/install-deps.sh

# Runs every test: the layering check, C (plain, ASan+UBSan, valgrind),
# the fuzzers for a bounded time (mk/fuzz.mk), then Python. Each phase
# prints its time (TEST_TIMES=0: not). Independent test programs and test
# files run TEST_JOBS at a time (default: the CPUs this process may use);
# a program's output is printed whole when it ends.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
# -jTEST_JOBS for a sub-make, unless this make already shares a jobserver
TEST_J = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(TEST_JOBS))
TEST_TIMES ?= 1
timed = @s=$$(date +%s); $(MAKE) --no-print-directory $(1) || exit $$?; \
        [ "$(TEST_TIMES)" = 0 ] || echo "== make $(1): $$(( $$(date +%s) - s )) s"

test: deps
	$(call timed,$(TEST_J) all)
	$(call timed,check-layers)
	$(call timed,test-c)
	$(call timed,test-examples)
	$(call timed,test-asan)
	$(call timed,test-valgrind)
	$(call timed,test-fuzz)
	$(call timed,test-python)

.PHONY: check-layers

# The runtime's layers call only downward (docs/architecture.md): checked
# from the includes of src/ and, with the objects, from the calls.
check-layers: lib cli
	$(PYTHON) scripts/check_layers.py --src src --objects $(BUILD)/obj

# Tests of faults, stacks and isolation, run a second time with every kernel
# on its engine core's stack (OC_KERNEL_STACK=1).
KERNEL_STACK_TESTS := test_engine test_isolation test_prepared

# First: libopcore exports its public API and nothing else (issue #23).
# Each binary runs each of its tests in a process of its own, killed after
# OC_TEST_TIMEOUT seconds (tests/c/support/runner.h).
# One run of a test program is a target (c-run/NAME, ...): test-c, test-asan
# and test-valgrind make theirs TEST_JOBS at a time, each one's output
# printed whole (--output-sync). The programs share nothing: each test makes
# its files in a temporary folder of its own.
TEST_NAMES := $(notdir $(TEST_BINS))
C_RUNS := $(addprefix c-run/,$(TEST_NAMES)) c-run-xsmm0/test_tile \
          $(addprefix c-run-kstack/,$(KERNEL_STACK_TESTS))
ASAN_RUNS := $(addprefix asan-run/,$(TEST_NAMES)) \
             $(addprefix asan-run-kstack/,$(KERNEL_STACK_TESTS))
VALGRIND_RUNS := $(addprefix valgrind-run/,$(TEST_NAMES))
.PHONY: $(C_RUNS) $(ASAN_RUNS) $(VALGRIND_RUNS)
run_tests = @$(MAKE) --no-print-directory $(TEST_J) --output-sync=target $(1)

test-c: tests
	scripts/check-exports.sh $(BUILD)/libopcore.so.0
	$(call run_tests,$(C_RUNS))

$(filter c-run/%,$(C_RUNS)): c-run/%:
	@echo "== $(BUILD)/tests/$*"; $(BUILD)/tests/$*
# the tile matmul once more on BLIS alone (libxsmm off: mk/tile.mk)
c-run-xsmm0/test_tile:
	@echo "== OC_TILE_XSMM=0 $(BUILD)/tests/test_tile"; OC_TILE_XSMM=0 $(BUILD)/tests/test_tile
# kernels on the engine's own stacks (else they run on the caller's where it
# has room: docs/engine.md)
$(filter c-run-kstack/%,$(C_RUNS)): c-run-kstack/%:
	@echo "== OC_KERNEL_STACK=1 $(BUILD)/tests/$*"; OC_KERNEL_STACK=1 $(BUILD)/tests/$*

test-examples: lib cli
	examples/relu/run.sh
	examples/ops/run.sh
	@# install into a staging prefix and build a host program with pkg-config
	rm -rf $(BUILD)/stage
	$(MAKE) install PREFIX=$(abspath $(BUILD)/stage)
	PKG_CONFIG_PATH=$(abspath $(BUILD)/stage)/lib/pkgconfig sh -c '$(CC) examples/host/relu_host.c $$(pkg-config --cflags --libs opcore) -Wl,-rpath,$(abspath $(BUILD)/stage)/lib -o $(BUILD)/relu_host'
	$(BUILD)/stage/bin/opcore build --name relu --compute examples/relu/tcm/relu.c --shape examples/relu/shape.c -o $(BUILD)/stage-out
	$(BUILD)/relu_host $(BUILD)/stage-out/librelu.so
	@# shared only: no libopcore.a, and `pkg-config --static` links the shared library too
	test ! -e $(BUILD)/stage/lib/libopcore.a
	PKG_CONFIG_PATH=$(abspath $(BUILD)/stage)/lib/pkgconfig sh -c '$(CC) examples/host/relu_host.c $$(pkg-config --static --cflags --libs opcore) -Wl,-rpath,$(abspath $(BUILD)/stage)/lib -o $(BUILD)/relu_host_static'
	$(BUILD)/relu_host_static $(BUILD)/stage-out/librelu.so

test-asan:
	$(MAKE) $(TEST_J) BUILD=$(ASAN_BUILD) OPT="-O1 -g" SAN="$(SAN_FLAGS)" lib cli tests
	$(call run_tests,$(ASAN_RUNS))

$(filter asan-run/%,$(ASAN_RUNS)): asan-run/%:
	@echo "== asan+ubsan: $(ASAN_BUILD)/tests/$*"; $(ASAN_ENV) $(ASAN_BUILD)/tests/$*
$(filter asan-run-kstack/%,$(ASAN_RUNS)): asan-run-kstack/%:
	@echo "== asan+ubsan, OC_KERNEL_STACK=1: $(ASAN_BUILD)/tests/$*"; \
	    OC_KERNEL_STACK=1 $(ASAN_ENV) $(ASAN_BUILD)/tests/$*

test-valgrind: tests
	$(call run_tests,$(VALGRIND_RUNS))

$(VALGRIND_RUNS): valgrind-run/%:
	@echo "== valgrind: $(BUILD)/tests/$*"; \
	    OC_UNDER_VALGRIND=1 OC_TEST_TIMEOUT=1200 OPCORE_MARCH=$(VALGRIND_MARCH) \
	    $(VALGRIND) $(BUILD)/tests/$*

# Then the torch kernel shim (src/torch/boxed_kernel.cc) for the installed
# torch, into python/opcore/torch_kernels/ (where opcore looks first; the
# wheel build puts one there too). No torch: nothing to do.
python: lib
	sh scripts/ensure-setuptools.sh $(PYTHON)
	$(PYTHON) -m pip install $(PIP_FLAGS) -e .
	$(PYTHON) -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('torch') is None else 1)" || \
	    $(PYTHON) -c "from opcore import _torch_native as t; print('opcore: torch kernel shim', t.build_shim(t.PREBUILT_DIR))"

# The torch tests run twice: on the native route (the shim) and with
# OPCORE_TORCH_NATIVE=0 (the fallback route: public torch.library APIs
# only; see python/opcore/_torch_native.py).
TORCH_TESTS := tests/python/test_torch.py tests/python/test_ops_torch.py tests/python/test_mlp.py tests/python/test_autograd_kernel.py \
               tests/python/test_torch_parity.py tests/python/test_direct_calls.py

# pytest-xdist (requirements-dev.txt) runs the files TEST_JOBS at a time
# (tests/python/conftest.py keeps each file on one worker); without it, one
# after another.
PYTEST_JOBS = $(shell $(PYTHON) -c "import xdist" 2>/dev/null && [ $(TEST_JOBS) -gt 1 ] && \
                printf -- '-n %s --dist loadgroup --no-loadscope-reorder' $(TEST_JOBS))

test-python: python cli
	$(PYTHON) scripts/check_py_imports.py
	$(PYTHON) -m pytest -q $(PYTEST_JOBS) tests/python
	OPCORE_TORCH_NATIVE=0 $(PYTHON) -m pytest -q $(PYTEST_JOBS) $(TORCH_TESTS)

demo: deps
	$(MAKE) lib cli
	$(MAKE) python
	$(PYTHON) examples/mlp/demo.py

bench: deps
	$(MAKE) lib cli python
	bench/run.sh

$(BUILD)/bench/relu_bench: bench/relu_bench.c $(BUILD)/libopcore.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -O2 -o $@ $< -L$(BUILD) -lopcore -Wl,-rpath,'$(abspath $(BUILD))' $(LDLIBS_ALL)

$(BUILD)/bench/call_cost: bench/call_cost.c $(BUILD)/libopcore.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -O2 -o $@ $< -L$(BUILD) -lopcore -Wl,-rpath,'$(abspath $(BUILD))' $(LDLIBS_ALL)
