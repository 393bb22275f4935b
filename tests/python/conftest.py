"""Shared fixtures of the Python binding's suite (run by `make test-python`, part of make test).

Random cases print their seed and take it from FPLAB_TEST_SEED to replay. The CLI under test is
FPLAB_CLI (make passes build/fplab); tests that need it are skipped without it.
"""
import os
import subprocess

import numpy as np
import pytest

SEED = int(os.environ.get("FPLAB_TEST_SEED", "20240601"))

# fplab spec -> ml_dtypes type name, for every format ml_dtypes has (custom eXmY specs for the
# ones fplab's table does not name).
ML_DTYPES = {
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e8m0": "float8_e8m0fnu",
    "e3m2": "float6_e3m2fn",
    "e2m3": "float6_e2m3fn",
    "e2m1": "float4_e2m1fn",
    "e4m3:ieee": "float8_e4m3",
    "e3m4": "float8_e3m4",
    "e4m3:fnuz:bias=11": "float8_e4m3b11fnuz",
}
NUMPY_FLOATS = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}
MODES = ["rne", "rna", "rtz", "rup", "rdn", "rto", "sr"]


def pytest_report_header(config):
    return f"fplab tests: FPLAB_TEST_SEED={SEED} (set it to replay), FPLAB_CLI={os.environ.get('FPLAB_CLI')}"


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def ml_dtype(spec):
    ml = pytest.importorskip("ml_dtypes")
    t = getattr(ml, ML_DTYPES[spec], None)
    if t is None:
        pytest.skip(f"ml_dtypes {ml.__version__} has no {ML_DTYPES[spec]}")
    return np.dtype(t)


def same_bits(a, b, what=""):
    """Arrays equal bit for bit, any NaN equal to any NaN (payloads and signs of NaN aside); what
    names the arrays in the failure."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    u = {4: np.uint32, 8: np.uint64, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize]
    eq = (a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))
    if not eq.all():
        i = np.flatnonzero(~eq.ravel())[:8]
        raise AssertionError(f"{what + ': ' if what else ''}{(~eq).sum()} of {a.size} differ; first at {i}: "
                             f"{[(float(a.ravel()[k]), float(b.ravel()[k])) for k in i]} "
                             f"(bits {[hex(int(a.view(u).ravel()[k])) for k in i]} vs "
                             f"{[hex(int(b.view(u).ravel()[k])) for k in i]})")
    return True


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("FPLAB_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("FPLAB_CLI is not set to the fplab command (make test-python sets it)")

    def run(*args, check=True):
        r = subprocess.run([path, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"fplab {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
        return r

    return run
