# The host and count backends, the size parser and the trace parser, with their
# Check tests. Included from allocator/module.mk (and, until that exists, from
# tools/module.mk): allocator/ sorts first among the module.mk files, so every
# later module.mk can use these variables in its prerequisites. The guard makes
# a second include harmless.
ifndef CA_BACKENDS_MK
CA_BACKENDS_MK := 1

BACKEND_SRCS := allocator/backend_host.c allocator/backend_count.c allocator/backend_common.c
BACKEND_OBJS := $(BACKEND_SRCS:%.c=$(OBJ)/%.o)
UTIL_SRCS    := util/size.c util/quote.c util/prefix.c util/version.c util/live_file.c
UTIL_OBJS    := $(UTIL_SRCS:%.c=$(OBJ)/%.o)
VERSION_OBJ  := $(OBJ)/util/version.o
# The trace parser reads trace.csv.gz too: link it with -lz.
TRACE_SRCS   := tools/trace.c util/gunzip.c
TRACE_OBJS   := $(TRACE_SRCS:%.c=$(OBJ)/%.o)

# One Check binary per test source; $(1) test name, $(2) the objects it needs.
define ca_check_test
$(BUILD)/tests/$(1): $(OBJ)/tests/$(1).o $(2)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_CFLAGS) $$^ -o $$@ $$(LDLIBS_CHECK)
UNIT_TESTS += $(BUILD)/tests/$(1)
endef

$(eval $(call ca_check_test,allocator/test_backend_host,$(BACKEND_OBJS)))
$(eval $(call ca_check_test,allocator/test_backend_count,$(BACKEND_OBJS)))

endif
