# simgpu: a simulated device for machines without a GPU, libcuda.so.1 and
# libcudart.so.13 on host memory (see simgpu/README.md).
ifeq ($(HAVE_CUDA_HEADERS),)
$(info simgpu: skipped, no $(CUDA_INC)/cuda.h (set CUDA_HOME to a CUDA toolkit))
else

SIMGPU_DRIVER_SRC := $(addprefix simgpu/,driver_init.c env.c capacity.c regions.c \
    driver_device.c driver_ctx.c driver_mem.c driver_copy.c driver_pointer.c driver_dmabuf.c \
    physmem.c driver_vmm.c driver_peer.c driver_ipc.c driver_stream.c driver_events.c stream_hold.c capture.c \
    graph.c graph_mem.c inject.c proc_address.c errors.c counters.c)
SIMGPU_RUNTIME_SRC := $(addprefix simgpu/,runtime_init.c runtime_device.c runtime_mem.c \
    runtime_stream.c runtime_graph.c runtime_launch.c runtime_errors.c runtime_peer.c runtime_ipc.c)

$(OBJ)/simgpu/%.o: ALL_CFLAGS += -I$(CUDA_INC)

$(SIM)/libcuda.so.1: $(SIMGPU_DRIVER_SRC:%.c=$(OBJ)/%.o) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $^ -lpthread

# The real libcudart.so.13 versions its symbols (cudaMalloc@@libcudart.so.13);
# so does this one, so that programs linked against either run with either.
$(SIM)/libcudart.so.13: $(SIMGPU_RUNTIME_SRC:%.c=$(OBJ)/%.o) simgpu/cudart.map
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=simgpu/cudart.map \
	    -Wl,-z,defs -o $@ $(filter %.o,$^) -ldl -lpthread

# The CUPTI stand-in (simgpu/cupti.c): one subscriber, the driver's activity.
$(SIM)/libcupti.so.13: $(OBJ)/simgpu/cupti.o
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcupti.so.13 -Wl,-z,defs -o $@ $^ -ldl -lpthread
$(SIM)/libcupti.so: $(SIM)/libcupti.so.13
	ln -sf libcupti.so.13 $@

# build/ is laid out as an installed tree (install.mk): lib/cudalloc/sim, where the
# launcher looks, is a link to $(SIM).
$(SIM)/libcuda.so: $(SIM)/libcuda.so.1
	ln -sf libcuda.so.1 $@
	@mkdir -p $(LIB)/cudalloc && ln -sfn ../../sim $(LIB)/cudalloc/sim
$(SIM)/libcudart.so: $(SIM)/libcudart.so.13
	ln -sf libcudart.so.13 $@
	@mkdir -p $(LIB)/cudalloc && ln -sfn ../../sim $(LIB)/cudalloc/sim

SIMGPU_LIBS := $(SIM)/libcuda.so.1 $(SIM)/libcuda.so $(SIM)/libcudart.so.13 $(SIM)/libcudart.so \
               $(SIM)/libcupti.so.13 $(SIM)/libcupti.so
ALL_TARGETS += $(SIMGPU_LIBS)

# Unit tests (tests/sim). They find the simulated libraries through their
# RUNPATH, so they run as `make unit` runs them, with no LD_LIBRARY_PATH; both
# libraries are linked, and cudart's dlopen("libcuda.so.1") finds the loaded one.
$(OBJ)/tests/sim/%.o: ALL_CFLAGS += -I$(CUDA_INC)
SIMGPU_UNITS := $(addprefix $(BUILD)/tests/sim_,driver vmm events proc runtime peer ipc capture faults)
$(SIMGPU_UNITS): $(BUILD)/tests/sim_%: $(OBJ)/tests/sim/test_%.o $(SIMGPU_LIBS)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -o $@ $< -L$(SIM) -Wl,--no-as-needed -lcudart -lcuda -Wl,--as-needed \
	    -Wl,-rpath,$(abspath $(SIM)) $(LDLIBS_CHECK) -lpthread -ldl

# The route test's libcuda.so.1 is a spy that forwards to the simulated driver.
SIMGPU_SPY := $(BUILD)/tests/sim_spy/libcuda.so.1
$(OBJ)/tests/sim/route_spy.o: ALL_CFLAGS += -DSIM_DRIVER='"$(abspath $(SIM))/libcuda.so.1"'
$(SIMGPU_SPY): $(OBJ)/tests/sim/route_spy.o
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ $< -ldl
$(BUILD)/tests/sim_route: $(OBJ)/tests/sim/test_route.o $(SIMGPU_SPY) $(SIMGPU_LIBS)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -o $@ $< $(SIMGPU_SPY) -L$(SIM) -lcudart \
	    -Wl,-rpath,$(abspath $(dir $(SIMGPU_SPY))):$(abspath $(SIM)) $(LDLIBS_CHECK)

UNIT_TESTS += $(SIMGPU_UNITS) $(BUILD)/tests/sim_route

# Whole programs, run the way users run them: LD_LIBRARY_PATH=$(SIM).
SIMGPU_LINK := $(BUILD)/tests/sim_link_check
$(SIMGPU_LINK): $(OBJ)/tests/sim/link_check.o $(SIMGPU_LIBS)
	$(CC) -o $@ $< -L$(SIM) -lcudart

# The same program linked against the toolkit's real libcudart.so.13: its
# versioned references must resolve in simgpu's.
SIMGPU_REAL_CUDART := $(wildcard $(CUDA_HOME)/lib64/libcudart.so)
SIMGPU_LINK_REAL := $(if $(SIMGPU_REAL_CUDART),$(BUILD)/tests/sim_link_check_real)
$(BUILD)/tests/sim_link_check_real: $(OBJ)/tests/sim/link_check.o
	$(CC) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart

.PHONY: sim-link sim-exports sim-nvcc
sim-link: $(SIMGPU_LINK) $(SIMGPU_LINK_REAL) $(SIMGPU_LIBS)
	@set -e; for t in $(SIMGPU_LINK) $(SIMGPU_LINK_REAL); do \
	    out=$$(LD_LIBRARY_PATH=$(SIM) $$t); echo "$$t: $$out"; \
	    case "$$out" in *"simgpu (simulated CUDA device)"*) ;; *) echo "sim-link: $$t did not run on simgpu"; exit 1;; esac; \
	done

sim-exports: $(SIMGPU_LIBS)
	@SIM=$(SIM) sh tests/sim/check_exports.sh

SYSTEM_TESTS += sim-link sim-exports

ifeq ($(HAVE_NVCC),1)
$(BUILD)/tests/sim_launch: tests/sim/launch.cu
	@mkdir -p $(@D)
	$(NVCC) -cudart shared -o $@ $<
sim-nvcc: $(BUILD)/tests/sim_launch $(SIMGPU_LIBS)
	@LD_LIBRARY_PATH=$(SIM) $(BUILD)/tests/sim_launch 2>$(BUILD)/tests/sim_launch.err
	@test "$$(cat $(BUILD)/tests/sim_launch.err)" = \
	    "simgpu: kernel launch needs a GPU; this is the simulated device" || \
	    { echo "sim-nvcc: unexpected stderr:"; cat $(BUILD)/tests/sim_launch.err; exit 1; }
	@echo "sim-nvcc: registration works, the launch fails as documented"
SYSTEM_TESTS += sim-nvcc
endif

endif
