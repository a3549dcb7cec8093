# reports/: the tests of tracking, diagnosis and report content (those that
# need the allocator: tests/reports/tracking), cudalloc-report, and their
# benchmarks. Included from reports/module.mk, which builds libcareports.a.

# What a program linking libcareports.a (with $(LIBCA)) needs besides; zlib
# for gzipped snapshots (read/snapshot_file.c: the preload never reads one,
# and its link line leaves it out).
REPORTS_LDLIBS := -lunwind -ldl -lpthread -lm -lz

# Check tests: tests/reports/tracking/test_<name>.c
TRACKING_TESTS := $(patsubst tests/reports/tracking/%.c,$(BUILD)/tests/reports/tracking/%,\
                    $(wildcard tests/reports/tracking/test_*.c))
TRACKING_TEST_LIBS := $(LIB)/libcareports.a $(LIBCA) $(TRACE_OBJS) $(UTIL_OBJS)

$(TRACKING_TESTS): $(BUILD)/tests/reports/tracking/%: $(OBJ)/tests/reports/tracking/%.o $(TRACKING_TEST_LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(TRACKING_TEST_LIBS) $(LDLIBS_CHECK) $(REPORTS_LDLIBS)
UNIT_TESTS += $(TRACKING_TESTS)
# The report tests replay through it.
$(TRACKING_TESTS): | $(BIN)/cudalloc-replay $(BIN)/cudalloc-report

# cudalloc-report
REPORT_TOOL_SRCS := tools/report.c tools/report_snapshot.c tools/report_ranks.c tools/report_diff.c tools/replay_run.c
$(BIN)/cudalloc-report: $(REPORT_TOOL_SRCS:%.c=$(OBJ)/%.o) $(TRACE_OBJS) $(UTIL_OBJS) $(LIB)/libcareports.a $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(REPORTS_LDLIBS)
ALL_TARGETS += $(BIN)/cudalloc-report

# The tracker inside a shared object (as in libcudalloc.so), called by a program.
PROBE_DIR := $(BUILD)/tests/reports/tracking/so
$(PROBE_DIR)/libprobe.so: $(OBJ)/tests/reports/tracking/so/probe_lib.o $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $^ $(REPORTS_LDLIBS)
$(PROBE_DIR)/probe: $(OBJ)/tests/reports/tracking/so/probe_main.o $(PROBE_DIR)/libprobe.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(PROBE_DIR) -lprobe -Wl,-rpath,'$$ORIGIN'

.PHONY: test-report
test-report: $(BIN)/cudalloc-report $(BIN)/cudalloc-replay $(PROBE_DIR)/probe
	@bash tests/reports/tracking/report_system.sh $(BIN) $(TRACES) $(PROBE_DIR)/probe
SYSTEM_TESTS += test-report

# cudalloc-report on PyTorch snapshots and on ranks' JSON reports (runs the demo trainer).
.PHONY: test-snapshot
test-snapshot: $(BIN)/cudalloc-report $(BIN)/cudalloc $(BIN)/demo_trainer $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/reports/tracking/snapshot_system.sh $(BUILD)
SYSTEM_TESTS += test-snapshot

# What cudalloc-report takes for a training loop's iterations, on generated
# snapshots (issue 17): layers and optimizer loops are not iterations.
.PHONY: test-iterations
test-iterations: $(BIN)/cudalloc-report
	@bash tests/reports/tracking/iterations_system.sh $(BUILD)
SYSTEM_TESTS += test-iterations

# cudalloc-report on what users hand it: touching classic segments, no trace, gzip, torch.save files.
.PHONY: test-snapshot-inputs
test-snapshot-inputs: $(BIN)/cudalloc-report
	@bash tests/reports/tracking/snapshot_inputs.sh $(BIN)
SYSTEM_TESTS += test-snapshot-inputs

# Tracking cost per alloc+free pair, deep call chains, count backend.
$(BUILD)/bench/bench_tracking: $(OBJ)/tests/reports/tracking/bench_tracking.o $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(REPORTS_LDLIBS)
.PHONY: bench-tracking
bench-tracking: $(BUILD)/bench/bench_tracking
	@$(BUILD)/bench/bench_tracking
BENCHES += bench-tracking

# What judging the live figures costs at a boundary (issue 33).
$(BUILD)/bench/bench_live: $(OBJ)/tests/reports/tracking/bench_live.o $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(REPORTS_LDLIBS)
.PHONY: bench-live
bench-live: $(BUILD)/bench/bench_live
	@$(BUILD)/bench/bench_live
BENCHES += bench-live

# Reading a PyTorch snapshot of a million trace entries, phase by phase, and Python's
# pickle.load of the same file for scale.
$(BUILD)/bench/bench_snapshot: $(OBJ)/tests/reports/tracking/bench_snapshot.o $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(REPORTS_LDLIBS)
$(BUILD)/bench/snapshot_1M.pickle: tests/data/snapshots/make_snapshots.py
	@mkdir -p $(@D)
	python3 $< $@ --iterations 100000
.PHONY: bench-snapshot
bench-snapshot: $(BUILD)/bench/bench_snapshot $(BUILD)/bench/snapshot_1M.pickle $(BIN)/cudalloc-report
	@$(BUILD)/bench/bench_snapshot $(BUILD)/bench/snapshot_1M.pickle 5
	@python3 -c "import pickle, statistics, sys, time; f = sys.argv[1]; ts = []; \
	    [ts.append(-time.perf_counter() + (pickle.load(open(f, 'rb')), time.perf_counter())[1]) for _ in range(5)]; \
	    print('  python3 pickle.load %.3f s (median of 5, %s)' % (statistics.median(ts), sys.version.split()[0]))" \
	    $(BUILD)/bench/snapshot_1M.pickle
	@for i in 1 2 3; do /usr/bin/time -f "  cudalloc-report, whole: %e s, %M KB max RSS" \
	    $(BIN)/cudalloc-report $(BUILD)/bench/snapshot_1M.pickle >/dev/null; done
BENCHES += bench-snapshot

# Tests find the tools of their own build tree (build/ or build/san/).
$(OBJ)/tests/reports/tracking/%.o: ALL_CFLAGS += -DCA_BIN_DIR='"$(BIN)"'

# Python frames (tests/python): a shared object Python loads with ctypes, for
# the frame walker's tests against each Python at hand and its benchmark.
PYPROBE := $(BUILD)/tests/python/libpyprobe.so
$(PYPROBE): $(OBJ)/tests/python/pyprobe.o $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $^ $(REPORTS_LDLIBS)

.PHONY: test-pyframes bench-pyframes
test-pyframes: $(PYPROBE)
	@bash tests/python/walker.sh $(BUILD)
SYSTEM_TESTS += test-pyframes
bench-pyframes: $(PYPROBE)
	@python3 tests/python/bench.py $(PYPROBE)
BENCHES += bench-pyframes

# Real PyTorch traces for the leak rules (tests/data/torch/README in
# tests/data/README.md): Debian's python3-torch on the CPU, its tensor
# allocations recorded by a preload. Not part of `make test`: it re-records
# the committed files.
TORCH_CASES := fixed varying eval-kept eval-sum train-sum varying-big
TORCH_PYTHON ?= /usr/bin/python3
RECORD_ALLOC_SRCS := tests/data/torch/record_alloc.c reports/capture/pyframes.c reports/capture/named_frames.c
$(BUILD)/record_alloc.so: $(RECORD_ALLOC_SRCS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -shared -fPIC -fvisibility=hidden -I. -o $@ $(RECORD_ALLOC_SRCS) -ldl -lpthread
.PHONY: record-torch-traces
record-torch-traces: $(BUILD)/record_alloc.so
	@set -e; for c in $(TORCH_CASES); do \
	    f=tests/data/torch/gpt_$$(echo $$c | tr - _).csv; \
	    RECORD_ALLOC_CSV=$$f LD_PRELOAD=$(abspath $(BUILD)/record_alloc.so) \
	        $(TORCH_PYTHON) tests/data/torch/train_gpt.py $$c; \
	    echo "  $$f: $$(grep -c ',allocate,' $$f) allocations, $$(wc -c < $$f) bytes"; done

# The snapshot reader's libFuzzer harness is in tests/fuzz/fuzz.mk (make fuzz).

# cudalloc-report on hostile files (tests/reports/hostile): bounded in time and
# memory by what the file holds, refused where it is no snapshot, escaped.
.PHONY: test-hostile
test-hostile: $(BIN)/cudalloc-report $(BIN)/cudalloc-replay
	@bash tests/reports/hostile/run.sh $(BIN)
SYSTEM_TESTS += test-hostile
