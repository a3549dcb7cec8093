# reports/diagnose/: what would fit: the peak broken down and each memory
# fix's peak predicted (fixes.h), the repeated blocks of a pass (blocks.h).
DIAGNOSE_SRCS := reports/diagnose/blocks.c reports/diagnose/fixes.c reports/diagnose/fixes_curve.c \
                 reports/diagnose/phases.c reports/diagnose/fixes_track.c reports/diagnose/fixes_text.c \
                 reports/diagnose/fixes_json.c reports/diagnose/fixes_html.c
DIAGNOSE_OBJS := $(DIAGNOSE_SRCS:%.c=$(OBJ)/%.o)

# Check tests: tests/reports/diagnose/test_<name>.c
DIAGNOSE_TESTS := $(patsubst tests/reports/diagnose/%.c,$(BUILD)/tests/reports/diagnose/%,\
                    $(wildcard tests/reports/diagnose/test_*.c))
DIAGNOSE_TEST_LIBS = $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
$(DIAGNOSE_TESTS): $(BUILD)/tests/reports/diagnose/%: $(OBJ)/tests/reports/diagnose/%.o $(DIAGNOSE_TEST_LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(DIAGNOSE_TEST_LIBS) $(LDLIBS_CHECK) $(REPORTS_LDLIBS)
UNIT_TESTS += $(DIAGNOSE_TESTS)
# The diagnosis joins the reports' archive (the archive's rule links $^).
$(LIB)/libcareports.a: $(DIAGNOSE_OBJS)
