# preload/: build/lib/libcudalloc.so, loaded with LD_PRELOAD into CUDA programs.
ifeq ($(HAVE_CUDA_HEADERS),1)
PRELOAD_SRCS := preload/real.c preload/config.c preload/devices.c preload/alloc.c preload/cuda_backend.c \
                preload/hooks_runtime.c preload/hooks_driver.c preload/hooks_dl.c preload/api.c preload/report.c
PRELOAD_OBJS := $(PRELOAD_SRCS:%.c=$(OBJ)/%.o)
$(PRELOAD_OBJS): ALL_CFLAGS += -I$(CUDA_INC) -D_GNU_SOURCE
LIBCUDALLOC := $(LIB)/libcudalloc.so

# No libcuda or libcudart at link time: the preload loads into any program and
# finds the driver at run time.
$(LIBCUDALLOC): $(PRELOAD_OBJS) $(LIBCA) $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libcudalloc.so -Wl,--no-undefined -o $@ $^ -ldl -lpthread
ALL_TARGETS += $(LIBCUDALLOC)
else
$(info cudalloc: no CUDA headers in $(CUDA_INC): libcudalloc.so is not built)
endif
