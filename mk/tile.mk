# The tile layer (src/tile): its math is built at -O3 without errno for
# math calls, so its loops vectorise (math.c clones them for AVX2+FMA), and
# its matmul links BLIS's serial build. BLIS goes in statically with its
# symbols hidden (-Wl,--exclude-libs,ALL in the package link): libopcore
# stays self-contained for the wheel, and opcore's engine owns the threads.
BLIS_INC ?= /usr/include/x86_64-linux-gnu/blis-serial
BLIS_LIB ?= /usr/lib/x86_64-linux-gnu/blis-serial
BLIS_LDLIBS = -Wl,--exclude-libs,libblis.a -L$(BLIS_LIB) -Wl,-Bstatic -lblis -Wl,-Bdynamic

# Small float32 products run libxsmm's JIT kernels (docs/gemm_library.md).
# Debian's libxsmm-dev ships only static, position-independent archives:
# linked in the same way as BLIS, before it (libxsmm's BLAS fallback
# symbols, sgemm_ and the like, resolve to BLIS's). Without the archive
# (another distribution, another architecture) the tile matmul is BLIS
# alone: OC_TILE_XSMM=0.
XSMM_ARCHIVE := $(shell $(CC) -print-file-name=libxsmm.a)
ifneq ($(filter /%,$(XSMM_ARCHIVE)),)
XSMM_LDLIBS = -Wl,--exclude-libs,libxsmm.a -Wl,-Bstatic -lxsmm -Wl,-Bdynamic
XSMM_CFLAGS = -DOC_TILE_XSMM=1
else
XSMM_LDLIBS =
XSMM_CFLAGS = -DOC_TILE_XSMM=0
endif

# No peeling for alignment: a vector loop's first elements would otherwise
# take the scalar path (glibc's scalar expf and libmvec's vector one can
# differ in the last bit) or not depending on where a row starts, and a
# tile function's bits would depend on its operands' addresses. (A GCC
# parameter: asked for only where the compiler takes it.)
TILE_NO_PEEL := $(shell $(CC) -Werror --param=vect-max-peeling-for-alignment=0 -E -x c /dev/null >/dev/null 2>&1 && \
                  echo --param=vect-max-peeling-for-alignment=0)
$(BUILD)/obj/tile/%.o: OPT = -O3 -g -fno-math-errno -fno-trapping-math $(TILE_NO_PEEL)
$(BUILD)/obj/tile/%.o: EXTRA_CFLAGS += -isystem $(BLIS_INC) $(XSMM_CFLAGS)
# test_tile checks oc_tile_matmul_path against what was built
$(BUILD)/tests/test_tile: EXTRA_CFLAGS += $(XSMM_CFLAGS)
LDLIBS_ALL += $(XSMM_LDLIBS) $(BLIS_LDLIBS)
PKG_LDLIBS += $(XSMM_LDLIBS) $(BLIS_LDLIBS)
