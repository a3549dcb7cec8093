# reports/: what cudalloc writes for people and other tools.
# The writers below know formats, not allocations; the report logic that
# feeds them adds its sources to REPORTS_SRCS.

REPORTS_WRITER_SRCS := reports/utf8.c reports/fmt.c reports/pickle.c reports/json.c \
                       reports/svg.c reports/fileout.c
# Readers of plain data (pickles, JSON) into one tree of values.
REPORTS_READER_SRCS := reports/value.c reports/pickle_read.c reports/json_read.c
REPORTS_SRCS := $(REPORTS_WRITER_SRCS) $(REPORTS_READER_SRCS)
# (Add report sources to REPORTS_SRCS above this line: the archive rule
# below reads the list when make parses it.)
REPORTS_OBJS = $(REPORTS_SRCS:%.c=$(OBJ)/%.o)

# Rebuilt from scratch so an object dropped from the list leaves the archive.
$(LIB)/libcareports.a: $(REPORTS_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(LIB)/libcareports.a

# Check unit tests: tests/reports/test_<name>.c -> $(BUILD)/tests/reports/test_<name>
REPORTS_TESTS := $(patsubst tests/reports/%.c,$(BUILD)/tests/reports/%,$(wildcard tests/reports/test_*.c))

$(REPORTS_TESTS): $(BUILD)/tests/reports/%: $(OBJ)/tests/reports/%.o $(LIB)/libcareports.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(LIB)/libcareports.a $(LDLIBS_CHECK) -lm -lpthread

UNIT_TESTS += $(REPORTS_TESTS)

# Tracking, leak diagnosis and report content (a separate file, its own owner).
include reports/tracking.mk
