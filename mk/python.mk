# python.mk: the Python binding (python/, docs/python.md). `make python` makes a venv under
# $(BUILD)/venv with NumPy, pytest and ml_dtypes from PyPI and pip-installs the package from
# python/ into it, built against this build's libfplab.so (same BUILD and flags, so nothing is
# compiled twice); `make test-python` runs tests/python with it (part of make test, after the
# Criterion suites). PYTHON=... picks the interpreter the venv is made from.

PYTHON ?= python3
PYVENV := $(BUILD)/venv
PYVENV_PY := $(PYVENV)/bin/python
PY_DEPS := numpy pytest ml_dtypes "setuptools>=70.1"
PY_SRC := $(wildcard python/setup.py python/pyproject.toml python/fplab/*.py python/fplab/*.c)
# What the package's build passes to make for the C library: this build's own configuration.
PY_MAKE_ARGS := CC=$(CC) $(if $(ARCH),ARCH=$(ARCH),ARCH=) $(if $(NO_CUDA),NO_CUDA=1) $(if $(NO_OMP),NO_OMP=1) \
                $(if $(NO_MPI),NO_MPI=1) OPT="$(OPT)"

.PHONY: python test-python
python: $(PYVENV)/.fplab

# The venv once (a failed creation leaves no stamp, so the next make tries again).
$(PYVENV)/.deps:
	@rm -rf $(PYVENV)
	$(PYTHON) -m venv $(PYVENV) || { echo "python: '$(PYTHON) -m venv' failed; Debian needs python3-venv (make deps)"; exit 1; }
	$(PYVENV_PY) -m pip install -q --disable-pip-version-check $(PY_DEPS)
	@touch $@

$(PYVENV)/.fplab: $(PYVENV)/.deps $(BUILD)/libfplab.so $(PY_SRC)
	@rm -rf python/build
	FPLAB_BUILD_DIR=$(abspath $(BUILD)) FPLAB_MAKE_ARGS='$(PY_MAKE_ARGS)' \
	  $(PYVENV_PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./python
	@rm -rf python/build python/fplab.egg-info
	@touch $@

# The suite runs from tests/python against the installed package (not the source tree).
test-python: python cli
	cd tests/python && FPLAB_CLI=$(abspath $(BUILD)/fplab) $(abspath $(PYVENV_PY)) -m pytest -q -p no:cacheprovider

ifeq ($(SAN),)
TEST_TARGETS += test-python
endif

# bench-python: the binding's cost over the C library and beside ml_dtypes (docs/benchmarks.md);
# a benchmark, never a test. GOMP_SPINCOUNT as the fplab command sets it for itself.
.PHONY: bench-python
bench-python: python cli $(BUILD)/bench/bench_round
	GOMP_SPINCOUNT=1000 $(PYVENV_PY) python/benchmarks/bench_binding.py $(BUILD)

# test-torch: the fplab.torch suites (tests/python/test_torch*.py) with PyTorch, in a venv of
# its own ($(BUILD)/venv-torch: make test's venv stays without torch, whose wheel is large, and
# its torch tests skip). transformers and accelerate come from PyPI (the eval and loop suites' Hugging
# Face Llama; the distributed suite's Accelerator.prepare, which skips without it).
# TORCH_PIP says what pip installs (default: the CPU wheel from PyTorch's
# index; where that index cannot be reached, PyPI's torch, whose CUDA libraries make it several
# GB); TORCH_SITE=DIR reuses a site-packages that already holds torch (added to the venv's path
# after its own packages) and installs none. CI runs this target after make test (.ci/run).
TORCH_VENV := $(BUILD)/venv-torch
TORCH_VENV_PY := $(TORCH_VENV)/bin/python
TORCH_PIP ?= torch --index-url https://download.pytorch.org/whl/cpu
.PHONY: test-torch
$(TORCH_VENV)/.deps:
	@rm -rf $(TORCH_VENV)
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check $(PY_DEPS)
ifneq ($(TORCH_SITE),)
	echo $(abspath $(TORCH_SITE)) > "$$($(TORCH_VENV_PY) -c 'import site; print(site.getsitepackages()[0])')/zz_torch_site.pth"
else
	$(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 $(TORCH_PIP) || \
	  { echo "test-torch: $(TORCH_PIP) failed; installing PyPI's torch instead (several GB)"; \
	    $(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check torch; }
	$(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check transformers accelerate
endif
	@touch $@

$(TORCH_VENV)/.fplab: $(TORCH_VENV)/.deps $(BUILD)/libfplab.so $(PY_SRC)
	@rm -rf python/build
	FPLAB_BUILD_DIR=$(abspath $(BUILD)) FPLAB_MAKE_ARGS='$(PY_MAKE_ARGS)' \
	  $(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./python
	@rm -rf python/build python/fplab.egg-info
	@touch $@

test-torch: $(TORCH_VENV)/.fplab cli
	cd tests/python && FPLAB_CLI=$(abspath $(BUILD)/fplab) FPLAB_LIB=$(abspath $(BUILD)/libfplab.so) \
	  $(abspath $(TORCH_VENV_PY)) -m pytest -q -p no:cacheprovider \
	  test_torch.py test_torch_policy.py test_torch_model.py test_torch_ops.py test_torch_dist.py \
	  test_torch_eval.py test_torch_loop.py test_torch_cuda.py test_torch_cuda_args.py

# check-peers: tools/check_peers.py rewrites the ml_dtypes fixtures of tests/test_peers.c, with
# make test's venv (NumPy and ml_dtypes from PyPI; Debian's python3 has neither).
.PHONY: check-peers check-trainer-torch
check-peers: all $(PYVENV)/.deps
	$(PYVENV_PY) tools/check_peers.py $(BUILD)/fplab

# check-trainer-torch: tools/check_llama_torch.py, the C trainer's Llama against transformers',
# in test-torch's venv; rewrites tests/fixtures/llama_torch_check.json.
check-trainer-torch: all $(BUILD)/tools/dump_llama $(TORCH_VENV)/.deps
	$(TORCH_VENV_PY) tools/check_llama_torch.py $(BUILD)/tools/dump_llama

# check-torch-policy: tools/check_torch_policy.py, the parity of fplab.torch with the C trainer
# (50 steps of the eight presets, about 25 seconds), in test-torch's venv with transformers added;
# rewrites tests/fixtures/torch_policy_check.json, which make test checks.
.PHONY: check-torch-policy
check-torch-policy: $(TORCH_VENV)/.fplab $(BUILD)/tools/train_policy_dump
	$(TORCH_VENV_PY) -c 'import transformers' 2>/dev/null || \
	  $(TORCH_VENV_PY) -m pip install -q --disable-pip-version-check transformers
	GOMP_SPINCOUNT=1000 $(TORCH_VENV_PY) tools/check_torch_policy.py --dump $(BUILD)/tools/train_policy_dump
