# preload/: build/lib/libcudalloc.so, loaded with LD_PRELOAD into CUDA programs.
ifeq ($(HAVE_CUDA_HEADERS),1)
PRELOAD_SRCS := preload/log.c preload/real.c preload/config.c preload/devices.c preload/alloc.c preload/cuda_backend.c \
                preload/hooks_runtime.c preload/hooks_driver.c preload/hooks_dl.c preload/api.c preload/report.c preload/nvtx.c preload/steps.c preload/cupti.c \
                preload/streams.c preload/capture.c preload/peers.c preload/ipc.c preload/ipc_share.c \
                preload/torch.c preload/torch_oom.c preload/last_error.c \
                preload/contexts.c preload/pointer_query.c preload/hooks_queries.c preload/others.c preload/live.c \
                preload/users.c
PRELOAD_OBJS := $(PRELOAD_SRCS:%.c=$(OBJ)/%.o)
$(PRELOAD_OBJS): ALL_CFLAGS += -I$(CUDA_INC) -D_GNU_SOURCE
# torch.OutOfMemoryError is a C++ exception thrown through these frames
$(OBJ)/preload/torch.o $(OBJ)/preload/torch_oom.o: ALL_CFLAGS += -fexceptions
LIBCUDALLOC := $(LIB)/libcudalloc.so

# No libcuda or libcudart at link time: the preload loads into any program and
# finds the driver at run time. Its soname, libcudalloc.so.N (N: VERSION's major),
# is what the launcher preloads, here and installed (install.mk).
$(LIBCUDALLOC): $(PRELOAD_OBJS) $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libcudalloc.so.$(CUDALLOC_SOVERSION) -Wl,--no-undefined -o $@ $^ \
	    -lunwind -ldl -lpthread -lm
	ln -sf libcudalloc.so $(LIB)/libcudalloc.so.$(CUDALLOC_SOVERSION)
ALL_TARGETS += $(LIBCUDALLOC)
else
$(info cudalloc: no CUDA headers in $(CUDA_INC): libcudalloc.so is not built)
endif

# Whole-program tests: programs built against the toolkit's headers, linked
# with the simulated libraries, run under the preload.
ifeq ($(HAVE_CUDA_HEADERS),1)
PRELOAD_TEST_BIN := $(BUILD)/tests/preload
$(PRELOAD_TEST_BIN)/prog_runtime: tests/preload/prog_runtime.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -ldl -lpthread
$(PRELOAD_TEST_BIN)/prog_driver: tests/preload/prog_driver.c $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcuda -ldl
$(PRELOAD_TEST_BIN)/prog_nvtx: tests/preload/prog_nvtx.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< -ldl
# dlsym/dlvsym as glibc answers them: a peer library after the program, with a
# TLS variable, symbol versions and only a SysV hash table.
$(PRELOAD_TEST_BIN)/dl/libpeer.so: tests/preload/dl/peer.c tests/preload/dl/peer.map
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -fPIC -shared -Wl,--hash-style=sysv -Wl,--version-script=tests/preload/dl/peer.map -o $@ $<
$(PRELOAD_TEST_BIN)/prog_dl: tests/preload/dl/prog_dl.c $(PRELOAD_TEST_BIN)/dl/libpeer.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -o $@ $< -L$(PRELOAD_TEST_BIN)/dl -lpeer -Wl,-rpath,'$$ORIGIN/dl' -ldl -lpthread
# A program built with AddressSanitizer (dynamic libasan), for the launcher.
$(PRELOAD_TEST_BIN)/asan_prog: tests/preload/asan_prog.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g -fsanitize=address -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
# CUDALLOC_CONF parsing, alone (Check).
$(OBJ)/tests/preload/test_config.o: ALL_CFLAGS += -I$(CUDA_INC) -D_GNU_SOURCE
$(PRELOAD_TEST_BIN)/test_config: $(OBJ)/tests/preload/test_config.o $(OBJ)/preload/config.o $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK)
UNIT_TESTS += $(PRELOAD_TEST_BIN)/test_config
# Threads inside a device's allocator and its holder (users.c), alone (Check).
$(OBJ)/tests/preload/test_users.o: ALL_CFLAGS += -I$(CUDA_INC) -D_GNU_SOURCE
$(PRELOAD_TEST_BIN)/test_users: $(OBJ)/tests/preload/test_users.o $(OBJ)/preload/users.o $(OBJ)/preload/config.o $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) -lpthread
UNIT_TESTS += $(PRELOAD_TEST_BIN)/test_users
$(PRELOAD_TEST_BIN)/prog_loop: tests/preload/prog_loop.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
.PHONY: test-preload
test-preload: $(LIBCUDALLOC) $(BIN)/cudalloc $(PRELOAD_TEST_BIN)/prog_runtime $(PRELOAD_TEST_BIN)/prog_driver \
              $(PRELOAD_TEST_BIN)/prog_nvtx $(PRELOAD_TEST_BIN)/prog_loop $(PRELOAD_TEST_BIN)/prog_dl \
              $(PRELOAD_TEST_BIN)/asan_prog
	@bash tests/preload/run.sh $(BUILD)
SYSTEM_TESTS += test-preload
endif

# While the job runs: warnings, on_leak/on_oom, cudalloc status/top, metrics
# (preload/live.c, tools/status.c), on demo_trainer and a Python program.
ifeq ($(HAVE_CUDA_HEADERS),1)
.PHONY: test-live
test-live: $(LIBCUDALLOC) $(BIN)/cudalloc $(BIN)/demo_trainer $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/preload/live.sh $(BUILD)
SYSTEM_TESTS += test-live
endif

# Python programs under the preload (ctypes -> the simulated libcudart), with
# each Python at hand: Python frames in call sites, iterations without marks.
ifeq ($(HAVE_CUDA_HEADERS),1)
$(PRELOAD_TEST_BIN)/embed_python: tests/python/embed.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -ldl
.PHONY: test-python
test-python: $(LIBCUDALLOC) $(BIN)/cudalloc $(SIM)/libcudart.so $(SIM)/libcuda.so $(PRELOAD_TEST_BIN)/embed_python
	@bash tests/python/preload.sh $(BUILD)
SYSTEM_TESTS += test-python
endif

ifeq ($(HAVE_CUDA_HEADERS),1)
$(PRELOAD_TEST_BIN)/bench_preload: tests/preload/bench_preload.c $(LIBCA) $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< $(LIBCA) -L$(SIM) -lcudart -lpthread
$(PRELOAD_TEST_BIN)/bench_latency: tests/preload/bench_latency.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
$(PRELOAD_TEST_BIN)/bench_vmm: tests/preload/bench_vmm.c $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcuda
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_vmm
test-preload: $(PRELOAD_TEST_BIN)/bench_vmm
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_latency $(PRELOAD_TEST_BIN)/prog_runtime $(PRELOAD_TEST_BIN)/prog_driver \
               $(PRELOAD_TEST_BIN)/prog_nvtx $(PRELOAD_TEST_BIN)/prog_loop $(PRELOAD_TEST_BIN)/prog_dl
.PHONY: bench-preload
bench-preload: $(LIBCUDALLOC) $(PRELOAD_TEST_BIN)/bench_preload
	@LD_LIBRARY_PATH=$(SIM) LD_PRELOAD=$(LIBCUDALLOC) CUDALLOC_CONF=summary:false $(PRELOAD_TEST_BIN)/bench_preload
BENCHES += bench-preload
endif

# Plain frees and streams (tests/preload/prog_free.c): the runtime and the driver API.
ifeq ($(HAVE_CUDA_HEADERS),1)
$(PRELOAD_TEST_BIN)/prog_free: tests/preload/prog_free.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/prog_free
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_free
# Reserved memory that follows need (tests/preload/prog_remap.c).
$(PRELOAD_TEST_BIN)/prog_remap: tests/preload/prog_remap.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -ldl
test-preload: $(PRELOAD_TEST_BIN)/prog_remap
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_remap
# Long-running programs: streams and threads that come and go, caps (tests/preload/prog_streams.c).
$(PRELOAD_TEST_BIN)/prog_streams: tests/preload/prog_streams.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/prog_streams
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_streams
# Stream capture under the preload against the simulated device alone (tests/preload/prog_capture.c).
$(PRELOAD_TEST_BIN)/prog_capture: tests/preload/prog_capture.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/prog_capture
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_capture
# Injected errors (tests/preload/prog_faults.c).
$(PRELOAD_TEST_BIN)/prog_faults: tests/preload/prog_faults.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/prog_faults
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_faults
# Plain frees with many non-blocking streams (BENCHMARKS.md, issue 22).
$(PRELOAD_TEST_BIN)/bench_fences: tests/preload/bench_fences.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -ldl
test-preload: $(PRELOAD_TEST_BIN)/bench_fences
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_fences
# Programs that read simgpu's counters are rebuilt when their layout changes.
$(addprefix $(PRELOAD_TEST_BIN)/,bench_fences prog_driver prog_faults prog_free prog_remap prog_rules prog_runtime \
    prog_streams): simgpu/simgpu.h tests/preload/simhooks.h
# A real driver's rules (tests/preload/prog_rules.c, issue 32).
$(PRELOAD_TEST_BIN)/prog_rules: tests/preload/prog_rules.c $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcuda -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/prog_rules
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_rules
# cudaMallocAsync with thousands of live streams (bench-scale, issue 29).
$(PRELOAD_TEST_BIN)/bench_streams_async: tests/preload/bench_streams_async.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -ldl
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_streams_async
# A stream per request among thousands of live ones (bench-scale, issue 29).
$(PRELOAD_TEST_BIN)/bench_stream_churn: tests/preload/bench_stream_churn.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_stream_churn
# A free and an allocation among 100,000 live blocks (bench-scale, issue 29).
$(PRELOAD_TEST_BIN)/bench_many_live: tests/preload/bench_many_live.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
ALL_TARGETS += $(PRELOAD_TEST_BIN)/bench_many_live
endif

# Several devices, several processes, other tools (issue 23): peer access, CUDA IPC, last error, profilers, contexts.
ifeq ($(HAVE_CUDA_HEADERS),1)
$(PRELOAD_TEST_BIN)/prog_peer: tests/preload/prog_peer.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl
$(PRELOAD_TEST_BIN)/prog_ipc: tests/preload/prog_ipc.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl
$(PRELOAD_TEST_BIN)/prog_errors: tests/preload/prog_errors.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
$(PRELOAD_TEST_BIN)/prog_profiler: tests/preload/prog_profiler.c $(SIM)/libcudart.so $(SIM)/libcupti.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcupti
$(PRELOAD_TEST_BIN)/prog_contexts: tests/preload/prog_contexts.c $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcuda -ldl
$(PRELOAD_TEST_BIN)/prog_registry: tests/preload/prog_registry.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl
$(PRELOAD_TEST_BIN)/prog_beside: tests/preload/prog_beside.c $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl
ISSUE31_PROGS := $(PRELOAD_TEST_BIN)/prog_registry $(PRELOAD_TEST_BIN)/prog_beside
test-preload: $(PRELOAD_TEST_BIN)/prog_peer $(PRELOAD_TEST_BIN)/prog_ipc $(PRELOAD_TEST_BIN)/prog_errors \
              $(PRELOAD_TEST_BIN)/prog_profiler $(PRELOAD_TEST_BIN)/prog_contexts $(ISSUE31_PROGS)
ALL_TARGETS += $(PRELOAD_TEST_BIN)/prog_peer $(PRELOAD_TEST_BIN)/prog_ipc $(PRELOAD_TEST_BIN)/prog_errors \
               $(PRELOAD_TEST_BIN)/prog_profiler $(PRELOAD_TEST_BIN)/prog_contexts $(ISSUE31_PROGS)
endif

# PyTorch's pluggable-allocator contract, called as PyTorch calls it (C++,
# with an embedded CPython from python3-dev standing in for PyTorch's side).
PY_HEADER := $(firstword $(wildcard /usr/include/python3.*/Python.h))
ifeq ($(HAVE_CUDA_HEADERS),1)
ifneq ($(PY_HEADER),)
PY_VER := $(notdir $(patsubst %/,%,$(dir $(PY_HEADER))))
$(PRELOAD_TEST_BIN)/torch_contract: tests/preload/torch_contract.cc $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CXX) -O1 -g -Wall -I$(CUDA_INC) -I$(dir $(PY_HEADER)) -o $@ $< -L$(SIM) -lcudart -l$(PY_VER) -ldl -lpthread
test-preload: $(PRELOAD_TEST_BIN)/torch_contract
ALL_TARGETS += $(PRELOAD_TEST_BIN)/torch_contract
else
$(info cudalloc: no /usr/include/python3.*/Python.h (python3-dev): the pluggable-allocator contract test is not built)
endif
endif
