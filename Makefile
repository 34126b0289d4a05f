# opcore — top-level build. `make` builds the library, the CLI and the C
# tests; `make test` runs every test; `make demo` runs the main job.
# Source lists are globbed per concern: a new src/<concern>/*.c file is
# part of libopcore without editing this file.

CC      ?= cc
PYTHON  ?= python3
BUILD   ?= build
PREFIX  ?= /usr/local
VERSION := 0.1.0

WARN    := -Wall -Wextra -Wno-missing-field-initializers
CSTD    := -std=c11 -D_GNU_SOURCE
OPT     ?= -O2 -g
SAN     ?=
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) $(SAN) -fPIC -Iinclude -Isrc $(CFLAGS) $(EXTRA_CFLAGS)
LDLIBS_ALL = -lffi -lz -lxxhash -ldl -lpthread -lm

LIB_DIRS := core engine kernel ops library build host profiler tile
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard src/$(d)/*.c))
LIB_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
CLI_SRCS := $(wildcard src/cli/*.c)
CLI_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
TEST_SRCS := $(wildcard tests/c/test_*.c)
TEST_BINS := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
TEST_SUPPORT := $(wildcard tests/c/support/*.c)
HEADERS := $(wildcard include/opcore/*.h) $(wildcard src/*/*.h)

.PHONY: all lib cli tests test test-c test-examples test-asan test-valgrind test-python demo bench install clean deps python

all: lib cli tests

lib: $(BUILD)/libopcore.so $(BUILD)/opcore.pc
cli: $(BUILD)/opcore
tests: $(TEST_BINS)

# -fvisibility=hidden: libopcore exports only what its public headers mark
# OC_API (opcore/export.h); the runtime's oc__ internals stay inside it.
$(BUILD)/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=hidden -DOC_BUILD_INCLUDE_DIR='"$(abspath include)"' -DOC_BUILD_LIB_DIR='"$(abspath $(BUILD))"' -DOC_VERSION_STRING='"$(VERSION)"' -c $< -o $@

$(BUILD)/libopcore.so: $(LIB_OBJS)
	$(CC) $(SAN) -shared -Wl,-soname,libopcore.so.0 -o $@.0 $^ $(LDLIBS_ALL)
	ln -sf libopcore.so.0 $@

# No static libopcore: opcore is a runtime with process-wide state (the op
# registry, the engine's cores, the fault handler) that the host and every op
# library must share, and op libraries link the shared libopcore. A host
# linked with a static copy would run two opcores (docs/c_api.md).

$(BUILD)/opcore: $(CLI_OBJS) $(BUILD)/libopcore.so
	$(CC) $(SAN) -o $@ $(CLI_OBJS) -L$(BUILD) -lopcore -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' $(LDLIBS_ALL)

$(BUILD)/opcore.pc: opcore.pc.in
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# A test of the public API links libopcore.so. A test that includes one of
# the runtime's own headers (src/<layer>/*.h) reaches internals libopcore
# does not export: it links the objects instead, and exports their public
# API (-rdynamic) so the op libraries it loads bind to that copy (the
# libopcore.so.0 they name is mapped too, but the executable's definitions
# come first in symbol lookup: nothing binds to it).
space := $(subst ,, )
TEST_INTERNAL := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(shell grep -lE '^\#include "($(subst $(space),|,$(LIB_DIRS)))/' $(TEST_SRCS)))
TEST_LINK = $(if $(filter $@,$(TEST_INTERNAL)),-rdynamic $(LIB_OBJS),-L$(BUILD) -lopcore)
$(BUILD)/tests/%: tests/c/%.c $(TEST_SUPPORT) $(BUILD)/libopcore.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/c -DOPCORE_TEST_SUPPORT_DIR='"$(abspath tests/c/support)"' -o $@ $< $(TEST_SUPPORT) $(TEST_LINK) -Wl,-rpath,'$(abspath $(BUILD))' -lcmocka $(LDLIBS_ALL)

install: lib cli
	install -d $(DESTDIR)$(PREFIX)/include/opcore $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/opcore/*.h $(DESTDIR)$(PREFIX)/include/opcore/
	install -m 755 $(BUILD)/libopcore.so $(DESTDIR)$(PREFIX)/lib/libopcore.so.0
	ln -sf libopcore.so.0 $(DESTDIR)$(PREFIX)/lib/libopcore.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' opcore.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/opcore.pc
	install -m 755 $(BUILD)/opcore $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf $(BUILD) build-asan build-valgrind

-include mk/*.mk
