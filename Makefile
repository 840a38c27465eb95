# coordl - build, test, demo.
#   make            library (build/libcoordl.a) and examples
#   make test       unit tests (cmocka) and the examples' own checks
#   make test-sanitize   the same tests under AddressSanitizer + UBSan
#   make test-tsan  the concurrency tests under ThreadSanitizer (clang)
#   make demo       generate a small dataset and train on it for 2 epochs
#   make bench      image-prep benchmark side by side with torchvision
#   make MPI=1 test   also the partitioned cache over MPI (mpicc, mpirun)
#   make install [PREFIX=/usr/local] [DESTDIR=]   header, libraries, pkg-config,
#                   CMake package, coordl-analyze, coordl-index; make uninstall reverses it
#   make test-packaging   install/uninstall checked, README's build commands run
#   make fuzz [FUZZ_SECONDS=30]   every libFuzzer target in tests/fuzz (clang,
#                   ASan + UBSan) for FUZZ_SECONDS each; make test replays their
#                   seed corpus and tests/fuzz/regress/ without libFuzzer
#   make test-switches    the vendoring switches (COORDL_NO_*), each and all together
#   make amalgamation     regenerate coordl.c from the modules in src/ (never
#                   edit coordl.c by hand); make check-source checks it is
#                   current, that no layer calls up, and that every module
#                   compiles on its own (make test runs it first)
MPI     ?= 0
ifeq ($(MPI),1)
CC      := mpicc
BUILD   ?= build-mpi
CPPFLAGS += -DCOORDL_MPI
endif
CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN    := -Wall -Wextra -Wpedantic -Wshadow
CPPFLAGS += -D_GNU_SOURCE
STD     := -std=c11
BUILD   ?= build
HWLOC_LIB ?= -lhwloc
# libcurl for the remote sources (docs/remote.md); COORDL_NO_REMOTE leaves
# them and the library out
CURL_LIB ?= $(if $(findstring COORDL_NO_REMOTE,$(EXTRA_CFLAGS) $(CPPFLAGS)),,-lcurl)
# liburing for the read-ahead's local reads in flight (docs/storage.md);
# COORDL_NO_URING leaves it out (the read-ahead then uses I/O threads)
URING_LIB ?= $(if $(findstring COORDL_NO_URING,$(EXTRA_CFLAGS) $(CPPFLAGS)),,-luring)
LIBS    := -ljpeg $(HWLOC_LIB) $(CURL_LIB) $(URING_LIB) -lpthread -lm
TESTLIBS := -lcmocka
OMPFLAG := -fopenmp

ALL_CFLAGS = $(STD) $(WARN) $(CFLAGS) $(CPPFLAGS) $(EXTRA_CFLAGS)

TEST_SRCS := $(filter-out tests/test_util.c,$(sort $(wildcard tests/test_*.c)))
TESTS     := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
EXAMPLES  := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

.PHONY: all lib examples tools analyze-check test run-tests test-sanitize test-tsan run-tsan demo bench clean deps deps-demo check-darknet-patch check-ggml-example
all: lib examples tools
lib: $(BUILD)/libcoordl.a $(BUILD)/libcoordl.so
examples: $(EXAMPLES)

# One object for both libraries: position-independent, and only the
# COORDL_API functions visible outside the shared library.
VERSION := $(shell sed -n 's/^\#define COORDL_VERSION "\(.*\)"/\1/p' coordl.h)
SONAME  := libcoordl.so.$(firstword $(subst ., ,$(VERSION)))
LIB_CFLAGS := -fPIC -fvisibility=hidden
$(BUILD)/coordl.o: coordl.c coordl.h Makefile
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c coordl.c -o $@
$(BUILD)/libcoordl.a: $(BUILD)/coordl.o
	$(AR) rcs $@ $^
# libcoordl.so.X.Y.Z with soname libcoordl.so.X, and the two links to it.
# --no-undefined proves LIBS is complete (not with sanitizers: their
# runtime comes from the executable).
$(BUILD)/libcoordl.so.$(VERSION): $(BUILD)/coordl.o
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,$(SONAME) $(if $(findstring sanitize,$(ALL_CFLAGS)),,-Wl,--no-undefined) $^ $(LIBS) -o $@
$(BUILD)/libcoordl.so: $(BUILD)/libcoordl.so.$(VERSION)
	ln -sf libcoordl.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@
TOOLS := $(patsubst tools/%.c,$(BUILD)/%,$(wildcard tools/*.c))
tools: $(TOOLS)
$(BUILD)/coordl-analyze: tools/coordl-analyze.c $(BUILD)/libcoordl.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. $< $(BUILD)/libcoordl.a $(LIBS) -o $@
$(BUILD)/coordl-index: tools/coordl-index.c $(BUILD)/libcoordl.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. $< $(BUILD)/libcoordl.a $(LIBS) -o $@

# DS-Analyzer's what-if model against measurements it did not fit on
# (a benchmark-style check, not part of make test).
analyze-check: deps
	$(MAKE) tools examples
	@test -d $(DEMO_DIR) || $(BUILD)/examples/gen_dataset --out $(DEMO_DIR) --classes 10 --per-class 200 --seed 1
	$(BUILD)/coordl-analyze --data $(DEMO_DIR) --out $(BUILD)/analyze --validate --check 0.15

$(BUILD)/tests/test_util.o: tests/test_util.c tests/test_util.h tests/tu_tar.h coordl.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. -c $< -o $@
$(BUILD)/tests/%: tests/%.c tests/test_util.h $(wildcard tests/tu_*.h) $(BUILD)/tests/test_util.o $(BUILD)/libcoordl.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. $< $(BUILD)/tests/test_util.o $(BUILD)/libcoordl.a $(TESTLIBS) $(LIBS) -o $@

$(BUILD)/examples/gen_dataset: examples/gen_dataset.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< $(LIBS) -o $@
$(BUILD)/examples/%: examples/%.c $(BUILD)/libcoordl.a $(wildcard examples/darknet/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(OMPFLAG) -I. -Iexamples $< $(BUILD)/libcoordl.a $(LIBS) -o $@

$(BUILD)/examples/train_demo: examples/train_demo.c $(BUILD)/libcoordl.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(OMPFLAG) -I. $< $(BUILD)/libcoordl.a $(LIBS) -o $@

# Installs missing Debian packages (as root) once per build folder: deps
# what building and testing need (clang, cmake, MPI, cmocka, ...),
# deps-demo only what make demo needs (compiler, libjpeg, stb, hwloc).
deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: tools/install-deps.sh
	@mkdir -p $(@D)
	bash tools/install-deps.sh
	@touch $@
deps-demo: $(BUILD)/.deps-demo-ok
$(BUILD)/.deps-demo-ok: tools/install-deps.sh
	@mkdir -p $(@D)
	bash tools/install-deps.sh demo
	@touch $@

# The suite runs twice: with hwloc, and built with -DCOORDL_NO_HWLOC (the
# vendoring fallback: plain pthread affinity, no NUMA placement) and
# -DCOORDL_DEBUG (the stream's invariants asserted after every transition).
# CMakeLists.txt registers the same suite with ctest (tests/test_*.c, the
# EXAMPLE_CHECKS below, tests/abi, tests/mpi): a new kind of step here needs
# its add_test there.
# SECOND_PASS=0 skips the second (no-hwloc, COORDL_DEBUG) pass: CI runs it
# once, in the plain build, and not again for the MPI build.
SECOND_PASS ?= 1
test: deps check-source
	bash tests/packaging/deps.sh
	$(MAKE) run-tests
	@if [ "$(SECOND_PASS)" = 1 ]; then \
	  $(MAKE) BUILD=$(BUILD)-nohwloc EXTRA_CFLAGS="$(EXTRA_CFLAGS) -DCOORDL_NO_HWLOC -DCOORDL_DEBUG" HWLOC_LIB= run-tests; \
	else echo "make test: the no-hwloc, COORDL_DEBUG pass skipped (SECOND_PASS=0)"; fi
	$(MAKE) test-abi

# coordl.c is the amalgamation of src/ (tools/amalgamate.py, in the layer
# order of src/modules.txt). check-source: it matches src/, no lower layer
# uses a name of a higher one (tools/check-layers.py), and every module
# compiles on its own, warning-free.
.PHONY: amalgamation check-source
amalgamation:
	python3 tools/amalgamate.py
check-source:
	python3 tools/amalgamate.py --check
	python3 tools/check-layers.py
	@for f in src/*.c; do $(CC) -std=gnu11 -fsyntax-only $(CPPFLAGS) $(WARN) -Werror -I. -Isrc $$f || exit 1; done; \
	echo "check-source: every module in src/ compiles on its own"

# A client built against the 0.3.0 header (and one against a header from
# the future) runs against today's library, static and shared, with every
# struct in a guarded block: see tests/abi/run.sh.
.PHONY: test-abi
test-abi: lib examples
	CC="$(CC)" CFLAGS="$(ALL_CFLAGS)" LIBS="$(LIBS)" BUILD="$(BUILD)" bash tests/abi/run.sh

# The examples' own checks: each runs small and exits non-zero when its
# check fails (loss did not go down, a size check failed, ...).
EXAMPLE_CHECKS := $(filter llm_tokens ggml_loop darknet_train sealed_reader detect_demo,$(patsubst examples/%.c,%,$(wildcard examples/*.c)))
# OpenMPI refuses root unless told; CI runs as root. Each mpirun is
# bounded: a hang fails the suite instead of stalling it (the tests also
# carry their own watchdogs, which name the step that hung).
MPIRUN := timeout -k 10 300 mpirun --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root,)
MPI_TESTS := $(if $(filter 1,$(MPI)),$(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi/%,$(wildcard tests/mpi/*.c)),)
# mpi_hooks counts the calls coordl.c makes to the C library's allocator,
# mpi_exchange fails some of them:
# --wrap redirects exactly those (shared libraries keep their own).
MPI_LDFLAGS_mpi_exchange := -Wl,--wrap=calloc
MPI_LDFLAGS_mpi_hooks := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=reallocarray \
	-Wl,--wrap=strdup,--wrap=strndup,--wrap=posix_memalign,--wrap=aligned_alloc
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(wildcard tests/mpi/*.h) $(BUILD)/libcoordl.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. $< $(BUILD)/libcoordl.a $(MPI_LDFLAGS_$*) $(LIBS) -o $@
# The peer-bookkeeping tests also run built with ASan + UBSan (an overflow
# of a per-slot array shows only there), once: not in the no-hwloc pass,
# nor when the whole suite is already sanitized.
MPI_SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
MPI_SAN_TESTS := $(if $(and $(filter 1,$(MPI)),$(HWLOC_LIB),$(if $(findstring sanitize,$(EXTRA_CFLAGS)),,1)),\
	$(BUILD)/tests/mpi-san/mpi_set $(BUILD)/tests/mpi-san/mpi_hooks,)
$(BUILD)/tests/mpi-san/coordl.o: coordl.c coordl.h
	@mkdir -p $(@D)
	$(CC) $(STD) $(WARN) $(MPI_SAN_FLAGS) $(CPPFLAGS) -c coordl.c -o $@
$(BUILD)/tests/mpi-san/%: tests/mpi/%.c $(wildcard tests/mpi/*.h) $(BUILD)/tests/mpi-san/coordl.o
	$(CC) $(STD) $(WARN) $(MPI_SAN_FLAGS) $(CPPFLAGS) -I. $< $(BUILD)/tests/mpi-san/coordl.o $(MPI_LDFLAGS_$*) $(LIBS) -o $@

run-tests: $(TESTS) examples tools $(MPI_TESTS) $(MPI_SAN_TESTS) fuzz-replay
	@fail=0; for t in $(TESTS); do echo "== $$t"; $$t || fail=1; done; \
	 for t in $(FUZZ_TARGETS); do echo "== fuzz replay $$t"; $(call FUZZ_REPLAY_RUN,$$t) || fail=1; done; \
	 for e in $(EXAMPLE_CHECKS); do echo "== example $$e --check"; \
	   $(BUILD)/examples/$$e --check --workdir $(BUILD)/example-$$e || fail=1; done; \
	 for t in $(MPI_TESTS); do for np in 2 4; do echo "== $(MPIRUN) -np $$np $$t"; \
	   $(MPIRUN) -np $$np $$t $(BUILD)/mpi-data || fail=1; done; done; \
	 for t in $(MPI_SAN_TESTS); do for np in 2 4; do echo "== (ASan+UBSan) $(MPIRUN) -np $$np $$t"; \
	   ASAN_OPTIONS=detect_leaks=0 $(MPIRUN) -x ASAN_OPTIONS -np $$np $$t $(BUILD)/mpi-data || fail=1; done; done; \
	 if [ $$fail -ne 0 ]; then echo "make test: FAILED"; exit 1; fi; echo "make test: all test binaries passed"

test-sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# ThreadSanitizer (clang) over the tests that drive the stream from several
# threads and processes: consumer, workers, member threads, queries from
# another thread, coordl_set/seek under load, coordinated groups.
TSAN_TESTS := test_api test_io_async test_set test_determinism test_lazy_index test_stream test_stream_internals test_group test_consumer_path test_readahead test_readahead_uring test_faults test_remote
test-tsan: deps
	$(MAKE) BUILD=build-tsan CC=clang OPT=-O1 EXTRA_CFLAGS="$(EXTRA_CFLAGS) -fsanitize=thread -fno-omit-frame-pointer" run-tsan
run-tsan: $(patsubst %,$(BUILD)/tests/%,$(TSAN_TESTS))
	@fail=0; for t in $^; do echo "== $$t (ThreadSanitizer)"; \
	   TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)" $$t || fail=1; done; \
	 if [ $$fail -ne 0 ]; then echo "make test-tsan: FAILED"; exit 1; fi; echo "make test-tsan: all passed"

DEMO_DIR ?= $(BUILD)/demo-data
demo: deps-demo
	$(MAKE) examples
	@test -d $(DEMO_DIR) || $(BUILD)/examples/gen_dataset --out $(DEMO_DIR) --classes 10 --per-class 200 --seed 1
	$(BUILD)/examples/train_demo --data $(DEMO_DIR) --epochs 2 --cache-fraction 0.5

bench: deps
	$(MAKE) lib
	bash bench/run.sh

# ---- install ------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=/staging/root]: coordl.h,
# libcoordl.a, libcoordl.so.X.Y.Z (+ .so.X, .so links), pkg-config coordl,
# the CMake package coordl (target coordl::coordl) and coordl-analyze.
# make uninstall removes exactly those files. Built from $(BUILD), so
# `make MPI=1 install` installs the MPI build (and says so in Libs.private).
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR   ?= $(LIBDIR)/cmake/coordl
INSTALL    ?= install
LIBS_PRIVATE = $(strip $(LIBS) $(if $(filter 1,$(MPI)),$(shell $(CC) --showme:link)))
empty :=
space := $(empty) $(empty)
CMAKE_PRIVATE_LIBS = $(subst $(space),;,$(strip $(patsubst -l%,%,$(filter-out -lpthread,$(LIBS))) Threads::Threads $(if $(filter 1,$(MPI)),MPI::MPI_C)))
PKG_SUBST = -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
  -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVERSION@|$(firstword $(subst ., ,$(VERSION)))|g' \
  -e 's|@LIBS_PRIVATE@|$(LIBS_PRIVATE)|g' -e 's|@CMAKE_PRIVATE_LIBS@|$(CMAKE_PRIVATE_LIBS)|g' \
  -e 's|@COORDL_MPI_DEP@|$(if $(filter 1,$(MPI)),ON,OFF)|g' \
  -e 's|@SIZEOF_VOID_P@|$(if $(filter 64,$(shell getconf LONG_BIT)),8,4)|g' \
  -e "s|@REL_LIBDIR@|$$(realpath -m --relative-to=$(CMAKEDIR) $(LIBDIR))|g" \
  -e "s|@REL_INCLUDEDIR@|$$(realpath -m --relative-to=$(CMAKEDIR) $(INCLUDEDIR))|g"
PKG_SUBST_NAMES = (@PREFIX@ @VERSION@ @LIBS_PRIVATE@ ...)
INSTALLED = $(INCLUDEDIR)/coordl.h $(LIBDIR)/libcoordl.a $(LIBDIR)/libcoordl.so.$(VERSION) \
  $(LIBDIR)/$(SONAME) $(LIBDIR)/libcoordl.so $(PKGCONFIGDIR)/coordl.pc \
  $(CMAKEDIR)/coordlConfig.cmake $(CMAKEDIR)/coordlConfigVersion.cmake $(BINDIR)/coordl-analyze \
  $(BINDIR)/coordl-index

.PHONY: install uninstall
install: lib $(BUILD)/coordl-analyze $(BUILD)/coordl-index
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 644 coordl.h $(DESTDIR)$(INCLUDEDIR)/coordl.h
	$(INSTALL) -m 644 $(BUILD)/libcoordl.a $(DESTDIR)$(LIBDIR)/libcoordl.a
	$(INSTALL) -m 755 $(BUILD)/libcoordl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libcoordl.so.$(VERSION)
	ln -sf libcoordl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcoordl.so
	@echo "sed $(PKG_SUBST_NAMES) pkg/coordl.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/coordl.pc"; sed $(PKG_SUBST) pkg/coordl.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/coordl.pc
	@echo "sed $(PKG_SUBST_NAMES) pkg/coordlConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/coordlConfig.cmake"; sed $(PKG_SUBST) pkg/coordlConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/coordlConfig.cmake
	@echo "sed $(PKG_SUBST_NAMES) pkg/coordlConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/coordlConfigVersion.cmake"; sed $(PKG_SUBST) pkg/coordlConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/coordlConfigVersion.cmake
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/coordl.pc $(DESTDIR)$(CMAKEDIR)/coordlConfig*.cmake
	$(INSTALL) -m 755 $(BUILD)/coordl-analyze $(DESTDIR)$(BINDIR)/coordl-analyze
	$(INSTALL) -m 755 $(BUILD)/coordl-index $(DESTDIR)$(BINDIR)/coordl-index
	@# a system install is found by the dynamic loader only after ldconfig
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null

# The vendoring switches, each alone and all together (and once with
# clang), with the tests that do not need what they remove; and coordl.c
# compiled with only the C library's and libjpeg's headers present.
.PHONY: test-switches
test-switches: deps
	bash tests/packaging/switches.sh

# coordl.h as C99/C11/C++ under gcc and clang, make install/uninstall
# checked file by file, and README's "Build" commands run exactly as printed (an outside program built and run each
# way). CI runs it; it builds coordl several times, so it is not in make test.
.PHONY: test-packaging
test-packaging: deps lib tools
	BUILD="$(BUILD)" LIBS="$(LIBS)" bash tests/packaging/header.sh
	bash tests/packaging/install.sh
	bash tests/packaging/recipes.sh run all

# examples/darknet/train_classifier.patch applied to Darknet's tree and built
# with its stock Makefile, then a short training run (DARKNET_SRC: a checkout
# or bare git dir; skipped, saying so, when there is none)
check-darknet-patch:
	bash tools/check-darknet-patch.sh

# examples/ggml/mnist_coordl.c built against the real ggml (cmake under
# /tmp) and run: 1-channel batches into ggml-opt (GGML_SRC: a checkout or
# bare git dir; skipped, saying so, when there is none)
check-ggml-example:
	bash tools/check-ggml-example.sh

# ---- fuzzing (tests/fuzz) ------------------------------------------------
# One libFuzzer harness per parser; each #includes coordl.c to reach its
# static functions. Their seed corpus is generated at build time by
# gen_seeds (no blobs). make test builds every harness with $(CC) against
# tests/fuzz/replay.c (no libFuzzer, so gcc and sanitizer builds replay
# too) and runs the seeds and every file under tests/fuzz/regress/<target>/
# (crash inputs found by fuzzing, kept). make fuzz builds them with clang's
# libFuzzer + ASan + UBSan into $(FUZZ_BUILD) and runs each for
# FUZZ_SECONDS on a corpus kept in $(FUZZ_BUILD)/corpus/<target>; a crash
# fails it and leaves the input in $(FUZZ_BUILD)/crashes/<target>/ (copy it
# to tests/fuzz/regress/<target>/ once fixed). FUZZ_ARGS adds libFuzzer
# options (e.g. FUZZ_ARGS=-runs=1000000).
FUZZ_TARGETS := $(sort $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_SECONDS ?= 30
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_FLAGS   ?= -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SEEDS    = $(BUILD)/fuzz-seeds
FUZZ_REPLAY_RUN = $(BUILD)/fuzz-replay/$(1) $(FUZZ_SEEDS)/$(1) $$(test -d tests/fuzz/regress/$(1) && echo tests/fuzz/regress/$(1)) \
  >$(BUILD)/fuzz-replay/$(1).log 2>&1 && tail -1 $(BUILD)/fuzz-replay/$(1).log \
  || { tail -40 $(BUILD)/fuzz-replay/$(1).log; false; }
.PHONY: fuzz fuzz-replay
fuzz-replay: $(patsubst %,$(BUILD)/fuzz-replay/%,$(FUZZ_TARGETS)) $(FUZZ_SEEDS)/.done
$(BUILD)/fuzz-replay/gen_seeds: tests/fuzz/gen_seeds.c tests/hostile.h tests/tu_tar.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -ljpeg -lm -o $@
$(BUILD)/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/tu_tar.h tests/fuzz/replay.c coordl.c coordl.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Wno-unused-function -I. $< tests/fuzz/replay.c $(LIBS) -o $@
$(FUZZ_SEEDS)/.done: $(BUILD)/fuzz-replay/gen_seeds
	rm -rf $(FUZZ_SEEDS) && $< $(FUZZ_SEEDS) && touch $@
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/tu_tar.h coordl.c coordl.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(STD) $(WARN) -Wno-unused-function $(FUZZ_FLAGS) $(CPPFLAGS) -DCOORDL_NO_HWLOC -I. $< -ljpeg $(CURL_LIB) $(URING_LIB) -lpthread -lm -o $@
fuzz: deps $(patsubst %,$(FUZZ_BUILD)/%,$(FUZZ_TARGETS)) $(FUZZ_SEEDS)/.done
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crashes/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t/ $(FUZZ_ARGS) $(FUZZ_BUILD)/corpus/$$t $(FUZZ_SEEDS)/$$t \
	    >$(FUZZ_BUILD)/$$t.log 2>&1 || { fail=1; tail -60 $(FUZZ_BUILD)/$$t.log; \
	    echo "fuzz $$t: FAILED; input in $(FUZZ_BUILD)/crashes/$$t/"; }; \
	  grep -E '^#[0-9]+' $(FUZZ_BUILD)/$$t.log | tail -1; \
	  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' $(FUZZ_BUILD)/$$t.log | tr '\n' ' '; echo; \
	done; if [ $$fail -ne 0 ]; then echo "make fuzz: FAILED"; exit 1; fi; echo "make fuzz: no crash in any target"

clean:
	rm -rf build build-san build-nohwloc build-san-nohwloc build-tsan build-fuzz
