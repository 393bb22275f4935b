# fplab: one GNU Makefile. `make` builds build/libfplab.a and build/fplab; `make help` lists
# the targets. It detects OpenMP, MPFR, Criterion, a BLAS and nvcc and says what it found.
# Opt-outs: NO_CUDA=1, NO_OMP=1. ARCH=... overrides -march=native (x86-64-v3 for valgrind; ARCH=
# empty: the compiler's default). `make install` builds apart with a portable ARCH (INSTALL_ARCH).

SHELL := /bin/bash
# Use every core unless the command line says -jN: a bare `make` built serially (issue 24). Only
# the top make adds it; sub-makes share its jobserver.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
CC ?= cc
ARCH ?= native
BUILD ?= build
PREFIX ?= /usr/local
OPT ?= -O3
# The one version string: `fplab --version`, libfplab.so.$(VERSION) and its SONAME
# libfplab.so.$(SOVERSION), fplab.pc, and the Python package (python/setup.py reads this line).
VERSION := 0.2.0
SOVERSION := $(firstword $(subst ., ,$(VERSION)))
LIBDIR ?= $(PREFIX)/lib
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(if $(ARCH),-march=$(ARCH)) -g -Wall -Wextra -Wno-unknown-pragmas -Wno-psabi \
               -fno-math-errno -fno-trapping-math -ffp-contract=off -I.
LDLIBS_BASE := -lm

# Debian packages the project needs (make deps installs the missing ones).
DEB_PKGS := build-essential pkg-config libmpfr-dev libgmp-dev libcriterion-dev libopenblas-dev \
            gnuplot-nox python3 python3-venv python3-dev fortunes

# --- detection
have_hdr = $(shell printf '#include <$(1)>\nint main(void){return 0;}\n' | \
             $(CC) -x c - -o /dev/null $(2) >/dev/null 2>&1 && echo yes)
HAVE_MPFR := $(call have_hdr,mpfr.h,-lmpfr -lgmp)
HAVE_CRITERION := $(call have_hdr,criterion/criterion.h,-lcriterion)
HAVE_BLAS := $(call have_hdr,cblas.h,-lopenblas)
ifeq ($(NO_OMP),)
HAVE_OMP := $(call have_hdr,omp.h,-fopenmp)
endif
ifeq ($(NO_CUDA),)
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
endif
OMPFLAGS := $(if $(HAVE_OMP),-fopenmp,)
CFLAGS ?= $(CFLAGS_BASE)
CFLAGS += $(OMPFLAGS)
# Position-independent code, so that the same objects make libfplab.a and libfplab.so; calls
# inside the library bind locally (the version script's exports are an interface, not hooks).
CFLAGS += -fPIC -fno-semantic-interposition -DFPLAB_VERSION='"$(VERSION)"'
BLAS_LIBS := $(if $(HAVE_BLAS),-lopenblas,)
CFLAGS += $(if $(HAVE_BLAS),-DFPLAB_HAVE_BLAS,)
LDLIBS := $(LDLIBS_BASE) $(OMPFLAGS) $(BLAS_LIBS)

# CUDA: kernels/*.cu and kernels/*/*.cu are built when nvcc is found (sm_90 for H100/H200 plus
# PTX for newer); without it kernels/cuda/*_nocuda.c supplies the same functions returning
# MM_ENODEV.
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCCFLAGS ?= -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
             -Xcompiler -fPIC -Xcompiler -Wall -Xcompiler -Wno-psabi
CUDA_SRC := $(if $(NVCC),$(wildcard kernels/*.cu kernels/*/*.cu),)
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
ifneq ($(NVCC),)
CFLAGS += -DFPLAB_HAVE_CUDA
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -lstdc++
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
endif

# --- sources: every .c of a layer goes into the library (util/ is the bottom layer, docs/design.md);
# MPFR code is kept to its own files
LIB_SRC := $(wildcard util/*.c formats/*.c kernels/*.c kernels/*/*.c autocast/*.c trainer/*.c experiments/*.c)
LIB_SRC := $(if $(CUDA_SRC),$(filter-out %_nocuda.c,$(LIB_SRC)),$(LIB_SRC))
REF_SRC := $(filter %_ref.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CUDA_OBJ)
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
TOOL_SRC := $(wildcard tools/*.c)
TOOL_BIN := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
MPFR_LIBS := -lmpfr -lgmp

.PHONY: check-docs
.PHONY: all lib cli deps config test test-arch test-gpu bench-gpu asan run-tests bench demo verify-exhaustive verify-engines check-peers check-p3109 check-p3109-tables check-torchao \
        check-trainer-torch install install-built pc check-install check-symbols check-layers check-results uninstall clean help
all: config lib cli

help:
	@echo "make            build build/libfplab.a and build/fplab"
	@echo "make deps       install the Debian packages fplab needs (as root), or print the line"
	@echo "make demo       the finfo table, a few casts and a 2-minute precision ablation (the README's main command)"
	@echo "make test       build and run the Criterion suites"
	@echo "make python     a venv build/venv with NumPy and the fplab package (docs/python.md; make test makes it too)"
	@echo "make asan       the tests under AddressSanitizer and UBSan"
	@echo "make test-arch  the ISA-dependent kernels' suites built for x86-64-v3 (AVX2) too (in CI)"
	@echo "make bench      benchmarks (tables; never fail on a timing)"
	@echo "make test-gpu   the CUDA suites, on a machine with a GPU"
	@echo "make bench-gpu  mm_cuda's paths and PyTorch's matmuls, on a machine with a GPU"
	@echo "make verify-exhaustive  every float32 input, every format <= 16 bits, against MPFR"
	@echo "make check-peers        compare with ml_dtypes (pip) and write tests/fixtures"
	@echo "make check-p3109        IEEE P3109 against gfloat (P3109_PYTHON=python with gfloat) into tests/fixtures"
	@echo "make check-p3109-tables every code of the P3109 WG value tables (P3109_TABLES=their folder)"
	@echo "make check-torchao      torchao's MX scale rules (TORCHAO_PYTHON=python with torchao) into tests/fixtures"
	@echo "make check-trainer-torch  the Llama against transformers (pip: torch) and write tests/fixtures"
	@echo "make test-torch         the fplab.torch suites in a venv with torch (TORCH_SITE=DIR reuses one)"
	@echo "make check-torch-policy fplab.torch against the C trainer, 8 presets x 50 steps (rewrites tests/fixtures)"
	@echo "make install PREFIX=... DESTDIR=...  portable build: libfplab.a, libfplab.so.$(VERSION), headers, command, fplab.pc"
	@echo "make check-install      a DESTDIR install without CUDA, linked by a C program through pkg-config (in make test)"
	@echo "make check-docs         run the quick command blocks of README.md and docs/*.md as pasted; list the slow ones"
	@echo "make check-results      a short prefix of each study against its committed logs, bit for bit (UPDATE=1 rewrites)"
	@echo "make check-symbols      libfplab.so exports exactly mk/libfplab.ver, the API; every symbol prefixed (in make test)"
	@echo "make check-layers       every #include points down the layers (util < formats < ... < cli; in make test)"

config:
	@echo "fplab build: cc=$(CC) arch=$(ARCH) openmp=$(or $(HAVE_OMP),no) mpfr=$(or $(HAVE_MPFR),no)" \
	  "criterion=$(or $(HAVE_CRITERION),no) blas=$(or $(HAVE_BLAS),no) nvcc=$(or $(NVCC),no)"

# deps: install what is missing with apt-get when root, otherwise print the line to run.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all present ($(DEB_PKGS))"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null && echo "deps: done"; \
	else echo "deps: missing$$missing; run: sudo apt-get install -y$$missing"; exit 1; fi

lib: $(BUILD)/libfplab.a $(BUILD)/libfplab.so
cli: $(BUILD)/fplab

# need-deps: before any object, one clear line when the headers the library needs are missing
# (a fresh machine used to die on "mpfr.h: No such file"); make deps installs them.
.PHONY: need-deps need-criterion
need-deps:
	@if [ -z "$(HAVE_MPFR)" ]; then echo "fplab: mpfr.h (libmpfr-dev, libgmp-dev) not found: run 'make deps' first," \
	  "which installs the Debian packages fplab needs (or prints the apt-get line)"; exit 1; fi
need-criterion:
	@if [ -z "$(HAVE_CRITERION)" ]; then echo "fplab: criterion/criterion.h (libcriterion-dev) not found: run" \
	  "'make deps' first, which installs the Debian packages fplab needs (or prints the apt-get line)"; exit 1; fi

# Each object depends on the headers it includes (-MMD writes them into its .d file); an object
# without a .d yet is rebuilt once (the empty rule below), so an older build/ catches up.
$(BUILD)/%.o: %.c $(BUILD)/%.d | $(BUILD) need-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
DEP_FILES := $(patsubst %.o,%.d,$(filter-out $(CUDA_OBJ),$(LIB_OBJ)) $(CLI_OBJ))
$(DEP_FILES):
-include $(wildcard $(DEP_FILES))

$(BUILD)/%.o: %.cu $(wildcard */*.h kernels/*.cuh kernels/*/*.cuh) | $(BUILD)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD):
	@mkdir -p $(BUILD)

$(BUILD)/libfplab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library: the same objects; mk/libfplab.ver exports the API and nothing else (the
# functions of the public headers of formats/ to experiments/, and what the Python binding calls;
# util/'s helpers and internal prefix__ ones stay local); SONAME libfplab.so.MAJOR.
SHLIB := libfplab.so.$(VERSION)
$(BUILD)/$(SHLIB): $(LIB_OBJ) mk/libfplab.ver
	$(CC) -shared $(CFLAGS) -Wl,-soname,libfplab.so.$(SOVERSION) -Wl,--version-script=mk/libfplab.ver \
	  -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LDLIBS) $(MPFR_LIBS)
$(BUILD)/libfplab.so: $(BUILD)/$(SHLIB)
	ln -sf $(SHLIB) $(BUILD)/libfplab.so.$(SOVERSION)
	ln -sf libfplab.so.$(SOVERSION) $@

# The commit goes into --version; main.o is rebuilt when it changes (a stamp rewritten only then).
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/cli/main.o: Makefile $(BUILD)/commit.stamp  # FPLAB_VERSION, FPLAB_COMMIT
$(BUILD)/cli/main.o: CFLAGS += -DFPLAB_COMMIT='"$(GIT_COMMIT)"'
$(BUILD)/trainer/run_env.o: Makefile $(BUILD)/commit.stamp  # a run's log records the commit
$(BUILD)/trainer/run_env.o: CFLAGS += -DFPLAB_COMMIT='"$(GIT_COMMIT)"'
$(BUILD)/commit.stamp: FORCE | $(BUILD)
	@[ "$$(cat $@ 2>/dev/null)" = "$(GIT_COMMIT)" ] || echo "$(GIT_COMMIT)" > $@
.PHONY: FORCE
FORCE:
$(BUILD)/kernels/cpu/scaled_mm_cpu_emu_f32_v4.o: kernels/cpu/scaled_mm_cpu_emu_f32.c  # its #include
$(BUILD)/fplab: $(CLI_OBJ) $(BUILD)/libfplab.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) $(MPFR_LIBS)

# Tests link the command's units too (all but main), so cli/ code is tested without #including .c files.
CLI_UNITS := $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ))
$(BUILD)/tests/%: tests/%.c $(CLI_UNITS) $(BUILD)/libfplab.a $(wildcard tests/*.h) | need-criterion
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(CLI_UNITS) $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS) -lcriterion

# The own CUDA kernels run on the CPU (tests/cuda_shim.cpp, one std::thread per CUDA thread),
# so that their logic is tested on every machine; g++ builds the shim from the same source.
SHIM_CXXFLAGS := -std=c++20 $(OPT) $(SAN) $(if $(ARCH),-march=$(ARCH)) -g -Wall -Wextra -Wno-psabi -fno-math-errno \
                 -fno-trapping-math -ffp-contract=off -I. -pthread
$(BUILD)/tests/cuda_shim.o: tests/cuda_shim.cpp $(wildcard kernels/*/*.cuh */*.h) kernels/engine/engine_model.c
	@mkdir -p $(dir $@)
	$(CXX) $(SHIM_CXXFLAGS) -c $< -o $@
# Every suite named test_*_cuda_shim.c links the shim (the matmul's kernels and the casts').
$(BUILD)/tests/test_%_cuda_shim: tests/test_%_cuda_shim.c $(BUILD)/tests/cuda_shim.o $(CLI_UNITS) \
                                  $(BUILD)/libfplab.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/tests/cuda_shim.o -o $@ $(CLI_UNITS) $(BUILD)/libfplab.a $(LDLIBS) \
	    $(MPFR_LIBS) -lcriterion -lstdc++ -pthread
# The casts on a real device: the shim suite's tests on device memory (it includes that .c);
# with nvcc it needs the runtime's headers, without it every test skips.
$(BUILD)/tests/test_cast_cuda: tests/test_cast_cuda_shim.c
$(BUILD)/tests/test_cast_cuda: CFLAGS += $(if $(NVCC),-I$(CUDA_HOME)/include)
# The device GEMM likewise (test_mm_dev_cuda_shim.c on device memory).
$(BUILD)/tests/test_mm_dev_cuda: tests/test_mm_dev_cuda_shim.c
$(BUILD)/tests/test_mm_dev_cuda: CFLAGS += $(if $(NVCC),-I$(CUDA_HOME)/include)
# autocast's cast plans likewise (test_cast_plan_cuda_shim.c on device memory).
$(BUILD)/tests/test_cast_plan_cuda: tests/test_cast_plan_cuda_shim.c
$(BUILD)/tests/test_cast_plan_cuda: CFLAGS += $(if $(NVCC),-I$(CUDA_HOME)/include)
# The casts keep every product and sum a rounding of its own, as the CPU's -ffp-contract=off does.
$(BUILD)/kernels/cuda/cast_cuda.o: NVCCFLAGS += -fmad=false
# The device GEMM too; and it #includes kernels/engine/engine_model.c (a copy of the one model),
# whose C designated initializers want C++20.
$(BUILD)/kernels/cuda/scaled_mm_dev.o: NVCCFLAGS := $(filter-out -std=%,$(NVCCFLAGS)) -fmad=false -std=c++20
$(BUILD)/kernels/cuda/scaled_mm_dev.o: kernels/engine/engine_model.c

$(BUILD)/bench/%: bench/%.c $(BUILD)/libfplab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS)

$(BUILD)/tools/%: tools/%.c $(BUILD)/libfplab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS)

# Further checks run by run-tests after the suites, each a make target (mk/*.mk add theirs).
TEST_TARGETS := check-symbols check-layers $(if $(SAN),,check-install)
# test: every suite runs even if one fails; the exit status says whether all passed. Suites run
# two tests at a time, each with OpenMP threads: short spinning keeps the oversubscribed cores
# from stalling each other (fplab itself sets this when it starts; see kernels/blas_tune.h).
test: deps
	@$(MAKE) --no-print-directory run-tests

# The last lines sum up: what failed, and what was skipped (a suite prints "[SKIP] WHAT: why" for
# a part it could not run: Criterion's own synthesis leaves skipped tests out, so test_mm_cuda
# without a GPU read "Tested: 1 | Passing: 1").
run-tests: all $(TEST_BIN)
	@fail=""; n=0; log=$$(mktemp); skips=$$(mktemp); \
	for t in $(TEST_BIN); do n=$$((n + 1)); echo "== $$t"; \
	  GOMP_SPINCOUNT=1000 $$t --jobs 2 2>&1 | tee $$log; [ $${PIPESTATUS[0]} = 0 ] || fail="$$fail $${t##*/}"; \
	  grep '^\[SKIP\] ' $$log >> $$skips; \
	done; \
	for s in tests/*_test.sh; do n=$$((n + 1)); echo "== $$s"; \
	  GOMP_SPINCOUNT=1000 bash $$s $(BUILD)/fplab || fail="$$fail $$s"; done; \
	for x in $(TEST_TARGETS); do n=$$((n + 1)); echo "== make $$x"; \
	  $(MAKE) --no-print-directory $$x || fail="$$fail make-$$x"; done; \
	echo "== make test: $$n suites and checks, $$([ -z "$$fail" ] && echo "all passed" || echo "FAILED:$$fail")"; \
	sed 's/^\[SKIP\] /   /' $$skips; rm -f $$log $$skips; \
	[ -z "$$fail" ]

# asan: the same suites built with AddressSanitizer and UBSan in build-asan/ (CUDA left out).
asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan NO_CUDA=1 OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow" run-tests

# test-arch: the suites of the kernels that choose their code by ISA (the engine kernels' lanes,
# the explicit rounding and block-scaling kernels, the emulated accumulators' vector kernels),
# built again for x86-64-v3 (AVX2, 8 lanes) in build-v3/ without CUDA, so that a machine with
# AVX-512 runs the AVX2 paths too (an AVX2-only trap that make test there passed: 901e670). In
# .ci/run after make test.
ARCH_TESTS := test_mm_engine test_engine_fast test_engine test_round test_block_lean test_scale test_sr test_mm_cpu test_sum_squares
test-arch: deps
	@$(MAKE) --no-print-directory BUILD=build-v3 NO_CUDA=1 ARCH=x86-64-v3 $(addprefix build-v3/tests/,$(ARCH_TESTS))
	@for t in $(ARCH_TESTS); do echo "== build-v3/tests/$$t (x86-64-v3)"; \
	  GOMP_SPINCOUNT=1000 build-v3/tests/$$t --jobs 2 || exit 1; done

# GPU suites, on a machine with a GPU (they skip under make test without one).
# On a machine with a GPU: mm_cuda's paths at n = 4096 and 8192, then PyTorch's (if installed).
bench-gpu: all $(BUILD)/bench/bench_mm_cuda
	$(BUILD)/bench/bench_mm_cuda
	python3 tools/bench_torch_mm.py

test-gpu: all $(BUILD)/tests/test_mm_cuda $(BUILD)/tests/test_cast_cuda $(BUILD)/tests/test_mm_dev_cuda \
          $(BUILD)/tests/test_cast_plan_cuda
	@command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "test-gpu: no GPU found (nvidia-smi)"; exit 1; }
	@# Every suite runs (a lease is short: one failing suite must not hide the others' results).
	@fail=; for t in test_mm_cuda test_cast_cuda test_mm_dev_cuda test_cast_plan_cuda; do \
	  echo "== $$t"; FPLAB_REQUIRE_GPU=1 $(BUILD)/tests/$$t --jobs 1 || fail="$$fail $$t"; done; \
	  [ -z "$$fail" ] || { echo "test-gpu: failed:$$fail"; exit 1; }

bench: all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do $$b; done

# demo: the finfo table, a few casts, then a short precision ablation on a small Llama (about
# 2 minutes on 2 cores). The corpus comes with Debian's fortunes package (make deps).
DEMO_DATA ?= /usr/share/games/fortunes/cookie
DEMO_OUT ?= demo-ablation
DEMO_PRESETS := fp32,bf16-amp,fp16-amp,fp16-amp-noscale,pure-bf16,pure-bf16-sr,fp8-delayed,mxfp8,mxfp4,nvfp4
demo: deps
	@echo "demo: building fplab (make all; about 2 minutes the first time on 2 cores)"
	@$(MAKE) --no-print-directory all
	@echo "\$$ fplab finfo"; $(BUILD)/fplab finfo
	@echo; echo "\$$ fplab cast 0.1 300 464 500 1e-3 --to e4m3"; $(BUILD)/fplab cast 0.1 300 464 500 1e-3 --to e4m3
	@echo; echo "\$$ fplab cast 0.1 300 464 500 1e-3 --to e4m3 --overflow saturate"; \
	  $(BUILD)/fplab cast 0.1 300 464 500 1e-3 --to e4m3 --overflow saturate
	@echo; echo "\$$ fplab ablate --presets $(DEMO_PRESETS) ..."
	$(BUILD)/fplab ablate --presets $(DEMO_PRESETS) --model shakespeare \
	  --extra "--dim 64 --n-layers 2 --batch 8" --data $(DEMO_DATA) --steps 400 --eval-every 50 \
	  --out $(DEMO_OUT)
	@echo; echo "demo: the ablation report is $(DEMO_OUT)/report.md (plots in $(DEMO_OUT)/plots)"

# check-docs: the command blocks of README.md and docs/*.md, the quick ones run as pasted in a
# fresh temporary directory, the slow ones and the templates listed with their reason
# (tools/check_doc_commands.py says how a block is marked). Not part of make test. It makes the venv
# build/venv first (make python): docs/engines.md's blocks run NumPy from it.
check-docs: all python
	python3 tools/check_doc_commands.py

# check-results: a short prefix of each study (seed 1 of every policy, --reproducible 1) against
# the logs committed under docs/results/*/check/, bit for bit (minutes; not part of make test).
# UPDATE=1 rewrites those logs after an intended numerics change.
check-results: all
	FPLAB=$(BUILD)/fplab bash tools/check_results.sh $(if $(UPDATE),--update)

verify-exhaustive: all $(BUILD)/tools/verify_exhaustive
	$(BUILD)/tools/verify_exhaustive --codes

# verify-engines: the fast CPU kernel of the matrix engines against the scalar model, bit for
# bit, on 1,000,000 dot products per model (minutes; not part of make test).
verify-engines: all $(BUILD)/tools/verify_engines
	$(BUILD)/tools/verify_engines --dots 1000000

# IEEE P3109 finite formats from gfloat (PyPI): rewrites tests/fixtures/p3109_gfloat.txt, then
# runs the suite that reads it. P3109_PYTHON: a Python with gfloat installed.
P3109_PYTHON ?= python3
check-p3109: all $(BUILD)/tests/test_p3109
	$(P3109_PYTHON) tools/p3109_gfloat.py tests/fixtures/p3109_gfloat.txt
	$(BUILD)/tests/test_p3109

# Every code of every IEEE P3109 value table the working group publishes (github P3109/Public,
# folder "Value Tables/Hexadecimal"; P3109_TABLES names it): decoded and encoded by fplab as the
# tables say. `make test` checks the committed subset (tests/fixtures/p3109_wg.txt).
check-p3109-tables: all $(BUILD)/tests/test_p3109
	@test -d "$(P3109_TABLES)" || { echo "check-p3109-tables: P3109_TABLES='$(P3109_TABLES)' is not a folder; expected" \
	    "the 'Value Tables/Hexadecimal' folder of a clone of https://github.com/P3109/Public"; exit 2; }
	python3 tools/p3109_tables.py "$(P3109_TABLES)" $(BUILD)/p3109_all_codes.txt --all
	FPLAB_P3109_TABLES=$(BUILD)/p3109_all_codes.txt $(BUILD)/tests/test_p3109 --filter 'p3109/wg_value_tables' --verbose

# torchao's four MX scale rules (to_mx, eager, CPU): rewrites tests/fixtures/torchao_scale_rules.txt,
# then runs the suite that reads it. TORCHAO_PYTHON: a Python with torch and torchao installed.
TORCHAO_PYTHON ?= python3
check-torchao: all $(BUILD)/tests/test_scale_rules
	$(TORCHAO_PYTHON) tools/torchao_scale_rules.py tests/fixtures/torchao_scale_rules.txt
	$(BUILD)/tests/test_scale_rules --filter 'scale_rules/torchao_fixture' --verbose

# install: a portable build (ARCH=$(INSTALL_ARCH); INSTALL_ARCH= leaves -march to the compiler)
# in $(BUILD)/dist, then install-built copies it: libfplab.a, libfplab.so.$(VERSION) with the
# links libfplab.so.$(SOVERSION) (SONAME) and libfplab.so, the public headers of formats/,
# kernels/ and autocast/ under include/fplab, the command and fplab.pc. The dev build keeps
# ARCH=native; the AVX2/AVX-512 paths are compile-time choices (docs/python.md, "Installing").
INSTALL_ARCH ?= x86-64-v2
INC_DIRS := formats kernels autocast
install:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/dist ARCH=$(INSTALL_ARCH) install-built

install-built: all pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	  $(addprefix $(DESTDIR)$(PREFIX)/include/fplab/,$(INC_DIRS))
	install -m 644 $(BUILD)/libfplab.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SHLIB) $(DESTDIR)$(LIBDIR)/libfplab.so.$(SOVERSION)
	ln -sf libfplab.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libfplab.so
	install -m 755 $(BUILD)/fplab $(DESTDIR)$(PREFIX)/bin/
	for d in $(INC_DIRS); do \
	  install -m 644 $$(ls $$d/*.h | grep -v -e '_internal\.h$$' -e 'round_scalar\.h$$') \
	    $(DESTDIR)$(PREFIX)/include/fplab/$$d/ || exit 1; done
	install -m 644 $(BUILD)/fplab.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

# fplab.pc: a shared link needs -lfplab only (the .so names its own dependencies); --static adds
# Requires.private (the .pc files of MPFR, GMP and OpenBLAS, where installed) and Libs.private
# (the rest: those without a .pc, OpenMP, CUDA, libm).
pc: | $(BUILD)
	@req=""; priv="$(strip $(OMPFLAGS) $(CUDA_LIBS) -lm)"; \
	for d in mpfr:-lmpfr gmp:-lgmp $(if $(HAVE_BLAS),openblas:-lopenblas); do \
	  if pkg-config --exists $${d%%:*} 2>/dev/null; then req="$$req $${d%%:*}"; else priv="$${d#*:} $$priv"; fi; \
	done; \
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' -e 's|@VERSION@|$(VERSION)|' \
	  -e "s|@REQUIRES_PRIVATE@|$${req# }|" -e "s|@LIBS_PRIVATE@|$$priv|" fplab.pc.in > $(BUILD)/fplab.pc

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/fplab $(DESTDIR)$(LIBDIR)/libfplab.a $(DESTDIR)$(LIBDIR)/libfplab.so \
	  $(DESTDIR)$(LIBDIR)/libfplab.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$(SHLIB) \
	  $(DESTDIR)$(PREFIX)/bin/fplab $(DESTDIR)$(LIBDIR)/pkgconfig/fplab.pc

# check-symbols: the .so exports exactly the names of mk/libfplab.ver, which must be the public
# headers' functions plus the Python binding's needs; every symbol of the archive and the .so
# carries a prefix, and the .so none of the internal ones (part of make test).
check-symbols: lib
	bash tests/check_symbols.sh $(BUILD)/libfplab.a $(BUILD)/libfplab.so

# check-layers: every #include of a layer points to its own layer or one below (part of make test).
check-layers:
	bash tests/check_layers.sh

# check-install: what a distribution gets. A portable build without CUDA (as on a machine that
# has none) is installed with DESTDIR; a C program that rounds a number is built with nothing but
# `pkg-config --cflags --libs fplab` (shared) and --static, and run; SONAME, links, headers on
# their own, no AVX instructions, the symbols. The dev build's fplab.pc must keep CUDA, MPFR
# and OpenBLAS out of the shared link too (part of make test).
CHECK_INSTALL := $(BUILD)/check-install
check-install: pc
	@rm -rf $(CHECK_INSTALL)/root
	@$(MAKE) --no-print-directory BUILD=$(CHECK_INSTALL) NO_CUDA=1 ARCH=$(INSTALL_ARCH) PREFIX=/usr \
	  LIBDIR=/usr/lib DESTDIR=$(abspath $(CHECK_INSTALL))/root install-built >$(CHECK_INSTALL).log 2>&1 || \
	  { cat $(CHECK_INSTALL).log; echo "check-install: the NO_CUDA install failed"; exit 1; }
	bash tests/check_install.sh $(CHECK_INSTALL)/root /usr/lib $(VERSION) $(BUILD)/fplab.pc '$(INSTALL_ARCH)'

clean:
	rm -rf build build-asan

# Targets kept in their own files (fuzzing, the Python binding): mk/*.mk.
-include $(wildcard mk/*.mk)
