# python/: the cudalloc Python module (pure Python over ctypes), installed by
# install.mk or `pip install --no-build-isolation python/`. Its tests need the
# preload, the launcher and the simulated device.
ifeq ($(HAVE_CUDA_HEADERS),1)
.PHONY: test-python-module
test-python-module: $(LIBCUDALLOC) $(BIN)/cudalloc $(SIM)/libcudart.so $(SIM)/libcuda.so
	@bash tests/python/module.sh $(BUILD)
SYSTEM_TESTS += test-python-module
endif

ifeq ($(HAVE_CUDA_HEADERS),1)
.PHONY: bench-python-module
bench-python-module: $(LIBCUDALLOC) $(BIN)/cudalloc $(SIM)/libcudart.so $(SIM)/libcuda.so
	@$(BIN)/cudalloc run --sim 256MiB --conf summary:false -- env PYTHONPATH=python python3 tests/python/bench_module.py 2>/dev/null
	@LD_LIBRARY_PATH=$(SIM) PYTHONPATH=python python3 tests/python/bench_module.py
BENCHES += bench-python-module
endif
