# tests/fuzz: libFuzzer harnesses for every parser of outside input, built
# with clang (-fsanitize=fuzzer,address,undefined) in $(BUILD)/fuzz.
#   make fuzz          each harness for FUZZ_SECONDS (default 60)
#   make fuzz-smoke    each harness for FUZZ_SMOKE_SECONDS (default 10); part of make test
# Seeds are committed in tests/fuzz/corpus/NAME/ and are always run first, so
# an input that once crashed stays a regression test. New inputs the fuzzer
# finds go to $(BUILD)/fuzz/corpus/NAME/, crashes to $(BUILD)/fuzz/artifacts/.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_BIN := $(BUILD)/fuzz
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo 1)
FUZZ_FLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=undefined -Wall -Iinclude -I. -I$(BUILD)/gen
FUZZ_TARGETS :=

# One harness: $(1) its name (tests/fuzz/fuzz_$(1).c, seeds in
# tests/fuzz/corpus/$(1)/, a dictionary in tests/fuzz/$(1).dict if any), $(2)
# the sources it tests, $(3) extra flags for them and the harness, $(4)
# libraries to link. Objects in $(FUZZ_BIN)/obj, instrumented for coverage.
define ca_fuzz
FUZZ_TARGETS += $(1)
$(patsubst %.c,$(FUZZ_BIN)/obj/%.o,tests/fuzz/fuzz_$(1).c $(2)): FUZZ_XFLAGS += $(3)
$(FUZZ_BIN)/fuzz_$(1): $(patsubst %.c,$(FUZZ_BIN)/obj/%.o,tests/fuzz/fuzz_$(1).c $(2))
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $$@ $$^ $(4)
endef

$(FUZZ_BIN)/obj/%.o: %.c | $(DEPS_STAMP) $(BUILD)/gen/ca_version.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(FUZZ_XFLAGS) -MMD -MP -c $< -o $@

# ---- the harnesses: adding one is one line here ----
$(eval $(call ca_fuzz,trace,tools/trace.c util/gunzip.c util/quote.c util/size.c,,-lz))
$(eval $(call ca_fuzz,conf,preload/config.c util/size.c util/quote.c util/prefix.c,-I$(CUDA_INC) -D_GNU_SOURCE))
$(eval $(call ca_fuzz,size,util/size.c))
# the PyTorch snapshot reader end to end: pickle, snapshot, tracker, reports
$(eval $(call ca_fuzz,snapshot,$(REPORTS_SRCS) $(ALLOC_SRCS) $(BACKEND_SRCS) util/gunzip.c util/quote.c util/prefix.c,,$(REPORTS_LDLIBS)))

-include $(shell find $(FUZZ_BIN)/obj -name '*.d' 2>/dev/null)

.PHONY: fuzz fuzz-smoke fuzz-build
ifeq ($(HAVE_FUZZ_CC),1)
fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_BIN)/fuzz_%)
fuzz: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_BIN) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-smoke: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_BIN) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)
else
fuzz fuzz-smoke fuzz-build:
	@echo "fuzz: no $(FUZZ_CC) (apt-get install clang libclang-rt-dev): harnesses not built" && false
endif
