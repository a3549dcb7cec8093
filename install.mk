# make install / make uninstall, the GNU layout under $(DESTDIR)$(PREFIX):
#   bin/cudalloc, bin/cudalloc-report, bin/cudalloc-replay, bin/demo_trainer
#   lib/libcudalloc.so.VERSION, .so.N (its soname) and .so
#   lib/cudalloc/sim/  the simulated device's libcuda.so.1 and libcudart.so.13, out of
#                      the dynamic linker's path: they never shadow a real driver
#   include/cudalloc.h, lib/pkgconfig/cudalloc.pc
#   share/man/man1/cudalloc.1, cudalloc-report.1, cudalloc-replay.1, man7/cudalloc.7
#   PYTHON_SITE/cudalloc/  the Python module (scripts/python_site.py says where)
# The launcher finds lib/ from its own place, so the tree can be moved or copied.
# make dist: build/cudalloc-VERSION.tar.gz from HEAD (git archive), which builds
# without git and still knows its commit (VERSION's second line).
PREFIX  ?= /usr/local
DESTDIR ?=
PYTHON  ?= python3
INSTALL ?= install

INSTALL_BINS := $(filter $(BIN)/cudalloc $(BIN)/cudalloc-report $(BIN)/cudalloc-replay $(BIN)/demo_trainer,$(ALL_TARGETS))
SIM_INSTALLED := $(PREFIX)/lib/cudalloc/sim
LIB_REAL := libcudalloc.so.$(CUDALLOC_VERSION)
LIB_SONAME := libcudalloc.so.$(CUDALLOC_SOVERSION)
PYTHON_SITE = $(shell $(PYTHON) scripts/python_site.py '$(PREFIX)')
PY_FILES := $(filter-out python/cudalloc/_build.py,$(wildcard python/cudalloc/*.py))
D := $(DESTDIR)$(PREFIX)

.PHONY: install uninstall dist
install: all
	$(INSTALL) -d '$(D)/bin' '$(D)/lib/pkgconfig' '$(DESTDIR)$(SIM_INSTALLED)' '$(D)/include' \
	    '$(D)/share/man/man1' '$(D)/share/man/man7'
	$(INSTALL) -m 755 $(INSTALL_BINS) '$(D)/bin/'
	$(INSTALL) -m 755 $(LIB)/libcudalloc.so '$(D)/lib/$(LIB_REAL)'
	ln -sf $(LIB_REAL) '$(D)/lib/$(LIB_SONAME)'
	ln -sf $(LIB_SONAME) '$(D)/lib/libcudalloc.so'
	$(INSTALL) -m 755 $(SIM)/libcuda.so.1 $(SIM)/libcudart.so.13 '$(DESTDIR)$(SIM_INSTALLED)/'
	ln -sf libcuda.so.1 '$(DESTDIR)$(SIM_INSTALLED)/libcuda.so'
	ln -sf libcudart.so.13 '$(DESTDIR)$(SIM_INSTALLED)/libcudart.so'
	$(INSTALL) -m 644 include/cudalloc.h '$(D)/include/'
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(CUDALLOC_VERSION)|' include/cudalloc.pc.in \
	    > '$(D)/lib/pkgconfig/cudalloc.pc' && chmod 644 '$(D)/lib/pkgconfig/cudalloc.pc'
	$(INSTALL) -m 644 $(filter %.1,$(MAN_PAGES)) '$(D)/share/man/man1/'
	$(INSTALL) -m 644 $(filter %.7,$(MAN_PAGES)) '$(D)/share/man/man7/'
	@site='$(PYTHON_SITE)'; [ -n "$$site" ] || { echo "install: $(PYTHON) cannot say where Python modules go"; exit 1; }; \
	set -e; $(INSTALL) -d "$(DESTDIR)$$site/cudalloc"; \
	$(INSTALL) -m 644 $(PY_FILES) "$(DESTDIR)$$site/cudalloc/"; \
	root=$$($(PYTHON) -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' '$(PREFIX)' "$$site/cudalloc"); \
	printf '"""Written by make install: the version, and the cudalloc tree from this folder."""\nversion = "%s"\nroot = "%s"\n' \
	    '$(CUDALLOC_VERSION)' "$$root" > "$(DESTDIR)$$site/cudalloc/_build.py"; \
	chmod 644 "$(DESTDIR)$$site/cudalloc/_build.py"; \
	echo "install: the Python module is in $$site (import cudalloc; python -m cudalloc run -- train.py)"

uninstall:
	rm -f $(foreach b,$(notdir $(INSTALL_BINS)),'$(D)/bin/$(b)')
	rm -f '$(D)/lib/$(LIB_REAL)' '$(D)/lib/$(LIB_SONAME)' '$(D)/lib/libcudalloc.so'
	rm -f $(foreach f,libcuda.so.1 libcuda.so libcudart.so.13 libcudart.so,'$(DESTDIR)$(SIM_INSTALLED)/$(f)')
	-rmdir '$(DESTDIR)$(SIM_INSTALLED)' '$(D)/lib/cudalloc' 2>/dev/null
	rm -f '$(D)/include/cudalloc.h' '$(D)/lib/pkgconfig/cudalloc.pc'
	rm -f $(foreach m,$(notdir $(filter %.1,$(MAN_PAGES))),'$(D)/share/man/man1/$(m)') '$(D)/share/man/man7/cudalloc.7'
	@site='$(PYTHON_SITE)'; [ -z "$$site" ] || rm -rf "$(DESTDIR)$$site/cudalloc"

dist:
	@mkdir -p $(BUILD)
	git archive --format=tar.gz --prefix=cudalloc-$(CUDALLOC_VERSION)/ -o $(BUILD)/cudalloc-$(CUDALLOC_VERSION).tar.gz HEAD
	@echo "dist: $(BUILD)/cudalloc-$(CUDALLOC_VERSION).tar.gz (HEAD, $(CUDALLOC_COMMIT))"

# The test: install into a temporary DESTDIR and use the installed tree from
# outside the source tree (tests/install/run.sh).
.PHONY: test-install
test-install: all
	@MAKE='$(MAKE)' bash tests/install/run.sh $(BUILD)
SYSTEM_TESTS += test-install
