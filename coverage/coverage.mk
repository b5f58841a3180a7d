# coverage/coverage.mk — per-accelerator coverage and the parity gate
# (included by the Makefile; manual: docs/coverage.md).
#
#   make coverage               instrumented build, the scenario suite once per
#                               accelerator in COV_SHARDS shards (ddpsim run
#                               --shard K/N; default 2), a tracefile per shard
#                               merged with lcov -a, coverage/html/ (with
#                               cobertura.xml), parity report; fails on a
#                               parity violation
#   make coverage-plant-check   the gate's own test: the mutant
#                               tests/mutants/plant-spawn-skips-barrier
#                               (ddp_spawn skips the plugin's barrier) must
#                               be caught by the gate and the scenario suite
#   make coverage-selftest      the parity tool's own tests (hand-written
#                               tracefiles; seconds; also run by make coverage)
#   make coverage-report        the parity report again on the last run's
#                               tracefiles (after editing coverage/parity.allow)
#   make coverage-clean         removes the outputs
#
# The parity tool and the Cobertura writer are plain C with the project's warning flags; it links
# nothing of libddpsim (and no instrumentation, whatever COVERAGE says).

COV_OUT        := build/coverage
COV_PARITY     := $(COV_OUT)/parity
COV_COBERTURA  := $(COV_OUT)/cobertura
COV_PLANT_OUT  := build/coverage-plant
COV_SHARDS     ?= 2
COV_CFLAGS     := -std=c11 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
                  -Wstrict-prototypes -Wmissing-prototypes -Wno-format-truncation

.PHONY: coverage coverage-selftest coverage-report coverage-plant-check coverage-clean

$(COV_PARITY): coverage/parity.c coverage/lcov_read.h
	@mkdir -p $(dir $@)
	$(CC) $(COV_CFLAGS) -o $@ $<

$(COV_COBERTURA): coverage/cobertura.c coverage/lcov_read.h
	@mkdir -p $(dir $@)
	$(CC) $(COV_CFLAGS) -o $@ $<

coverage: $(DEPS_OK) $(COV_PARITY) $(COV_COBERTURA)
	@PARITY=$(COV_PARITY) COBERTURA=$(COV_COBERTURA) sh coverage/selftest.sh >$(COV_OUT)/selftest.log 2>&1 || \
	    { cat $(COV_OUT)/selftest.log; exit 1; }
	@tail -n 1 $(COV_OUT)/selftest.log
	@MAKE="$(MAKE)" B=build/default-cov OUT=$(COV_OUT) SHARDS=$(COV_SHARDS) \
	    PLUGIN="$(PLUGIN)" PLUGIN_SRC="$(PLUGIN_SRC)" sh coverage/run.sh

coverage-selftest: $(COV_PARITY) $(COV_COBERTURA)
	PARITY=$(COV_PARITY) COBERTURA=$(COV_COBERTURA) sh coverage/selftest.sh

coverage-report: $(COV_PARITY)
	@MAKE="$(MAKE)" B=build/default-cov OUT=$(COV_OUT) REPORT_ONLY=1 \
	    PLUGIN="$(PLUGIN)" PLUGIN_SRC="$(PLUGIN_SRC)" sh coverage/run.sh

coverage-plant-check: $(DEPS_OK)
	@MAKE="$(MAKE)" sh coverage/plant-check.sh

coverage-clean:
	rm -rf $(COV_OUT) $(COV_PLANT_OUT) coverage/html
