# man/: cudalloc(1), cudalloc-report(1), cudalloc-replay(1) and cudalloc(7), built
# into $(BUILD)/man by man/render.awk from each program's --help and the tables of
# docs/settings.md and docs/reports.md, so that the help, the docs and the man pages
# never disagree.
MAN_DIR := $(BUILD)/man
MAN_PAGES := $(MAN_DIR)/cudalloc.1 $(MAN_DIR)/cudalloc-report.1 $(MAN_DIR)/cudalloc-replay.1 $(MAN_DIR)/cudalloc.7

$(MAN_DIR)/%.1: man/%.1.in $(BIN)/% man/render.awk VERSION
	@mkdir -p $(@D)
	$(BIN)/$* --help > $@.help
	awk -v version='$(CUDALLOC_VERSION)' -v help=$@.help -f man/render.awk $< > $@.tmp
	@mv $@.tmp $@ && rm -f $@.help
MAN_TABLES := docs/settings.md docs/reports.md
$(MAN_DIR)/cudalloc.7: man/cudalloc.7.in $(MAN_TABLES) man/render.awk VERSION
	@mkdir -p $(@D)
	cat $(MAN_TABLES) > $@.md
	awk -v version='$(CUDALLOC_VERSION)' -v readme=$@.md -f man/render.awk $< > $@.tmp
	@mv $@.tmp $@ && rm -f $@.md
ALL_TARGETS += $(MAN_PAGES)

# --help, --version, the man pages and the docs' tables agree (tests/tools/help_man.sh).
.PHONY: test-help-man
test-help-man: $(MAN_PAGES) $(BIN)/cudalloc $(BIN)/cudalloc-report $(BIN)/cudalloc-replay
	@bash tests/tools/help_man.sh $(BUILD)
SYSTEM_TESTS += test-help-man
