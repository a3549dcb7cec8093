# simgpu: a simulated device for machines without a GPU, libcuda.so.1 and
# libcudart.so.13 on host memory (see simgpu/README.md).
ifeq ($(HAVE_CUDA_HEADERS),)
$(info simgpu: skipped, no $(CUDA_INC)/cuda.h (set CUDA_HOME to a CUDA toolkit))
else

SIMGPU_DRIVER_SRC := $(addprefix simgpu/,driver_init.c env.c capacity.c regions.c \
    driver_device.c driver_ctx.c driver_mem.c driver_copy.c driver_pointer.c \
    physmem.c driver_vmm.c driver_stream.c driver_events.c proc_address.c errors.c counters.c)
SIMGPU_RUNTIME_SRC := $(addprefix simgpu/,runtime_init.c runtime_device.c runtime_mem.c \
    runtime_stream.c runtime_launch.c runtime_errors.c)

$(OBJ)/simgpu/%.o: ALL_CFLAGS += -I$(CUDA_INC)

$(SIM)/libcuda.so.1: $(SIMGPU_DRIVER_SRC:%.c=$(OBJ)/%.o)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $^ -lpthread

# The real libcudart.so.13 versions its symbols (cudaMalloc@@libcudart.so.13);
# so does this one, so that programs linked against either run with either.
$(SIM)/libcudart.so.13: $(SIMGPU_RUNTIME_SRC:%.c=$(OBJ)/%.o) simgpu/cudart.map
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=simgpu/cudart.map \
	    -Wl,-z,defs -o $@ $(filter %.o,$^) -ldl -lpthread

$(SIM)/libcuda.so: $(SIM)/libcuda.so.1
	ln -sf libcuda.so.1 $@
$(SIM)/libcudart.so: $(SIM)/libcudart.so.13
	ln -sf libcudart.so.13 $@

SIMGPU_LIBS := $(SIM)/libcuda.so.1 $(SIM)/libcuda.so $(SIM)/libcudart.so.13 $(SIM)/libcudart.so
ALL_TARGETS += $(SIMGPU_LIBS)

endif
