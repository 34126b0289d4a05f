# Coverage-guided fuzzing (issue #11): libFuzzer targets built with clang
# and ASan+UBSan for the C code, atheris for Python code. Each target
# starts from its committed seed corpus (tests/fuzz/corpus/<target>) and
# first replays tests/fuzz/regressions/<target> (every crash ever found).
#   make test-fuzz   each target for FUZZ_TEST_TIME seconds (part of make test)
#   make fuzz        each target for FUZZ_TIME seconds (default 10 minutes)
# New inputs go to $(BUILD)/fuzz/corpus-<target>, crashes to
# $(BUILD)/fuzz/crash-*: copy a crash into tests/fuzz/regressions/<target>
# once fixed.

FUZZ_CC        ?= clang-16
FUZZ_TEST_TIME ?= 20
FUZZ_TIME      ?= 600
# make test fuzzes from a fixed seed (a run explores the same inputs every
# time, so CI repeats what passed here); make fuzz from a random one (0).
FUZZ_SEED      ?= 1
FUZZ_DIR       := $(BUILD)/fuzz
FUZZ_FLAGS     := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Iinclude -Isrc \
                  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_C_TARGETS := schema elfcheck
FUZZ_SRCS_schema   := src/library/schema.c src/core/status.c src/core/alloc.c
FUZZ_SRCS_elfcheck := src/library/elfcheck.c src/core/status.c src/core/alloc.c
FUZZ_LIBS_elfcheck := -lxxhash
FUZZ_ENV       := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz-build test-fuzz fuzz

fuzz-build: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_C_TARGETS))

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(HEADERS) $(LIB_SRCS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRCS_$*) $(FUZZ_LIBS_$*)

# $(1): target name, $(2): the command that runs it, $(3): seconds
define run_fuzzer
	@mkdir -p $(FUZZ_DIR)/corpus-$(1)
	@echo "== fuzz $(1): regressions"
	@set -e; regs=$$(find tests/fuzz/regressions/$(1) -type f ! -name '.*' 2>/dev/null | sort); \
	    if [ -z "$$regs" ]; then echo "   none yet (no crash found by this fuzzer)"; \
	    else $(FUZZ_ENV) $(2) $$regs > $(FUZZ_DIR)/$(1)-regressions.log 2>&1 \
	        || { tail -40 $(FUZZ_DIR)/$(1)-regressions.log; exit 1; }; \
	        echo "   $$(echo $$regs | wc -w) regression input(s) replayed: pass"; fi
	@echo "== fuzz $(1): $(3) s from tests/fuzz/corpus/$(1)"
	@$(FUZZ_ENV) $(2) -max_total_time=$(3) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -seed=$(FUZZ_SEED) \
	    -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-$(1) tests/fuzz/corpus/$(1) \
	    > $(FUZZ_DIR)/$(1).log 2>&1 || { tail -40 $(FUZZ_DIR)/$(1).log; exit 1; }
	@grep -E "^Done [0-9]+ runs" $(FUZZ_DIR)/$(1).log | sed "s/^/   /"
endef

test-fuzz: fuzz-build
	$(call run_fuzzer,schema,$(FUZZ_DIR)/fuzz_schema,$(FUZZ_TEST_TIME))
	$(call run_fuzzer,elfcheck,$(FUZZ_DIR)/fuzz_elfcheck,$(FUZZ_TEST_TIME))
	$(call run_fuzzer,idx,$(PYTHON) tests/fuzz/fuzz_idx.py,$(FUZZ_TEST_TIME))

fuzz: deps fuzz-build
	$(MAKE) test-fuzz FUZZ_TEST_TIME=$(FUZZ_TIME) FUZZ_SEED=0
