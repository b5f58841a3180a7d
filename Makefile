# ddpsim — build, test, run, install.
#
#   make            library (static + shared), the ddpsim command, the tests
#   make run        the main job: bundled scenarios x accelerators, a table
#   make test       every CUnit suite (SANITIZE=address,undefined | thread)
#   make bench      benchmarks (figures only, no assertions)
#   make coverage   per-accelerator coverage and the parity gate
#   make mutate     the mutation check: tests/mutants/ x the layers above
#   make real-scenarios / netns-scenarios / real-test / fidelity   real runs
#   make differential  the address parser vs this host's libc, the endpoint, host and
#                      GLOO_SOCKET_IFNAME readings and the store server vs torch
#                      1.13's (DIFF_COUNT a family)
#   make torch-test real PyTorch against ddpsim's store (tests/torch/)
#   make fuzz       libFuzzer harnesses, FUZZ_SECONDS each (clang)
#   make install    PREFIX=/usr/local (lib, headers, pkg-config, command, man page)
#   make deps       install missing Debian packages (apt-get, as root)
#
# Each SANITIZE / COVERAGE variant builds in its own directory under build/.

VERSION   := 0.1.0
PREFIX    ?= /usr/local
CC        ?= cc
SANITIZE  ?=
COVERAGE  ?=
OPT       ?= -O2

comma     := ,
VARIANT   := $(if $(SANITIZE),$(subst $(comma),-,$(SANITIZE)),default)$(if $(COVERAGE),-cov,)
B         := build/$(VARIANT)

CPPFLAGS  += -Iinclude -iquote . -D_GNU_SOURCE -DFIU_ENABLE
CFLAGS    += -std=c11 $(OPT) -g -fPIC -pthread -fvisibility=hidden -Wall -Wextra -Werror \
             -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wno-format-truncation
LDLIBS    += -lfiu -ldl -lpthread -lm
# The nccl backend compiles against the CUDA toolkit's nccl.h when present;
# libnccl and the CUDA runtime are loaded with dlopen at run time.
CUDA_HOME ?= /usr/local/cuda
FAKE_NCCL_DIR := $(B)/fake_nccl
ifneq ($(wildcard $(CUDA_HOME)/include/nccl.h),)
CPPFLAGS  += -DDDP_HAVE_NCCL_H -isystem $(CUDA_HOME)/include
FAKE_NCCL := $(FAKE_NCCL_DIR)/libcudart.so.13 $(FAKE_NCCL_DIR)/libnccl.so.2
endif
ifneq ($(SANITIZE),)
CFLAGS    += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
LDFLAGS   += -fsanitize=$(SANITIZE)
endif
ifneq ($(COVERAGE),)
# -pthread at compile time gives atomic counters (toolchain-pitfalls.md).
CFLAGS    += --coverage -O0 -fprofile-update=atomic
LDFLAGS   += --coverage
endif

LIB_SRC   := $(sort $(wildcard core/*.c backends/*.c plugins/*.c \
                                accelerators/*.c sim/*.c harness/*.c))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_SRC  := $(sort $(wildcard tests/*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(B)/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(B)/%.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(B)/%.o)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(B)/bench/%)

STATIC    := $(B)/libddpsim.a
SHARED    := $(B)/libddpsim.so.$(VERSION)
DDPSIM    := $(B)/ddpsim
TESTBIN   := $(B)/ddpsim-test
DEPS_OK   := build/.deps-ok
TEST_PLUGIN_DIR := $(B)/test_plugins
TEST_PLUGINS := $(TEST_PLUGIN_DIR)/libddptest.so $(TEST_PLUGIN_DIR)/libddptest-nosym.so \
                $(TEST_PLUGIN_DIR)/libddptest-abi.so $(TEST_PLUGIN_DIR)/libddptest-clash.so \
                $(TEST_PLUGIN_DIR)/libddptest-leak.so $(TEST_PLUGIN_DIR)/libddptest-deep.so
# `ddpsim check`'s own plugins (tests/check_plugins/kvx_plugin.c): a correct
# one, and one realistic bug each (libkvx-uaf.so is built with ASan).
KVX_VARIANTS := nodeadline:KVX_NO_DEADLINE:kvx_nodl timeout:KVX_WRONG_TIMEOUT:kvx_tmo \
                ignore:KVX_IGNORE_ERROR:kvx_ign nobarrier:KVX_NO_BARRIER:kvx_nobar \
                uaf:KVX_UAF:kvx_uaf rank:KVX_WRONG_RANK:kvx_rank race:KVX_RACE:kvx_race
CHECK_PLUGINS := $(TEST_PLUGIN_DIR)/libkvx.so \
                 $(foreach v,$(KVX_VARIANTS),$(TEST_PLUGIN_DIR)/libkvx-$(word 1,$(subst :, ,$(v))).so)
kvx_flags = $(foreach v,$(KVX_VARIANTS),$(if $(filter libkvx-$(word 1,$(subst :, ,$(v))).so,$(1)),\
              -D$(word 2,$(subst :, ,$(v))) -DKVX_NAME='"$(word 3,$(subst :, ,$(v)))"'))\
            $(if $(filter libkvx-uaf.so,$(1)),$(if $(SANITIZE),,-fsanitize=address))

.PHONY: all lib run test check-layers check-exports check-functions bench install deps clean hw-test real-scenarios \
        netns-scenarios netns-clean real-test fidelity torch-test torch-scenarios fuzz mutate fault-points-doc \
        check-fault-points-doc check-docs differential differential-launchers
all: $(STATIC) $(SHARED) $(DDPSIM) $(TESTBIN) $(BENCH_BIN) ddpsim $(FAKE_NCCL) $(TEST_PLUGINS) \
     $(CHECK_PLUGINS)

lib: $(STATIC) $(SHARED)

# Dependencies: checked once per clone (the stamp), installed when missing.
$(DEPS_OK): scripts/deps.sh
	@sh scripts/deps.sh
	@mkdir -p build && touch $@
deps:
	sh scripts/deps.sh

$(B)/%.o: %.c $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libddpsim.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS)

# -rdynamic: the public API (DDP_API; everything else is hidden) is
# exported from the command, so that a plugin library it loads
# (ddp_plugin_load) calls this very copy of it.
$(DDPSIM): $(TOOL_OBJ) $(STATIC)
	$(CC) $(LDFLAGS) -rdynamic -o $@ $(TOOL_OBJ) $(STATIC) $(LDLIBS)

# ./ddpsim at the top always points at the default build's command.
ddpsim: $(DDPSIM)
	@if [ "$(VARIANT)" = default ]; then ln -sf $(DDPSIM) ddpsim; fi

# The test binary has the commands too (every tools/ object but main), so
# that a test can run one in-process, with a plugin only the tests have.
CMD_OBJ   := $(filter-out $(B)/tools/ddpsim.o,$(TOOL_OBJ))
$(TESTBIN): $(TEST_OBJ) $(CMD_OBJ) $(STATIC)
	$(CC) $(LDFLAGS) -rdynamic -o $@ $(TEST_OBJ) $(CMD_OBJ) $(STATIC) $(LDLIBS) -lcunit

$(B)/bench/%: bench/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(STATIC) $(LDFLAGS) $(LDLIBS)

# The differential check (docs/fidelity.md): ddpsim's address parser vs
# this host's libc, its endpoint, host and GLOO_SOCKET_IFNAME readings vs
# torch 1.13, on DIFF_COUNT generated inputs a family.
DIFF_COUNT ?= 10000
DIFF_BIN  := $(B)/tests/differential/addr
DIFF_OBJ  := $(B)/tests/addr_gen.o $(B)/tests/torch_gen.o
$(DIFF_BIN): tests/differential/addr.c $(DIFF_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(DIFF_OBJ) $(STATIC) $(LDFLAGS) $(LDLIBS)
# The store family: ddpsim's store server vs torch 1.13's TCPStore server.
DIFF_STORE_BIN := $(B)/tests/differential/store
DIFF_STORE_PORT ?= 0
$(DIFF_STORE_BIN): tests/differential/store.c $(B)/tests/store_diff.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/tests/store_diff.o $(STATIC) $(LDFLAGS) $(LDLIBS)
# The NCCL family: the simulated NCCL's interface choice vs libnccl.so.2's.
DIFF_NCCL_BIN := $(B)/tests/differential/nccl
$(DIFF_NCCL_BIN): tests/differential/nccl.c $(B)/tests/nccl_diff.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/tests/nccl_diff.o $(STATIC) $(LDFLAGS) $(LDLIBS)
# The launch contracts: torchrun (torch's own code, and real torchrun),
# mpirun and srun against ddpsim's launchers (every input a real launch:
# tests/differential/launchers.sh runs the two side by side).
EXT_DIFF_COUNT ?= $(DIFF_COUNT)
LAUNCH_REAL_COUNT ?= 40
LAUNCH_DIFF_BIN := $(B)/tests/differential/launch
$(LAUNCH_DIFF_BIN): tests/differential/launch.c $(B)/tests/launch_diff.o $(CMD_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/tests/launch_diff.o $(CMD_OBJ) $(STATIC) $(LDFLAGS) $(LDLIBS)
EXT_DIFF_BIN := $(B)/tests/differential/extlaunch
$(EXT_DIFF_BIN): tests/differential/extlaunch.c $(B)/tests/extlaunch_diff.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/tests/extlaunch_diff.o $(STATIC) $(LDFLAGS) $(LDLIBS)
# DIFF_NO_LAUNCHERS=1 leaves out mpirun and srun (.ci/run runs them on
# their own, make differential-launchers, beside the fuzzers).
differential: $(DIFF_BIN) $(DIFF_STORE_BIN) $(DIFF_NCCL_BIN) $(LAUNCH_DIFF_BIN) $(EXT_DIFF_BIN)
	$(DIFF_BIN) $(DIFF_COUNT)
	$(DIFF_STORE_BIN) $(DIFF_COUNT) 41 $(DIFF_STORE_PORT)
	$(DIFF_NCCL_BIN) $(DIFF_COUNT)
	sh tests/differential/launch.sh $(LAUNCH_DIFF_BIN) $(DIFF_COUNT) 41 $(LAUNCH_REAL_COUNT)
	$(if $(DIFF_NO_LAUNCHERS),,sh tests/differential/launchers.sh $(EXT_DIFF_BIN) $(EXT_DIFF_COUNT) 41)
differential-launchers: $(EXT_DIFF_BIN)
	sh tests/differential/launchers.sh $(EXT_DIFF_BIN) $(EXT_DIFF_COUNT) 41

# docs/fault-points.md is generated from include/ddp/faults.h and the page's
# template; `make test` fails when the committed page is out of date.
FPDOC := $(B)/fault-points-doc
$(FPDOC): scripts/fault-points-doc.c $(STATIC)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(STATIC) $(LDFLAGS) $(LDLIBS)
fault-points-doc: $(FPDOC)
	$(FPDOC) docs/fault-points.md.in > docs/fault-points.md
check-fault-points-doc: $(FPDOC)
	@$(CHECK_RUN) check-fault-points-doc sh -c '$(FPDOC) docs/fault-points.md.in | \
	    cmp -s - docs/fault-points.md || { \
	    echo "docs/fault-points.md does not match include/ddp/faults.h and" \
	         "docs/fault-points.md.in: run make fault-points-doc"; exit 1; }'

# A FAKE libnccl.so.2 / libcudart.so.13 pair (tests/fake_nccl/fake.h) for
# the nccl backend's tests without a GPU (tests/test_behave_nccl.c runs them
# in child processes whose LD_LIBRARY_PATH starts with $(B)/fake_nccl).
# Built against nccl.h, so only where the backend is; never installed.
$(FAKE_NCCL_DIR)/libcudart.so.13: tests/fake_nccl/fake_cudart.c tests/fake_nccl/fake.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=default -shared -Wl,-soname,libcudart.so.13 $(LDFLAGS) -o $@ $<
$(FAKE_NCCL_DIR)/libnccl.so.2: tests/fake_nccl/fake_nccl.c tests/fake_nccl/fake.h \
                               $(FAKE_NCCL_DIR)/libcudart.so.13
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=default -shared -Wl,-soname,libnccl.so.2 $(LDFLAGS) -o $@ $< \
	    -L$(FAKE_NCCL_DIR) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN' -lpthread

# The plugin libraries of the loader's tests (tests/test_plugin_lib.c):
# one source, a variant per -D; built as a user builds a plugin (no
# -lddpsim: the program that loads one provides the API).
$(TEST_PLUGINS): $(TEST_PLUGIN_DIR)/%.so: tests/plugin_lib/ddptest_plugin.c include/ddp/plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared $(LDFLAGS) \
	    $(if $(findstring -nosym,$@),-DDDPTEST_NOSYM)$(if $(findstring -abi,$@),-DDDPTEST_ABI)$(if $(findstring -clash,$@),-DDDPTEST_CLASH)$(if $(findstring -leak,$@),-DDDPTEST_LEAK)$(if $(findstring -deep,$@),-DDDPTEST_DEEP) \
	    -o $@ $<

$(CHECK_PLUGINS): $(TEST_PLUGIN_DIR)/%.so: tests/check_plugins/kvx_plugin.c include/ddp/plugin.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared $(LDFLAGS) $(call kvx_flags,$(notdir $@)) -o $@ $<

# TESTS="suite ..." runs only those suites; JUNIT=F.xml writes JUnit XML:
# the CUnit suites into F.xml, the other checks (layers, exports, the fault
# points page, the example, the mutants selftest) with their times into
# F-checks.xml (tests/check-junit.sh). The end prints each suite's and
# each check's wall time and the ten slowest tests.
# `make test` and `make run` leave ./ddpsim in place, as a plain `make` does.
JUNIT_CHECKS   = $(if $(JUNIT),$(basename $(JUNIT))-checks.xml)
JUNIT_CHECKS_D = $(B)/junit-checks.d
CHECK_RUN      = CHECK_JUNIT_FILE=$(JUNIT_CHECKS) sh tests/check-junit.sh run $(JUNIT_CHECKS_D)
test: $(TESTBIN) $(DDPSIM) ddpsim check-layers check-exports check-fault-points-doc check-docs \
      check-functions $(FAKE_NCCL) \
      $(TEST_PLUGINS) $(CHECK_PLUGINS) $(B)/bench/store_rdzv
	DDPSIM=$(abspath $(DDPSIM)) DDP_FAKE_NCCL_DIR=$(abspath $(FAKE_NCCL_DIR)) \
	    DDP_TEST_PLUGIN_DIR=$(abspath $(TEST_PLUGIN_DIR)) \
	    $(TESTBIN) $(if $(JUNIT),--junit $(JUNIT)) --times $(B)/test-times.txt $(TESTS)
	@$(if $(TESTS),,$(if $(SANITIZE),,$(CHECK_RUN) example-test sh tests/example-test.sh && \
	    $(CHECK_RUN) mutants-selftest sh tests/mutants/selftest.sh))
	@$(if $(TESTS),,DDPSIM=$(abspath $(DDPSIM)) $(CHECK_RUN) report-check sh tests/report/check.sh)
	@$(if $(TESTS),,$(CHECK_RUN) torch-python-test sh tests/torch-python-test.sh)
	@$(if $(TESTS),,DDPSIM=$(abspath $(DDPSIM)) $(CHECK_RUN) store-rdzv-check \
	    sh tests/store-rdzv-check.sh $(B)/bench/store_rdzv)
	@cat $(B)/test-times.txt
	@sh tests/check-junit.sh summary $(JUNIT_CHECKS_D) $(JUNIT_CHECKS)

# Every count docs/ and README.md state carries the command that yields
# it, and holds (tests/docs-check.sh; a self-test plants a wrong one).
DOCS_CHECK_ENV = DDPSIM_TEST=$(abspath $(TESTBIN)) DDPSIM=$(abspath $(DDPSIM)) \
                 DDPSIM_LIB=$(abspath $(SHARED))
check-docs: $(TESTBIN) $(DDPSIM) $(SHARED)
	@$(DOCS_CHECK_ENV) $(CHECK_RUN) check-docs sh tests/docs-check.sh
	@$(DOCS_CHECK_ENV) $(CHECK_RUN) check-docs-selftest sh tests/docs-check.sh --selftest
	@$(DOCS_CHECK_ENV) $(CHECK_RUN) check-kinds-doc sh tests/kinds-doc-check.sh
	@$(DOCS_CHECK_ENV) $(CHECK_RUN) check-kinds-doc-selftest sh tests/kinds-doc-check.sh --selftest

# At most 6 functions over 100 lines and none over 150, in every .c file
# (scripts/long-functions.sh lists them; docs/testing.md).
check-functions:
	@$(CHECK_RUN) check-functions sh scripts/long-functions.sh --check

# libddpsim.so exports exactly the public headers' DDP_API functions
# (-fvisibility=hidden; include/ddp/export.h).
check-exports: $(SHARED)
	@$(CHECK_RUN) check-exports sh tests/exports-check.sh $(SHARED)

# The dependency direction of docs/architecture.md, on includes and calls
# (and a self-test that a planted violation is caught).
check-layers: $(LIB_OBJ) $(TOOL_OBJ)
	@$(CHECK_RUN) check-layers sh scripts/check-layers.sh $(B)
	@$(CHECK_RUN) check-layers-selftest sh tests/layers/selftest.sh $(B)

# The main job: every bundled scenario x every accelerator in the simulator.
run: $(DDPSIM) ddpsim
	$(DDPSIM) run scenarios/*.scn --accelerator all $(if $(JUNIT),--junit $(JUNIT))

# The mutation check (docs/testing.md): every mutant of tests/mutants/, each
# in a scratch copy under build/mutate/ (never this tree), through the
# layers unit suites -> the rest of make test -> make run -> the parity
# gate; prints mutant | layer that killed it | seconds and "N killed, M
# survived", fails on an undeclared survivor. MUTATE_FLAGS: e.g. -j1,
# --rotate 3, --check (do the mutants still apply), or mutant names.
MUTATE_FLAGS ?=
mutate: $(DEPS_OK)
	@MAKE="$(MAKE)" MUTATE_FAKE_NCCL="$(FAKE_NCCL)" sh scripts/mutate.sh $(MUTATE_FLAGS)

bench: $(BENCH_BIN) $(DDPSIM)
	@sh scripts/deps.sh --bench
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done
	@if [ -f bench/store.sh ]; then B=$(B) sh bench/store.sh; fi
	@DDPSIM=$(DDPSIM) sh bench/sweep.sh
	@DDPSIM=$(DDPSIM) sh bench/sim_128k.sh
	@B=$(B) sh bench/floor.sh
	@B=$(B) DDPSIM=$(DDPSIM) sh bench/store_rdzv.sh
	@B=$(B) DDPSIM=$(DDPSIM) sh bench/hosted_store.sh
	@DDPSIM=$(DDPSIM) sh bench/warm_start.sh

# Real runs (docs/real-runs.md): the scenarios tagged `real` as real
# processes on loopback, those tagged `netns` on one network namespace per
# node (root), the SLURM / mpirun / ddpsim launch tests, and the
# simulator-vs-real table docs/fidelity.md.
real-scenarios: $(DDPSIM)
	@sh scripts/deps.sh --real
	$(DDPSIM) run --real --tag real scenarios/*.scn $(if $(JUNIT),--junit $(JUNIT))
# ddpsim fails a run whose namespaces it could not delete. Any ddps*
# namespace here afterwards (a killed run's, or one running beside this
# one) is listed: `make netns-clean` removes them.
NETNS_LIST = ip netns list 2>/dev/null | awk '/^ddps/ {print $$1}' | sort
netns-scenarios: $(DDPSIM)
	@sh scripts/deps.sh --real
	$(DDPSIM) run --netns --tag netns scenarios/*.scn $(if $(JUNIT),--junit $(JUNIT))
	@if [ -n "$$($(NETNS_LIST))" ]; then echo "note: ddps* network namespaces not made by" \
	    "this run (make netns-clean removes them):"; $(NETNS_LIST); fi
netns-clean:
	@for n in $$($(NETNS_LIST)); do echo "ip netns del $$n"; ip netns del $$n; done
	@for l in $$(ip -o link show type bridge 2>/dev/null | awk -F': ' '$$2 ~ /^ddps/ {print $$2}'); do \
	    echo "ip link del $$l"; ip link del $$l; done
	@for d in /etc/netns/ddps*; do [ -d "$$d" ] && echo "rm -r $$d" && rm -r "$$d"; done; true
	@rm -f /run/ddpsim-netns/*
real-test: $(DDPSIM)
	@sh scripts/deps.sh --real
	sh tests/real/run-all.sh
fidelity: $(DDPSIM)
	@sh scripts/deps.sh --real
	DDPSIM=$(DDPSIM) sh scripts/fidelity.sh

# Real PyTorch (torch.distributed, gloo) against ddpsim's store, in both
# directions (tests/torch/); without a Python that imports torch it prints
# one line and succeeds. Never part of `make test`.
torch-test: $(DDPSIM)
	@sh scripts/deps.sh --torch
	DDPSIM=$(DDPSIM) sh tests/torch/run.sh
	DDPSIM=$(abspath $(DDPSIM)) sh tests/check_jobs/run.sh
# The scenarios tagged torch with a real PyTorch job as every rank
# (examples/torch_ddp.py, docs/real-runs.md): as root in network namespaces,
# where all of their faults can be realised, else on loopback (the others
# are skipped with the reason). One line and success without torch.
torch-scenarios: $(DDPSIM)
	@sh scripts/deps.sh --torch
	@if ! scripts/torch-python -c 'import torch' >/dev/null 2>&1; then \
	    echo "torch-scenarios: skipped: no Python here imports torch (sh scripts/deps.sh --torch)"; \
	elif [ "$$(id -u)" -eq 0 ]; then \
	    $(DDPSIM) run --netns --tag torch scenarios/*.scn --no-progress $(if $(JUNIT),--junit $(JUNIT)); \
	else \
	    $(DDPSIM) run --real --tag torch scenarios/*.scn --no-progress $(if $(JUNIT),--junit $(JUNIT)); \
	fi
# libFuzzer harnesses (tests/fuzz/, docs/fuzzing.md): the store server over
# a fake sys, hostlists, launch plans, the scenario parser and writer, built with clang +
# ASan/UBSan into build/fuzz/ and run FUZZ_SECONDS each from their seed
# corpora; a crash fails and names its reproducer.
FUZZ_SECONDS ?= 10
FUZZ_CC   ?= clang
FB        := build/fuzz
FUZZ_FLAGS := -std=c11 -O1 -g -fPIC -pthread -Wall -Wextra -Werror -Wshadow \
              -Wstrict-prototypes -Wmissing-prototypes -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FB)/%.o)
FUZZ_BIN  := $(patsubst tests/fuzz/%.c,$(FB)/%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))

$(FB)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FB)/libddpsim.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FB)/fuzz_%: tests/fuzz/fuzz_%.c $(FB)/tests/fuzz/fake_sys.o $(FB)/libddpsim.a
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
.SECONDARY: $(FB)/tests/fuzz/fake_sys.o
fuzz:
	@sh scripts/deps.sh --fuzz
	$(MAKE) --no-print-directory $(FUZZ_BIN)
	sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

# NCCL on real GPUs; prints "no GPU: skipped" and succeeds without one.
hw-test: all $(BENCH_BIN)
	B=$(B) sh scripts/hw-test.sh

# The manual page, from docs/ddpsim.1.md with go-md2man (scripts/deps.sh).
MANPAGE   := $(B)/ddpsim.1
$(MANPAGE): docs/ddpsim.1.md $(DEPS_OK)
	@mkdir -p $(dir $@)
	go-md2man -in docs/ddpsim.1.md -out $@

install: $(STATIC) $(SHARED) $(DDPSIM) $(MANPAGE)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/ddp \
	    $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(MANPAGE) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libddpsim.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libddpsim.so.0
	ln -sf libddpsim.so.0 $(DESTDIR)$(PREFIX)/lib/libddpsim.so
	install -m 644 include/ddp/*.h $(DESTDIR)$(PREFIX)/include/ddp/
	install -m 755 $(DDPSIM) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    ddpsim.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ddpsim.pc

clean:
	rm -rf build ddpsim

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(FUZZ_LIB_OBJ:.o=.d)
-include coverage/coverage.mk
