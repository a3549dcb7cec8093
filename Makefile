# cudalloc: one Makefile; each directory adds its own rules in module.mk.
#   make          build everything this machine can build, into build/
#   make test     every test (units, whole programs, units again under ASan+UBSan,
#                 each fuzz harness briefly)
#   make bench    the benchmarks (figures go to BENCHMARKS.md by hand)
#   make fuzz     every libFuzzer harness for FUZZ_SECONDS (tests/fuzz)
#   make tsan     allocator unit tests and the stress test under ThreadSanitizer
#   make demo     the demo trainer under cudalloc, clean and leaking
#   make deps     install what is missing (Debian packages)
#   make install  bin/, lib/, include/, man pages and the Python module under
#                 DESTDIR/PREFIX (default /usr/local); make uninstall (install.mk)

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
SAN      ?=
# Trailing fields left out of an initializer are zero, by the language: events and
# configs name only the fields they set.
ALL_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
             -Werror=implicit-function-declaration \
             -fPIC -fvisibility=hidden -Iinclude -I. -I$(BUILD)/gen $(SANFLAGS) $(CFLAGS)
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(TSAN),1)
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
endif
LDLIBS_CHECK := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(shell test -x $(NVCC) && echo 1)
CUDA_INC  := $(CUDA_HOME)/include
HAVE_CUDA_HEADERS := $(shell test -f $(CUDA_INC)/cuda.h && echo 1)

LIB := $(BUILD)/lib
BIN := $(BUILD)/bin
SIM := $(BUILD)/sim
OBJ := $(BUILD)/obj
# The traces the tests replay: recorded for this project (tests/data/README.md).
TRACES ?= tests/data/torch
# The benchmarks measure those and, where the checkout has the shared folder of
# real traces from other people's runs beside it, those too (never copied in).
BENCH_TRACES ?= $(wildcard ../shared/traces/*.csv) $(wildcard $(TRACES)/*.csv)

# Filled in by the module.mk files.
ALL_TARGETS :=
UNIT_TESTS :=      # Check binaries, also run under sanitizers
SYSTEM_TESTS :=    # phony targets that run whole programs
BENCHES :=         # phony targets

.PHONY: all test unit system bench clean deps demo sanitize
all: deps-ok

DEPS_STAMP := $(BUILD)/.deps-ok
deps-ok: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps.sh
	@bash scripts/deps.sh
	@mkdir -p $(@D) && touch $@
deps:
	@bash scripts/deps.sh

# One version for every program, the library and the Python module: VERSION's
# first line, and the commit: from git when this tree is a checkout of its own
# (not a tarball unpacked inside another repository), else from VERSION's
# second line, which `git archive` (make dist) fills in (export-subst).
CUDALLOC_VERSION := $(shell sed -n 1p VERSION)
CUDALLOC_COMMIT := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ] && \
    git describe --always --dirty --abbrev=12 --match 'no-tag-is-named-so' 2>/dev/null || \
    sed -n '2s/^\([0-9a-f]\{12\}\)[0-9a-f]*$$/\1/p' VERSION)
CUDALLOC_VERSION_STRING := $(CUDALLOC_VERSION)$(if $(CUDALLOC_COMMIT), (git $(CUDALLOC_COMMIT)))
CUDALLOC_SOVERSION := $(firstword $(subst ., ,$(CUDALLOC_VERSION)))

# $(BUILD)/gen/ca_version.h: CA_VERSION, CA_SOVERSION. Rewritten only when they
# change, so a commit rebuilds only the files that include it (util/version.c).
$(BUILD)/gen/ca_version.h: FORCE
	@mkdir -p $(@D)
	@printf '#define CA_VERSION "%s"\n#define CA_SOVERSION "%s"\n' '$(CUDALLOC_VERSION_STRING)' \
	    '$(CUDALLOC_SOVERSION)' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
.PHONY: FORCE
FORCE:

$(OBJ)/%.o: %.c | $(DEPS_STAMP) $(BUILD)/gen/ca_version.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

include $(sort $(wildcard */module.mk))
include tests/fuzz/fuzz.mk
include tests/stress/stress.mk
include tests/habits/habits.mk
include install.mk

all: $(ALL_TARGETS)

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; CK_FORK=yes $$t; done

# Unit tests once more under AddressSanitizer and UndefinedBehaviorSanitizer,
# built in their own tree so the normal build is untouched.
# Their code runs several times slower there: Check's 4 s per test times 5.
sanitize:
	@CK_TIMEOUT_MULTIPLIER=5 $(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 OPT=-O1 unit

system: all $(SYSTEM_TESTS)

test: all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory system
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory sanitize-stress
	@$(MAKE) --no-print-directory fuzz-smoke
	@echo "make test: all suites passed"

bench: all $(BENCHES)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
