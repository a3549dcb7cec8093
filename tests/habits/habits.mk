# The habits of valgrind, heaptrack and memory_viz users (issue 34): what is
# live at exit by stack, --diff, folded stacks, suppressions, a snapshot of
# several devices, the memory_viz pickle's fields. tests/habits/run.sh.
ifeq ($(HAVE_CUDA_HEADERS),1)
HABITS_BIN := $(BUILD)/tests/habits
$(HABITS_BIN)/prog_no_loop: tests/habits/prog_no_loop.c $(SIM)/libcudart.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fvisibility=default -I$(CUDA_INC) -o $@ $< -L$(SIM) -lcudart
.PHONY: test-habits
test-habits: $(LIBCUDALLOC) $(BIN)/cudalloc-report $(HABITS_BIN)/prog_no_loop
	@bash tests/habits/run.sh $(BUILD)
SYSTEM_TESTS += test-habits
# The README's commands, run as written (tests/docs/readme_commands.sh, ~5 s).
.PHONY: test-readme
test-readme: $(LIBCUDALLOC) $(BIN)/cudalloc $(BIN)/cudalloc-report $(BIN)/demo_trainer
	@bash tests/docs/readme_commands.sh $(BUILD)
SYSTEM_TESTS += test-readme
ALL_TARGETS += $(HABITS_BIN)/prog_no_loop
endif
