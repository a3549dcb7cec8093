# kernels/: compute ops, CPU (C) and CUDA (.cu) twins behind kernels/kernels.h.
#
#   $(LIB)/libkernels_cpu.a    cpu_* and kernels_cpu()               needs: $(KERNELS_CPU_LDLIBS)
#   $(LIB)/libkernels_cuda.a   cuda_* and kernels_cuda() (nvcc), or a stub whose
#                              kernels_cuda() returns NULL (no nvcc)  needs: $(KERNELS_CUDA_LDLIBS)
#
# A program using both links "$(LIB)/libkernels_cuda.a $(LIB)/libkernels_cpu.a
# $(KERNELS_CUDA_LDLIBS) $(KERNELS_CPU_LDLIBS)". Name the archives literally in
# prerequisites: module.mk files are read in name order, so a directory sorting before
# kernels/ sees these variables empty while its rules are read (recipes are fine).
#
# cuBLASLt is not linked: the CUDA twin dlopens libcublasLt.so.13 in cuda_init, so a
# binary with the CUDA twin starts (and runs the CPU twin) where there is no cuBLASLt.
# libcudart is linked dynamically (-lcudart), so LD_LIBRARY_PATH=$(SIM) swaps in the
# simulated runtime on machines without a GPU.

KERNELS_CPU_SRCS := $(wildcard kernels/cpu/*.c)
KERNELS_CPU_OBJS := $(KERNELS_CPU_SRCS:%.c=$(OBJ)/%.o)
KERNELS_CPU_LIB  := $(LIB)/libkernels_cpu.a
KERNELS_CUDA_LIB := $(LIB)/libkernels_cuda.a

# gcc's -O2 cost model ("very cheap") skips loops that need a scalar tail, which is
# every inner loop here; the dynamic model vectorizes them. No effect at -O1.
$(KERNELS_CPU_OBJS): CFLAGS += -fvect-cost-model=dynamic

# OpenMP is optional: make KERNELS_OMP=1 (libgomp ships with Debian's gcc).
KERNELS_OMP ?= 0
KERNELS_CPU_LDLIBS := -lm
ifeq ($(KERNELS_OMP),1)
$(KERNELS_CPU_OBJS): CFLAGS += -fopenmp
KERNELS_CPU_LDLIBS += -fopenmp
endif

$(KERNELS_CPU_LIB): $(KERNELS_CPU_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

ifeq ($(HAVE_NVCC),1)
KERNELS_CUDA_SRCS := $(wildcard kernels/cuda/*.cu)
KERNELS_CUDA_OBJS := $(KERNELS_CUDA_SRCS:%.cu=$(OBJ)/%.o)
# sm_90: H100/H200. No sanitizer flags: nvcc objects are never instrumented.
KERNELS_NVCCFLAGS := -arch=sm_90 -O3 -std=c++17 -lineinfo -I. -Iinclude -DKERNELS_CUDA_HOME='"$(CUDA_HOME)"' \
                     -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter
KERNELS_CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl -lstdc++ -lm

$(OBJ)/kernels/cuda/%.o: kernels/cuda/%.cu | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(KERNELS_NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@
else
$(info kernels: no nvcc at $(NVCC): CUDA twin skipped, libkernels_cuda.a is a stub (kernels_cuda() = NULL))
KERNELS_CUDA_OBJS := $(OBJ)/kernels/cuda_stub.o
KERNELS_CUDA_LDLIBS :=
endif

$(KERNELS_CUDA_LIB): $(KERNELS_CUDA_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

ALL_TARGETS += $(KERNELS_CPU_LIB) $(KERNELS_CUDA_LIB)

# Unit tests: the CPU twin only (Check).
KERNELS_TEST_SRCS := $(wildcard tests/kernels/test_*.c) tests/kernels/kt_util.c
KERNELS_TEST_OBJS := $(KERNELS_TEST_SRCS:%.c=$(OBJ)/%.o)
$(BUILD)/tests/test_kernels: $(KERNELS_TEST_OBJS) $(KERNELS_CPU_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CHECK) $(KERNELS_CPU_LDLIBS)
UNIT_TESTS += $(BUILD)/tests/test_kernels

# Every CUDA kernel against its CPU twin; needs a GPU to run (scripts/gpu-check.sh).
ifeq ($(HAVE_NVCC),1)
KERNELS_GPU_COMPARE := $(BUILD)/tests/kernels_gpu_compare
$(OBJ)/tests/kernels/gpu_compare.o: ALL_CFLAGS += -I$(CUDA_INC)
$(KERNELS_GPU_COMPARE): $(OBJ)/tests/kernels/gpu_compare.o $(KERNELS_CUDA_LIB) $(KERNELS_CPU_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(KERNELS_CUDA_LDLIBS) $(KERNELS_CPU_LDLIBS)
ALL_TARGETS += $(KERNELS_GPU_COMPARE)
endif
