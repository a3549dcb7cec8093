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

# cudalloc: the launcher
$(BIN)/cudalloc: $(OBJ)/tools/launcher.o $(OBJ)/tools/elf_needed.o $(OBJ)/tools/status.o $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -ldl
ALL_TARGETS += $(BIN)/cudalloc
