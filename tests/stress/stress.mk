# tests/stress: the whole-program stress test of the preload on the simulated
# device (tests/stress/stress.c), under the normal build, under ASan+UBSan and
# under ThreadSanitizer.
#   make test-stress       a few seconds of it (part of make system)
#   make bench-stress      a longer run: BENCH_STRESS_SECONDS (default 30)
#   make sanitize-stress   the same few seconds with everything built with
#                          ASan+UBSan in $(BUILD)/san (part of make test)
#   make tsan              the allocator's unit tests and the stress test with
#                          everything built with -fsanitize=thread in $(BUILD)/tsan
ifeq ($(HAVE_CUDA_HEADERS),1)

STRESS := $(BUILD)/tests/stress/stress
$(STRESS): tests/stress/stress.c $(SIM)/libcudart.so $(SIM)/libcuda.so | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lcuda -ldl -lpthread -lm

RESET_REPORTS := $(BUILD)/tests/stress/reset_reports
$(RESET_REPORTS): tests/stress/reset_reports.c $(SIM)/libcudart.so | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lpthread

RESET_RACE := $(BUILD)/tests/stress/reset_race
$(RESET_RACE): tests/stress/reset_race.c $(SIM)/libcudart.so | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lpthread

CUPTI_OOM_RACE := $(BUILD)/tests/stress/cupti_oom_race
$(CUPTI_OOM_RACE): tests/stress/cupti_oom_race.c $(SIM)/libcudart.so | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -D_GNU_SOURCE -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart -lpthread

# A sanitized preload needs its sanitizer's runtime loaded first.
STRESS_RUNTIME := $(if $(filter 1,$(SAN)),$(shell $(CC) -print-file-name=libasan.so)) \
                  $(if $(filter 1,$(TSAN)),$(shell $(CC) -print-file-name=libtsan.so))
STRESS_SECONDS ?= 3
BENCH_STRESS_SECONDS ?= 30

.PHONY: test-stress bench-stress sanitize-stress tsan tsan-run
test-stress: $(LIBCUDALLOC) $(STRESS) $(RESET_REPORTS) $(RESET_RACE) $(CUPTI_OOM_RACE)
	@STRESS_RUNTIME="$(strip $(STRESS_RUNTIME))" bash tests/stress/run.sh $(BUILD) $(STRESS_SECONDS)
SYSTEM_TESTS += test-stress

bench-stress: $(LIBCUDALLOC) $(STRESS) $(RESET_REPORTS) $(RESET_RACE) $(CUPTI_OOM_RACE)
	@bash tests/stress/run.sh $(BUILD) $(BENCH_STRESS_SECONDS)
BENCHES += bench-stress

sanitize-stress:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 OPT=-O1 test-stress

# TSan: its own tree; the allocator's unit tests (their threads share pools,
# or grow at once under one cap; readers race the address index's writer)
# and the stress test, whose races in the preload, allocator, reports and
# simgpu would all show. Suppressions: tests/stress/tsan.supp (each justified).
tsan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan TSAN=1 OPT=-O1 tsan-run
tsan-run: $(TESTS_BIN)/test_allocator $(TESTS_BIN)/test_stress $(TESTS_BIN)/test_pools $(TESTS_BIN)/test_addrindex $(LIBCUDALLOC) $(STRESS) $(RESET_REPORTS) $(RESET_RACE) $(CUPTI_OOM_RACE)
	@set -e; export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(abspath tests/stress/tsan.supp)"; \
	for t in $(TESTS_BIN)/test_allocator $(TESTS_BIN)/test_stress $(TESTS_BIN)/test_pools $(TESTS_BIN)/test_addrindex; do echo "== $$t (TSan)"; CK_FORK=yes $$t; done; \
	STRESS_RUNTIME="$(strip $(STRESS_RUNTIME))" STRESS_FORKS=8 bash tests/stress/run.sh $(BUILD) $(STRESS_SECONDS)

endif
