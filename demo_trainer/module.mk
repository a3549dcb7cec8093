# demo_trainer/: the reference trainer, $(BIN)/demo_trainer, on kernels/; `make demo`.
#
# Linked against the SHARED cudart (-lcudart, with a RUNPATH to the toolkit): the
# simulated device replaces libcudart.so.13 through LD_LIBRARY_PATH=$(SIM) (which
# `cudalloc run` sets when there is no GPU), and LD_LIBRARY_PATH wins over a RUNPATH.
# nvcc's default, the static cudart, would carry its own runtime into the binary and
# talk to the real driver only, so the trainer could not run on the simulated device.
# (cudalloc itself handles static cudart fine; this choice is about simgpu.)
#
# Built with frame pointers and no sibling calls, so cudalloc's stacks of each
# allocation (libunwind) show the op that made it and the code that called the op.
# Module files are read in name order and this one comes before kernels/, preload/,
# simgpu/ and tools/: their outputs are named literally below.

ifeq ($(HAVE_CUDA_HEADERS),1)

DT_SRCS := $(filter-out demo_trainer/main.c,$(wildcard demo_trainer/*.c))
DT_OBJS := $(DT_SRCS:%.c=$(OBJ)/%.o)
DT_MAIN := $(OBJ)/demo_trainer/main.o
$(DT_OBJS) $(DT_MAIN) $(OBJ)/tests/demo_trainer/%.o: ALL_CFLAGS += -I$(CUDA_INC) -fno-omit-frame-pointer -fno-optimize-sibling-calls

# The shared cudart of the toolkit, or, with no toolkit libraries, the simulated one,
# found from the binary's own place (build/ and an installed tree alike: lib/cudalloc/sim).
DT_HAVE_TOOLKIT_CUDART := $(wildcard $(CUDA_HOME)/lib64/libcudart.so)
DT_CUDART_DIR := $(if $(DT_HAVE_TOOLKIT_CUDART),$(CUDA_HOME)/lib64,$(abspath $(SIM)))
DT_RUNPATH := $(if $(DT_HAVE_TOOLKIT_CUDART),$(CUDA_HOME)/lib64,$$ORIGIN/../lib/cudalloc/sim)
DT_LDLIBS = -L$(DT_CUDART_DIR) '-Wl,--enable-new-dtags,-rpath,$(DT_RUNPATH)' -lcudart -ldl -lm

ifneq ($(HAVE_NVCC),1)
$(info demo_trainer: no nvcc: built without the CUDA kernels (--device cpu only))
endif

$(BIN)/demo_trainer: $(DT_MAIN) $(DT_OBJS) $(OBJ)/util/size.o $(VERSION_OBJ) $(LIB)/libkernels_cuda.a $(LIB)/libkernels_cpu.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) $(LIB)/libkernels_cuda.a $(LIB)/libkernels_cpu.a \
	    $(KERNELS_CUDA_LDLIBS) $(KERNELS_CPU_LDLIBS) $(DT_LDLIBS)
ALL_TARGETS += $(BIN)/demo_trainer

# Unit tests (Check): the trainer's objects with the CPU kernels on the simulated
# device, found through a RUNPATH to $(SIM) (libcuda.so.1 linked too, so the
# simulated runtime's dlopen finds the simulated driver already loaded).
DT_TEST_SRCS := $(wildcard tests/demo_trainer/test_*.c)
DT_TEST_OBJS := $(DT_TEST_SRCS:%.c=$(OBJ)/%.o)
$(BUILD)/tests/test_demo_trainer: $(DT_TEST_OBJS) $(DT_OBJS) $(OBJ)/util/size.o $(VERSION_OBJ) $(LIB)/libkernels_cpu.a \
                                  $(SIM)/libcudart.so $(SIM)/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) $(LIB)/libkernels_cpu.a $(KERNELS_CPU_LDLIBS) \
	    -L$(abspath $(SIM)) -Wl,--enable-new-dtags,-rpath,$(abspath $(SIM)),--no-as-needed -lcudart -lcuda \
	    -Wl,--as-needed $(LDLIBS_CHECK) -ldl -lm
UNIT_TESTS += $(BUILD)/tests/test_demo_trainer

# Whole-program tests: the real binary under cudalloc on the simulated device.
.PHONY: test-demo-trainer
test-demo-trainer: $(BIN)/demo_trainer $(BIN)/cudalloc $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/demo_trainer/run.sh $(BUILD)
SYSTEM_TESTS += test-demo-trainer

# Step time without the preload and under cudalloc (simulated device, CPU kernels).
.PHONY: bench-demo-trainer
bench-demo-trainer: $(BIN)/demo_trainer $(BIN)/cudalloc $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash demo_trainer/bench.sh $(BUILD)
BENCHES += bench-demo-trainer

# make demo: clean and leaking, under cudalloc, with the reports' paths.
demo: $(BIN)/demo_trainer $(BIN)/cudalloc $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash demo_trainer/demo.sh $(BUILD)

.PHONY: test-make-demo
test-make-demo: $(BIN)/demo_trainer $(BIN)/cudalloc $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/demo_trainer/make_demo.sh $(BUILD)
SYSTEM_TESTS += test-make-demo

else
$(info demo_trainer: skipped, no $(CUDA_INC)/cuda_runtime_api.h (set CUDA_HOME to a CUDA toolkit))
demo:
	@echo "make demo: needs a CUDA toolkit's headers (CUDA_HOME); none at $(CUDA_HOME)" && exit 1
endif
