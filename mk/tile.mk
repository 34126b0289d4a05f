# The tile layer (src/tile): its math is built at -O3 without errno for
# math calls, so its loops vectorise (math.c clones them for AVX2+FMA), and
# its matmul links BLIS's serial build. BLIS goes in statically with its
# symbols hidden (-Wl,--exclude-libs,ALL in the package link): libopcore
# stays self-contained for the wheel, and opcore's engine owns the threads.
BLIS_INC ?= /usr/include/x86_64-linux-gnu/blis-serial
BLIS_LIB ?= /usr/lib/x86_64-linux-gnu/blis-serial
BLIS_LDLIBS = -Wl,--exclude-libs,libblis.a -L$(BLIS_LIB) -Wl,-Bstatic -lblis -Wl,-Bdynamic

$(BUILD)/obj/tile/%.o: OPT = -O3 -g -fno-math-errno -fno-trapping-math
$(BUILD)/obj/tile/%.o: EXTRA_CFLAGS += -isystem $(BLIS_INC)
LDLIBS_ALL += $(BLIS_LDLIBS)
PKG_LDLIBS += $(BLIS_LDLIBS)
