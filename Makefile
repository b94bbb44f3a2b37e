# plait — build, test, demo.
#   make            library, the plait tool and the tests (build/)
#   make test       set-up (scripts/setup.sh), then every suite; ends "N passed, N failed"
#   make demo       set-up, then the main job on the King James Bible
#   make asan       the unit tests under AddressSanitizer + UBSan (build-asan/)
#   make fuzz       libFuzzer targets, long runs (FUZZ_SECONDS each)
#   make install    plait into $(DESTDIR)$(PREFIX)/bin (PREFIX=/usr/local); make uninstall
#   make chaos      kill -9, full disks, dead/frozen ranks, allocation faults (~15 min;
#                   not in make test; docs/reliability.md)
#   WERROR=1        warnings are errors (CI)
#   MPI_PKG=mpich   build against MPICH instead of OpenMPI (e.g. BUILD=build-mpich)

CC       ?= cc
BUILD    ?= build
OPT      ?= -O2 -g
WERROR   ?=
WARN      = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
ifeq ($(WERROR),1)
WARN     += -Werror
endif
MPI_PKG  ?= ompi-c
OPENMP   ?= -fopenmp
CPPFLAGS += -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L $(shell pkg-config --cflags $(MPI_PKG))
CFLAGS   += -std=c11 $(OPT) $(WARN) $(OPENMP) -pthread -fno-strict-aliasing -fno-math-errno $(XCFLAGS)
LDLIBS   += -ldnnl $(shell pkg-config --libs $(MPI_PKG)) -lutf8proc -lcjson -lz -llzma -lzstd -lyaml -lmd -lxxhash -lm -pthread
LDFLAGS  += $(XLDFLAGS)

LIB_SRC   := $(sort $(shell find src -name '*.c'))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TTOOL_SRC := $(sort $(wildcard tests/tools/*.c))
TTOOL_BIN := $(TTOOL_SRC:tests/tools/%.c=$(BUILD)/testtools/%)
LIB       := $(BUILD)/libplait.a
PLAIT     := $(BUILD)/plait

.PHONY: all test unit setup demo asan fuzz fuzz-build mpich-build clean bench install uninstall chaos
all: $(LIB) $(PLAIT) $(TEST_BIN) $(TTOOL_BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(PLAIT): $(TOOL_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h tests/tools/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/unit $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Helper programs that script suites call (tests/tools/*.c).
$(BUILD)/testtools/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

setup:
	scripts/setup.sh

# GNU conventions: PREFIX where it runs from, DESTDIR a staging root (packaging).
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
install: $(PLAIT)
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(PLAIT) $(DESTDIR)$(BINDIR)/plait

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/plait

# The whole suite: set-up, build, the asan build, unit tests, script tests, brief fuzzing.
test: setup
	$(MAKE) -j2 all
	$(MAKE) asan-build
	$(MAKE) fuzz-build
	$(MAKE) mpich-build
	tests/run.sh

unit: all
	tests/run.sh --unit-only

asan-build:
	$(MAKE) -j2 BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all

# plait and the test tools against MPICH (the MPI and training suites run them under mpirun.mpich).
mpich-build:
	$(MAKE) -j2 BUILD=build-mpich MPI_PKG=mpich build-mpich/plait $(TTOOL_SRC:tests/tools/%.c=build-mpich/testtools/%)

asan: asan-build
	PLAIT_TEST_BUILD=build-asan tests/run.sh --unit-only

FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
FUZZ_SECONDS ?= 300
fuzz-build:
	$(MAKE) -j2 BUILD=build-fuzz CC=clang OPENMP= XCFLAGS=-Wno-unknown-pragmas OPT="-O1 -g -fsanitize=address,undefined,fuzzer-no-link" build-fuzz/libplait.a
	$(if $(FUZZ_BIN),$(MAKE) -j2 $(FUZZ_BIN))

build-fuzz/fuzz_%: fuzz/fuzz_%.c build-fuzz/libplait.a
	clang $(CPPFLAGS) -std=c11 -O1 -g -Wno-unknown-pragmas -fsanitize=address,undefined,fuzzer -o $@ $< build-fuzz/libplait.a $(LDLIBS)

fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_SECONDS)

chaos: all
	$(MAKE) asan-build
	scripts/chaos.sh

demo: setup all
	scripts/demo.sh

bench: setup all
	bench/run_all.sh

clean:
	rm -rf build build-asan build-fuzz build-mpich

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
