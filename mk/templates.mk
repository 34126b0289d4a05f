# `opcore new`'s project templates: src/build/templates/*.in (and templates_package/ for --package) are the
# sources, src/build/templates.c (checked in) is generated from them.
src/build/templates.c: $(wildcard src/build/templates/*.in) $(shell find src/build/templates_package -name "*.in") \
                       scripts/gen_templates.sh
	scripts/gen_templates.sh > $@.tmp && mv $@.tmp $@
