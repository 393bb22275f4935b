# fplab: one GNU Makefile. `make` builds build/libfplab.a and build/fplab; `make help` lists
# the targets. It detects OpenMP, MPFR, Criterion, a BLAS and nvcc and says what it found.
# Opt-outs: NO_CUDA=1, NO_OMP=1. ARCH=... overrides -march=native (x86-64-v3 for valgrind).

SHELL := /bin/bash
CC ?= cc
ARCH ?= native
BUILD ?= build
PREFIX ?= /usr/local
OPT ?= -O3
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) -march=$(ARCH) -g -Wall -Wextra -Wno-unknown-pragmas -Wno-psabi \
               -fno-math-errno -fno-trapping-math -ffp-contract=off -I.
LDLIBS_BASE := -lm

# Debian packages the project needs (make deps installs the missing ones).
DEB_PKGS := build-essential pkg-config libmpfr-dev libgmp-dev libcriterion-dev libopenblas-dev \
            gnuplot-nox python3 fortunes

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
BLAS_LIBS := $(if $(HAVE_BLAS),-lopenblas,)
CFLAGS += $(if $(HAVE_BLAS),-DFPLAB_HAVE_BLAS,)
LDLIBS := $(LDLIBS_BASE) $(OMPFLAGS) $(BLAS_LIBS)

# CUDA: kernels/*.cu are built when nvcc is found (sm_90 for H100/H200 plus PTX for newer);
# without it kernels/*_nocuda.c supplies the same functions returning MM_ENODEV.
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCCFLAGS ?= -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
             -Xcompiler -fPIC -Xcompiler -Wall -Xcompiler -Wno-psabi
CUDA_SRC := $(if $(NVCC),$(wildcard kernels/*.cu),)
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
ifneq ($(NVCC),)
CFLAGS += -DFPLAB_HAVE_CUDA
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
endif

# --- sources: every .c of a layer goes into the library; MPFR code is kept to its own files
LIB_SRC := $(wildcard formats/*.c kernels/*.c autocast/*.c trainer/*.c experiments/*.c)
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

.PHONY: all lib cli deps config test test-gpu bench-gpu asan run-tests bench demo verify-exhaustive check-peers \
        check-trainer-torch install uninstall clean help
all: config lib cli

help:
	@echo "make            build build/libfplab.a and build/fplab"
	@echo "make deps       install the Debian packages fplab needs (as root), or print the line"
	@echo "make demo       the finfo table, a few casts and a 2-minute precision ablation (the README's main command)"
	@echo "make test       build and run the Criterion suites"
	@echo "make asan       the tests under AddressSanitizer and UBSan"
	@echo "make bench      benchmarks (tables; never fail on a timing)"
	@echo "make test-gpu   the CUDA suites, on a machine with a GPU"
	@echo "make bench-gpu  mm_cuda's paths and PyTorch's matmuls, on a machine with a GPU"
	@echo "make verify-exhaustive  every float32 input, every format <= 16 bits, against MPFR"
	@echo "make check-peers        compare with ml_dtypes (pip) and write tests/fixtures"
	@echo "make check-trainer-torch  the Llama against transformers (pip: torch) and write tests/fixtures"
	@echo "make install PREFIX=... library, headers, command and fplab.pc"

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

lib: $(BUILD)/libfplab.a
cli: $(BUILD)/fplab

$(BUILD)/%.o: %.c $(wildcard */*.h) | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu $(wildcard */*.h kernels/*.cuh) | $(BUILD)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD):
	@mkdir -p $(BUILD)

$(BUILD)/libfplab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/fplab: $(CLI_OBJ) $(BUILD)/libfplab.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) $(MPFR_LIBS)

# Tests link the command's units too (all but main), so cli/ code is tested without #including .c files.
CLI_UNITS := $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ))
$(BUILD)/tests/%: tests/%.c $(CLI_UNITS) $(BUILD)/libfplab.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(CLI_UNITS) $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS) -lcriterion

# The own CUDA kernels run on the CPU (tests/cuda_shim.cpp, one std::thread per CUDA thread),
# so that their logic is tested on every machine; g++ builds the shim from the same source.
SHIM_CXXFLAGS := -std=c++20 $(OPT) $(SAN) -march=$(ARCH) -g -Wall -Wextra -Wno-psabi -fno-math-errno \
                 -fno-trapping-math -ffp-contract=off -I. -pthread
$(BUILD)/tests/cuda_shim.o: tests/cuda_shim.cpp kernels/scaled_mm_cuda_kernels.cuh $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(SHIM_CXXFLAGS) -c $< -o $@
$(BUILD)/tests/test_mm_cuda_shim: tests/test_mm_cuda_shim.c $(BUILD)/tests/cuda_shim.o $(CLI_UNITS) \
                                  $(BUILD)/libfplab.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/tests/cuda_shim.o -o $@ $(CLI_UNITS) $(BUILD)/libfplab.a $(LDLIBS) \
	    $(MPFR_LIBS) -lcriterion -lstdc++ -pthread

$(BUILD)/bench/%: bench/%.c $(BUILD)/libfplab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS)

$(BUILD)/tools/%: tools/%.c $(BUILD)/libfplab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS)

# test: every suite runs even if one fails; the exit status says whether all passed. Suites run
# two tests at a time, each with OpenMP threads: short spinning keeps the oversubscribed cores
# from stalling each other (fplab itself sets this when it starts; see kernels/blas_tune.h).
test: deps
	@$(MAKE) --no-print-directory run-tests

run-tests: all $(TEST_BIN)
	@fail=0; for t in $(TEST_BIN); do \
	  echo "== $$t"; GOMP_SPINCOUNT=1000 $$t --jobs 2 || fail=1; \
	done; \
	if [ -x tests/cli_test.sh ] || [ -f tests/cli_test.sh ]; then echo "== tests/cli_test.sh"; bash tests/cli_test.sh $(BUILD)/fplab || fail=1; fi; \
	exit $$fail

# asan: the same suites built with AddressSanitizer and UBSan in build-asan/ (CUDA left out).
asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan NO_CUDA=1 OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow" run-tests

# GPU suites, on a machine with a GPU (they skip under make test without one).
# On a machine with a GPU: mm_cuda's paths at n = 4096 and 8192, then PyTorch's (if installed).
bench-gpu: all $(BUILD)/bench/bench_mm_cuda
	$(BUILD)/bench/bench_mm_cuda
	python3 tools/bench_torch_mm.py

test-gpu: all $(BUILD)/tests/test_mm_cuda
	@command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "test-gpu: no GPU found (nvidia-smi)"; exit 1; }
	FPLAB_REQUIRE_GPU=1 $(BUILD)/tests/test_mm_cuda --jobs 1

bench: all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do $$b; done

# demo: the finfo table, a few casts, then a short precision ablation on a small Llama (about
# 2 minutes on 2 cores). The corpus comes with Debian's fortunes package (make deps).
DEMO_DATA ?= /usr/share/games/fortunes/cookie
DEMO_OUT ?= demo-ablation
DEMO_PRESETS := fp32,bf16-amp,fp16-amp,fp16-amp-noscale,pure-bf16,pure-bf16-sr,fp8-delayed,mxfp8,mxfp4,nvfp4
demo: deps
	@$(MAKE) --no-print-directory all >/dev/null
	@echo "\$$ fplab finfo"; $(BUILD)/fplab finfo
	@echo; echo "\$$ fplab cast 0.1 300 464 500 1e-3 --to e4m3"; $(BUILD)/fplab cast 0.1 300 464 500 1e-3 --to e4m3
	@echo; echo "\$$ fplab cast 0.1 300 464 500 1e-3 --to e4m3 --overflow saturate"; \
	  $(BUILD)/fplab cast 0.1 300 464 500 1e-3 --to e4m3 --overflow saturate
	@echo; echo "\$$ fplab ablate --presets $(DEMO_PRESETS) ..."
	$(BUILD)/fplab ablate --presets $(DEMO_PRESETS) --model shakespeare \
	  --extra "--dim 64 --n-layers 2 --batch 8" --data $(DEMO_DATA) --steps 400 --eval-every 50 \
	  --out $(DEMO_OUT)
	@echo; echo "demo: the ablation report is $(DEMO_OUT)/report.md (plots in $(DEMO_OUT)/plots)"

verify-exhaustive: all $(BUILD)/tools/verify_exhaustive
	$(BUILD)/tools/verify_exhaustive

check-peers: all
	python3 tools/check_peers.py $(BUILD)/fplab

check-trainer-torch: all $(BUILD)/tools/dump_llama
	python3 tools/check_llama_torch.py $(BUILD)/tools/dump_llama

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/fplab/formats \
	  $(DESTDIR)$(PREFIX)/include/fplab/kernels $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libfplab.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/fplab $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(filter-out %_internal.h %round_scalar.h,$(wildcard formats/*.h)) $(DESTDIR)$(PREFIX)/include/fplab/formats/
	install -m 644 $(filter-out %_internal.h,$(wildcard kernels/*.h)) $(DESTDIR)$(PREFIX)/include/fplab/kernels/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(LDLIBS) $(MPFR_LIBS)|' fplab.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/fplab.pc

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/fplab $(DESTDIR)$(PREFIX)/lib/libfplab.a \
	  $(DESTDIR)$(PREFIX)/bin/fplab $(DESTDIR)$(PREFIX)/lib/pkgconfig/fplab.pc

clean:
	rm -rf build build-asan

# Targets kept in their own files (fuzzing, the Python binding): mk/*.mk.
-include $(wildcard mk/*.mk)
