# reports/: seeing, tracking and diagnosing allocations, and the files that go
# in and out. One folder per job ("room"), lowest first; a room's files include
# only rooms before it in this list (reports/REPORT.md, "Rooms"):
#   capture   call sites: native stacks, symbols, Python frames, named frames
#   track     the tracker: lifetimes, iterations (marked or detected), ranges
#   diagnose  leaks, fragmentation, OOM verdicts, what would fit (each memory
#             fix's peak), read off the tracker's views
#   write     formats (UTF-8, numbers, pickle, JSON, SVG, safe files) and the
#             reports written in them (text, JSON, HTML, CSV, pickle)
#   read      other tools' files: the value tree, pickle and JSON readers, and
#             PyTorch snapshots laid out and fed to the tracker
# Every room's sources go into one archive, libcareports.a.
REPORTS_ROOMS := capture track diagnose write read
REPORTS_SRCS := $(foreach room,$(REPORTS_ROOMS),$(sort $(wildcard reports/$(room)/*.c)))
REPORTS_OBJS = $(REPORTS_SRCS:%.c=$(OBJ)/%.o)
# ar keeps members by file name: two rooms' x.c would overwrite one another.
ifneq ($(words $(notdir $(REPORTS_SRCS))),$(words $(sort $(notdir $(REPORTS_SRCS)))))
$(error reports/: two rooms hold a source of the same name; the archive keeps one)
endif

# Rebuilt from scratch so an object dropped from the list leaves the archive.
$(LIB)/libcareports.a: $(REPORTS_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(LIB)/libcareports.a

# Check unit tests: tests/reports/test_<name>.c -> $(BUILD)/tests/reports/test_<name>
REPORTS_TESTS := $(patsubst tests/reports/%.c,$(BUILD)/tests/reports/%,$(wildcard tests/reports/test_*.c))

$(REPORTS_TESTS): $(BUILD)/tests/reports/%: $(OBJ)/tests/reports/%.o $(LIB)/libcareports.a $(UTIL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(LIB)/libcareports.a $(UTIL_OBJS) $(LDLIBS_CHECK) -lm -lpthread

UNIT_TESTS += $(REPORTS_TESTS)

# Each room includes only the rooms before it in REPORTS_ROOMS.
.PHONY: test-rooms
test-rooms:
	@bash tests/reports/rooms.sh $(REPORTS_ROOMS)
SYSTEM_TESTS += test-rooms

# The tests of tracking, diagnosis and reports, cudalloc-report and their
# benchmarks (a separate file, its own owner).
include reports/tracking.mk
# What would fit: its tests, recordings and validation.
include reports/fixes.mk
