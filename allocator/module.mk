# allocator/: the caching allocator core and its host/count backends.
ALLOC_SRCS := allocator/allocator.c allocator/pools.c allocator/pooltab.c allocator/addrindex.c allocator/figures.c allocator/expandable.c allocator/ranges.c allocator/classic.c allocator/fence.c allocator/share.c \
              allocator/freeindex.c allocator/block.c allocator/stats.c \
              allocator/livetable.c
-include allocator/backends.mk
ALLOC_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(ALLOC_SRCS) $(BACKEND_SRCS))
LIBCA := $(LIB)/libcaalloc.a

$(LIBCA): $(ALLOC_OBJS)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

ALL_TARGETS += $(LIBCA)

TESTS_BIN := $(BUILD)/tests
$(TESTS_BIN)/test_allocator: $(OBJ)/tests/allocator/test_allocator.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_allocator
$(TESTS_BIN)/test_stress: $(OBJ)/tests/allocator/test_stress.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_stress
$(TESTS_BIN)/test_sizes: $(OBJ)/tests/allocator/test_sizes.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_sizes
$(TESTS_BIN)/test_remap: $(OBJ)/tests/allocator/test_remap.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_remap
$(TESTS_BIN)/test_addrindex: $(OBJ)/tests/allocator/test_addrindex.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_addrindex
$(TESTS_BIN)/test_livetable: $(OBJ)/tests/allocator/test_livetable.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_livetable
$(TESTS_BIN)/test_freeindex: $(OBJ)/tests/allocator/test_freeindex.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_freeindex
$(TESTS_BIN)/test_edges: $(OBJ)/tests/allocator/test_edges.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_edges
$(TESTS_BIN)/bench_remap: $(OBJ)/tests/allocator/bench_remap.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
$(TESTS_BIN)/bench_streams: $(OBJ)/tests/allocator/bench_streams.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
ALL_TARGETS += $(TESTS_BIN)/bench_streams
$(TESTS_BIN)/bench_share: $(OBJ)/tests/allocator/bench_share.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread
ALL_TARGETS += $(TESTS_BIN)/bench_share
.PHONY: bench-remap
bench-remap: $(TESTS_BIN)/bench_remap
	@$(TESTS_BIN)/bench_remap
BENCHES += bench-remap
$(TESTS_BIN)/test_fences: $(OBJ)/tests/allocator/test_fences.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_fences
$(TESTS_BIN)/test_share: $(OBJ)/tests/allocator/test_share.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_share
$(TESTS_BIN)/test_pools: $(OBJ)/tests/allocator/test_pools.o $(LIBCA)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(TESTS_BIN)/test_pools
