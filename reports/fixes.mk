# What would fit (issue 18): the tests of the peak's breakdown and each fix's
# predicted peak (reports/diagnose/fixes.h, blocks.h, phases.h, fixes_track.h;
# reports/write/fixes_text.h, fixes_out.h), recording the PyTorch runs they are
# measured against, and the validation. Included from reports/module.mk.

# Check tests: tests/reports/diagnose/test_<name>.c
DIAGNOSE_TESTS := $(patsubst tests/reports/diagnose/%.c,$(BUILD)/tests/reports/diagnose/%,\
                    $(wildcard tests/reports/diagnose/test_*.c))
DIAGNOSE_TEST_LIBS = $(LIB)/libcareports.a $(LIBCA) $(UTIL_OBJS)
$(DIAGNOSE_TESTS): $(BUILD)/tests/reports/diagnose/%: $(OBJ)/tests/reports/diagnose/%.o $(DIAGNOSE_TEST_LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(DIAGNOSE_TEST_LIBS) $(LDLIBS_CHECK) $(REPORTS_LDLIBS)
UNIT_TESTS += $(DIAGNOSE_TESTS)

# The fixes measured on real PyTorch runs (tests/data/torch/fixes, see
# tests/data/README.md): each model's plain run and its runs with each fix,
# gzipped. Not part of `make test`: it re-records the committed files.
FIX_MODELS := a g
FIX_CASES := plain accum2 accum4 bf16 checkpoint
.PHONY: record-torch-fixes
record-torch-fixes: $(BUILD)/record_alloc.so
	@set -e; for m in $(FIX_MODELS); do for c in $(FIX_CASES); do \
	    f=tests/data/torch/fixes/$${m}_$$c.csv; \
	    MODEL=$$m RECORD_ALLOC_CSV=$$f LD_PRELOAD=$(abspath $(BUILD)/record_alloc.so) \
	        $(TORCH_PYTHON) tests/data/torch/train_gpt.py fix-$$c; \
	    gzip -9nf $$f; echo "  $$f.gz: $$(wc -c < $$f.gz) bytes"; done; done

# Four model families (issue 28; tests/data/torch/train_models.py), each
# recorded plainly and under each fix (tests/data/torch/models): RUN is
# FAMILY_ZERO (where zero_grad runs). The plain run is recorded with Python
# frames too and kept as a snapshot with them (to_snapshot.py) beside its
# sizes-only CSV. Not part of `make test`: it re-records the committed files.
# MODEL_PLAIN_RUNS are recorded plainly only (lstm1: no unit to checkpoint);
# the three fixes together (`all`) with zero_grad at the end only.
MODEL_RUNS := resnet_end resnet_start lstm_end lstm_start mlp_end mlp_start tx_end tx_start tx_inplace
MODEL_PLAIN_RUNS := lstm1_end
.PHONY: record-torch-models
record-torch-models: $(BUILD)/record_alloc.so
	@set -e; d=tests/data/torch/models; t=$$(mktemp -d); mkdir -p $$d; \
	for r in $(MODEL_RUNS) $(MODEL_PLAIN_RUNS); do \
	    cases="$(FIX_CASES)"; case $$r in *_end) cases="$$cases all";; esac; \
	    case " $(MODEL_PLAIN_RUNS) " in *" $$r "*) cases=plain;; esac; \
	    for c in $$cases; do \
	    frames=; [ $$c = plain ] && frames=$$t/frames.txt; \
	    FAMILY=$${r%_*} ZERO=$${r#*_} RECORD_ALLOC_CSV=$$t/run.csv RECORD_ALLOC_FRAMES=$$frames \
	        LD_PRELOAD=$(abspath $(BUILD)/record_alloc.so) $(TORCH_PYTHON) tests/data/torch/train_models.py fix-$$c; \
	    if [ $$c = plain ]; then python3 tests/data/torch/to_snapshot.py $$t/run.csv $$frames \
	        $$d/$${r}_plain.pickle.gz $$d/$${r}_plain.csv.gz; \
	    else gzip -9nc $$t/run.csv > $$d/$${r}_$$c.csv.gz; fi; done; done; rm -rf $$t; ls -l $$d

# Predictions against measured peaks (BENCHMARKS.md, issue 18): PyTorch runs
# recorded here and demo_trainer sweeps; minutes.
.PHONY: bench-fixes
bench-fixes: $(BIN)/cudalloc-report $(BIN)/cudalloc $(BIN)/demo_trainer $(LIB)/libcudalloc.so $(BUILD)/record_alloc.so
	@bash scripts/fixes-validate.sh $(BUILD) $(BUILD)/fixes

.PHONY: test-fixes
test-fixes: $(BIN)/cudalloc-report $(BIN)/demo_trainer $(LIB)/libcudalloc.so $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/reports/diagnose/fixes_system.sh $(BUILD)
SYSTEM_TESTS += test-fixes
