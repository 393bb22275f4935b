# mk/fuzz.mk: libFuzzer harnesses (tests/fuzz/fuzz_*.c) for the readers of files from outside:
# .npy, checkpoints (with the loaders of their sections), text and llm.c-shard data, policies,
# JSON and training logs. See docs/fuzzing.md. Not part of `make test`.
#
#   make fuzz                 build, then run each harness FUZZ_SECONDS (60) from its seed corpus;
#                             fails if one finds a crash, a leak or a broken invariant
#   make fuzz FUZZ=fuzz_npy   only the named harnesses (space-separated)
#   make fuzz-replay          run each harness once over its seeds and tests/fuzz/crashes/ (no fuzzing)
#   make fuzz-seeds           rewrite the generated seeds (tests/fuzz/gen_seeds.c)
#   make fuzz-deps            install clang-14 and its fuzzer runtime (as root), or print the line
#
# Everything is built with clang into $(FUZZ_BUILD) (build-fuzz/): the library's sources again,
# with coverage for the fuzzer, AddressSanitizer and UBSan (float-cast-overflow included), no
# OpenMP, no BLAS, no CUDA (the *_nocuda.c stubs). New inputs the fuzzer finds go to
# $(FUZZ_BUILD)/corpus/<harness>/, crashes to $(FUZZ_BUILD)/crashes/; the corpus in the repository
# (tests/fuzz/corpus/<harness>/) is only read.

FUZZ_CC ?= clang-14
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_RSS_MB ?= 2048
FUZZ_DEB_PKGS := clang-14 libclang-rt-14-dev
FUZZ_SAN := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -march=$(ARCH) -Wall -Wextra -Wno-unknown-pragmas -Wno-psabi \
               -fno-math-errno -fno-trapping-math -ffp-contract=off -I. $(FUZZ_SAN)
FUZZ_LIB_SRC := $(wildcard util/*.c formats/*.c kernels/*.c kernels/*/*.c autocast/*.c trainer/*.c experiments/*.c) cli/npy.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_ALL := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ ?= $(FUZZ_ALL)
FUZZ_BIN := $(FUZZ:%=$(FUZZ_BUILD)/%)
# -error_exitcode: a crash or a failed invariant; leaks count too (detect_leaks, the default).
FUZZ_RUN_FLAGS = -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=$(FUZZ_RSS_MB) -malloc_limit_mb=$(FUZZ_RSS_MB) \
                 -timeout=10 -print_final_stats=1

.PHONY: fuzz fuzz-build fuzz-deps fuzz-replay fuzz-seeds

fuzz-deps:
	@missing=""; command -v $(FUZZ_CC) >/dev/null || missing="$(FUZZ_DEB_PKGS)"; \
	if [ -z "$$missing" ] && ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' | \
	    $(FUZZ_CC) -x c -fsanitize=fuzzer,address,undefined - -o /dev/null 2>/dev/null; then missing="libclang-rt-14-dev"; fi; \
	if [ -z "$$missing" ]; then echo "fuzz-deps: $(FUZZ_CC) with libFuzzer, ASan and UBSan present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "fuzz-deps: installing $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null && echo "fuzz-deps: done"; \
	else echo "fuzz-deps: missing $$missing; run: sudo apt-get install -y $$missing"; exit 1; fi

$(FUZZ_BUILD)/obj/%.o: %.c $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/libfplab-fuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_BUILD)/libfplab-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< -o $@ $(FUZZ_BUILD)/libfplab-fuzz.a -lm $(MPFR_LIBS)

fuzz-build: fuzz-deps
	@$(MAKE) --no-print-directory $(FUZZ_BIN)

# Each harness reads its working corpus ($(FUZZ_BUILD)/corpus/H, kept between runs, where new
# inputs go) and the seeds of the repository, with its dictionary when it has one.
fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/crashes; fail=""; \
	for h in $(FUZZ); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$h; \
	  dict=""; [ -f tests/fuzz/$$h.dict ] && dict="-dict=tests/fuzz/$$h.dict"; \
	  echo "== $$h: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/$$h $(FUZZ_RUN_FLAGS) $$dict -artifact_prefix=$(FUZZ_BUILD)/crashes/$$h- \
	    $(FUZZ_BUILD)/corpus/$$h tests/fuzz/corpus/$$h > $(FUZZ_BUILD)/$$h.log 2>&1 || fail="$$fail $$h"; \
	  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|invariant failed" \
	    $(FUZZ_BUILD)/$$h.log | tail -4; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: FAILED:$$fail (logs $(FUZZ_BUILD)/<harness>.log, inputs $(FUZZ_BUILD)/crashes/)"; exit 1; fi; \
	echo "fuzz: no crash in $(FUZZ)"

# The seeds and saved crash inputs once each (a regression check after a fix).
fuzz-replay: fuzz-build
	@fail=""; for h in $(FUZZ); do \
	  files=$$(ls tests/fuzz/corpus/$$h/* tests/fuzz/crashes/$$h-* 2>/dev/null); \
	  echo "== $$h: $$(echo $$files | wc -w) inputs"; \
	  [ -z "$$files" ] || $(FUZZ_BUILD)/$$h -rss_limit_mb=$(FUZZ_RSS_MB) -malloc_limit_mb=$(FUZZ_RSS_MB) $$files \
	    > $(FUZZ_BUILD)/$$h.replay.log 2>&1 || { fail="$$fail $$h"; tail -30 $(FUZZ_BUILD)/$$h.replay.log; }; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz-replay: FAILED:$$fail"; exit 1; fi; echo "fuzz-replay: all inputs pass"

# The generated seeds (checkpoints, .npy files, shards), written by a program linked with the
# ordinary build's library.
$(BUILD)/tests/fuzz/gen_seeds: tests/fuzz/gen_seeds.c $(BUILD)/libfplab.a $(CLI_UNITS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(CLI_UNITS) $(BUILD)/libfplab.a $(LDLIBS) $(MPFR_LIBS)

fuzz-seeds: $(BUILD)/tests/fuzz/gen_seeds
	$(BUILD)/tests/fuzz/gen_seeds tests/fuzz/corpus
