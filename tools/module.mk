# tools/: the trace parser (and the tools built on it); tests for tools/ and util/.
# The variables (TRACE_SRCS, UTIL_SRCS, ...) live in allocator/backends.mk, which
# is included first; including it here too is harmless (it has a guard) and
# covers the time before allocator/module.mk includes it.
include allocator/backends.mk

$(eval $(call ca_check_test,util/test_size,$(UTIL_OBJS)))
$(eval $(call ca_check_test,util/test_quote,$(UTIL_OBJS)))
$(eval $(call ca_check_test,tools/test_trace,$(TRACE_OBJS) $(UTIL_OBJS)))
$(BUILD)/tests/tools/test_trace: LDLIBS_CHECK += -lz

# cudalloc-replay
REPLAY_SRCS := tools/replay.c tools/replay_run.c tools/replay_foreign.c tools/replay_timeline.c
$(BIN)/cudalloc-replay: $(REPLAY_SRCS:%.c=$(OBJ)/%.o) $(TRACE_OBJS) $(UTIL_OBJS) $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread -ldl -lz
ALL_TARGETS += $(BIN)/cudalloc-replay

.PHONY: test-replay
test-replay: $(BIN)/cudalloc-replay
	@bash tests/tools/replay_system.sh $(BIN) $(TRACES)
SYSTEM_TESTS += test-replay

.PHONY: bench-replay
bench-replay: $(BIN)/cudalloc-replay
	@for m in expandable classic; do $(BIN)/cudalloc-replay --runs 21 --mode $$m --min-capacity $(BENCH_TRACES); done
	@$(BIN)/cudalloc-replay --runs 21 --compare --threads 2 $(BENCH_TRACES)
BENCHES += bench-replay

# Issue 29's bookkeeping target: every trace we hold (tests/data/torch with its
# fixes and models, ../shared/traces when beside us) against glibc's malloc.
# BASE=path/to/another/cudalloc-replay times that build too, trace by trace.
.PHONY: bench-glibc
bench-glibc: $(BIN)/cudalloc-replay
	@bash tests/tools/vs_glibc.sh $(if $(BASE),--base $(BASE)) $(BIN)/cudalloc-replay $(BENCH_TRACES) \
	    $(wildcard $(TRACES)/fixes/*.csv.gz) $(wildcard $(TRACES)/models/*.csv.gz)
BENCHES += bench-glibc

# glibc's footprint on a trace's sizes, beside cudalloc's smallest device
$(TESTS_BIN)/glibc_footprint: tests/tools/glibc_footprint.c $(TRACE_OBJS) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lz

# At scale (issue 29): 100,000 live blocks under churn (512 B to 64 KiB, and
# to 4 MiB) against 1,000, generated; the smallest device in both modes, time
# per call against the host allocators; the same on other shapes of churn
# (sizes uniform, powers of two, equal, bimodal, drifting; frees of the oldest
# or of recent blocks), with glibc's footprint beside; an allocation with 250
# and 4,000 live streams; a stream per request among 250 and 4,000 (the
# simulated driver alone, then under the preload, with the shared pool and
# with share_bytes:0); a free and an allocation among 100,000 live blocks
# under the preload, tracking on and off; cudalloc-report on 2,500 and 10,000
# streams, one per row.
SCALE := $(BUILD)/bench/scale
SCALE_SHAPES := unif:65536:rand pow2:65536:rand equal:16384:rand bimodal:4194304:rand \
                drift:65536:rand drift:4194304:rand logu:65536:fifo logu:65536:recent drift:65536:recent
.PHONY: bench-scale
bench-scale: $(BIN)/cudalloc-replay $(BIN)/cudalloc-report $(TESTS_BIN)/bench_streams $(TESTS_BIN)/bench_share \
             $(LIBCUDALLOC) $(PRELOAD_TEST_BIN)/bench_streams_async $(PRELOAD_TEST_BIN)/bench_stream_churn \
             $(PRELOAD_TEST_BIN)/bench_many_live $(TESTS_BIN)/glibc_footprint
	@mkdir -p $(SCALE)
	@bash tests/tools/gen_churn.sh 100000 512 65536 300000 > $(SCALE)/churn_100k.csv
	@bash tests/tools/gen_churn.sh 100000 512 4194304 300000 > $(SCALE)/churn_100k_4mib.csv
	@bash tests/tools/gen_churn.sh 1000 512 65536 300000 > $(SCALE)/churn_1k.csv
	@for s in $(SCALE_SHAPES); do set -- $$(echo $$s | tr : ' '); \
	    bash tests/tools/gen_churn.sh 100000 512 $$2 300000 1 $$1 $$3 > $(SCALE)/churn_100k_$$1_$$2_$$3.csv; done
	@for m in expandable classic; do $(BIN)/cudalloc-replay --runs 1 --mode $$m --min-capacity \
	    $(SCALE)/churn_100k*.csv; done
	@$(TESTS_BIN)/glibc_footprint $(SCALE)/churn_100k*.csv
	@$(BIN)/cudalloc-replay --runs 9 --compare $(SCALE)/churn_1k.csv $(SCALE)/churn_100k.csv
	@$(TESTS_BIN)/bench_streams 250 4000
	@$(TESTS_BIN)/bench_share 1 2 4
	@LD_LIBRARY_PATH=$(SIM) CUDALLOC_SIM_MEMORY=64GiB $(PRELOAD_TEST_BIN)/bench_stream_churn 250 4000
	@for conf in summary:false summary:false,share_bytes:0; do echo "== CUDALLOC_CONF=$$conf"; \
	    LD_LIBRARY_PATH=$(SIM) LD_PRELOAD=$(LIBCUDALLOC) CUDALLOC_CONF=$$conf CUDALLOC_SIM_MEMORY=64GiB \
	        $(PRELOAD_TEST_BIN)/bench_streams_async 250 4000; \
	    LD_LIBRARY_PATH=$(SIM) LD_PRELOAD=$(LIBCUDALLOC) CUDALLOC_CONF=$$conf CUDALLOC_SIM_MEMORY=64GiB \
	        $(PRELOAD_TEST_BIN)/bench_stream_churn 250 4000; done
	@for t in true false; do echo "== tracking:$$t"; \
	    LD_LIBRARY_PATH=$(SIM) LD_PRELOAD=$(LIBCUDALLOC) CUDALLOC_CONF=summary:false,tracking:$$t \
	        CUDALLOC_SIM_MEMORY=64GiB $(PRELOAD_TEST_BIN)/bench_many_live 100000 500000; done
	@for n in 2500 10000; do \
	    awk -v n=$$n 'BEGIN { print "Thread,Time,Action,Pointer,Size,Stream"; \
	        for (i = 0; i < n; i++) printf "1,%d,allocate,0x%x,4096,0x%x\n", i, 65536 + 4096 * i, 4096 + 16 * i }' \
	        > $(SCALE)/streams_$$n.csv; \
	    s=$$(date +%s.%N); $(BIN)/cudalloc-report $(SCALE)/streams_$$n.csv > /dev/null; \
	    echo "cudalloc-report, $$n streams: $$(echo "$$(date +%s.%N) - $$s" | bc) s"; done
BENCHES += bench-scale

# cudalloc: the launcher
$(BIN)/cudalloc: $(OBJ)/tools/launcher.o $(OBJ)/tools/elf_needed.o $(OBJ)/tools/status.o $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -ldl
ALL_TARGETS += $(BIN)/cudalloc
