# cudalloc: one Makefile; each directory adds its own rules in module.mk.
#   make          build everything this machine can build, into build/
#   make test     every test (units, whole programs, units again under ASan+UBSan,
#                 each fuzz harness briefly)
#   make bench    the benchmarks (figures go to BENCHMARKS.md by hand)
#   make fuzz     every libFuzzer harness for FUZZ_SECONDS (tests/fuzz)
#   make tsan     allocator unit tests and the stress test under ThreadSanitizer
#   make demo     the demo trainer under cudalloc, clean and leaking
#   make deps     install what is missing (Debian packages)

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
SAN      ?=
ALL_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration \
             -fPIC -fvisibility=hidden -Iinclude -I. $(SANFLAGS) $(CFLAGS)
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
TRACES ?= tests/data

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

$(OBJ)/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

include $(sort $(wildcard */module.mk))
include reports/diagnose/diagnose.mk
include tests/fuzz/fuzz.mk
include tests/stress/stress.mk

all: $(ALL_TARGETS)

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; CK_FORK=yes $$t; done

# Unit tests once more under AddressSanitizer and UndefinedBehaviorSanitizer,
# built in their own tree so the normal build is untouched.
sanitize:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 OPT=-O1 unit

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
