# The profiler's benchmarks: `make bench-profiler` runs the overhead bench
# (bench/profiler_bench.py) and the HTML report's (bench/html_report_bench.py:
# 100k events in headless Chromium). The overhead bench's "off costs nothing" part:
# the same C loop linked to a normal libopcore and to one built with the
# profiler hooks compiled out:
#   make build/bench/profiler_overhead
#   make BUILD=build-noprof EXTRA_CFLAGS=-DOC_PROFILER_COMPILED_OUT build-noprof/bench/profiler_overhead
.PHONY: bench-profiler

$(BUILD)/bench/profiler_overhead: bench/profiler_overhead.c $(BUILD)/libopcore.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -O2 -o $@ $< -L$(BUILD) -lopcore -Wl,-rpath,'$(abspath $(BUILD))' $(LDLIBS_ALL)

bench-profiler: lib python
	$(PYTHON) bench/profiler_bench.py
	$(PYTHON) bench/html_report_bench.py
