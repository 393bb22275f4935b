"""Several Python threads calling fplab at once (the C calls release the GIL, and OpenMP threads
run inside each): every thread gets exactly what a call on its own gets, stochastic rounding
included, and the format cache stays consistent."""
import threading

import numpy as np

import fplab
from conftest import same_bits


def test_threads_agree_with_serial(rng):
    jobs = []
    for i in range(8):
        x = rng.standard_normal((64, 256)).astype(np.float32) * 100
        spec, recipe = [("e4m3", "mx"), ("e2m1", "nvfp4"), ("bf16", "none"), ("e5m2", "tile:16x16:e8m0")][i % 4]
        jobs.append((x, spec, recipe, i))

    def work(x, spec, recipe, seed):
        q = fplab.quantize(x, spec, scale=recipe, mode="sr", seed=seed)
        r = fplab.round(x, spec, mode="sr", seed=seed)
        c = fplab.encode(x, spec, mode="rna")
        m = fplab.scaled_matmul(x[:8], x[:8].T[:, :4].copy(), spec, acc="bf16")
        return q.values, q.codes, q.scales, r, c, m.c

    serial = [work(*j) for j in jobs]
    results = [None] * (len(jobs) * 3)
    errors = []

    def run(k):
        try:
            for _ in range(2):
                results[k] = work(*jobs[k % len(jobs)])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, res in enumerate(results):
        for got, want in zip(res, serial[k % len(jobs)]):
            if want is None:
                assert got is None
            elif want.dtype.kind == "f":
                same_bits(got, want)
            else:
                assert (got == want).all()


def test_format_lookup_from_threads():
    names = [n for n in fplab.formats()] + ["e5m7", "e3m3:fn", "float8_e4m3fn"]
    out = {}

    def look(n):
        out[n] = fplab.finfo(n).describe()

    threads = [threading.Thread(target=look, args=(n,)) for n in names * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in names:
        assert out[n] == fplab.finfo(n).describe()
