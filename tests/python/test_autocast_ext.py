"""fplab._autocast's operands of a projection's products (autocast.h): keyword arguments, the
casts autocast reuses reported as a dict, and the values always those of a fresh cast. NumPy
only (no torch): the same calls fplab.torch makes."""
import numpy as np
import pytest

from fplab import _autocast

# stochastic rounding on the inputs: a stale reuse of wgrad's cast of x returns other draws
POLICY = "name t\nsite *.in bf16 sr\nsite *.grad bf16\n"
QKV, O = 0, 1
QKV_IN, O_GRAD = 0, 5
N, IC, OC = 32, 16, 8


def ctx(policy=POLICY):
    return _autocast.Context(policy, "test", n_layers=2, seed=1)


def fresh(site, layer, x, k_rows, step=0, micro=0, policy=POLICY):
    """x cast for site by plain ac_cast in a context of its own (the reference)."""
    c = ctx(policy)
    c.begin_step(step)
    c.begin_micro(micro)
    out = np.empty_like(x)
    c.cast(out=out, x=x, site=site, layer=layer, rows=x.shape[0], cols=x.shape[1], k_rows=k_rows, count=False)
    return out


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def wgrad(c, dout, x, layer=0):
    a, b = np.empty_like(dout), np.empty_like(x)
    r = c.wgrad_operands(a=a, b=b, dout=dout, x=x, proj=QKV, layer=layer, N=N, IC=IC, OC=OC)
    return a, b, r


def test_wgrad_reuses_its_cast_of_x_only_while_it_holds():
    c = ctx()
    x, dout = rand(N, IC, seed=1), rand(N, OC, seed=2)
    xin = np.empty_like(x)
    c.fprop_input(out=xin, x=x, proj=QKV, layer=0, N=N, IC=IC)
    assert np.array_equal(xin.view(np.uint32), fresh(QKV_IN, 0, x, False).view(np.uint32))
    seen = []
    for micro in (0, 0, 1, 1):
        c.begin_micro(micro)
        _, b, r = wgrad(c, dout, x)
        seen.append(r["wgrad_x"])
        assert np.array_equal(b.view(np.uint32), fresh(QKV_IN, 0, x, True, micro=micro).view(np.uint32))
    assert seen == [False, True, False, True]
    _, b, r = wgrad(c, dout, x, layer=1)
    assert not r["wgrad_x"]
    assert np.array_equal(b.view(np.uint32), fresh(QKV_IN, 1, x, True, micro=1).view(np.uint32))


def test_wgrad_takes_dgrad_cast_of_dout_where_orientations_agree():
    c = ctx()
    x, dout, w = rand(N, IC, seed=3), rand(N, OC, seed=4), rand(OC, IC, seed=5)
    da, db = np.empty_like(dout), np.empty_like(w)
    r = c.dgrad_operands(a=da, b=db, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC)
    assert r == {"input": False, "wgrad_x": False, "dgrad_dout": False, "fprop_w": False}
    a, b = np.empty_like(dout), np.empty_like(x)
    r = c.wgrad_operands(a=a, b=b, dout=dout, x=x, proj=O, layer=0, N=N, IC=IC, OC=OC)
    assert r["dgrad_dout"]
    assert np.array_equal(a.view(np.uint32), fresh(O_GRAD, 0, dout, True).view(np.uint32))


def test_operand_views_are_the_copies_without_copying():
    """a=b=None: the operands as views of autocast's buffers, bit for bit the copies a=, b= get,
    and None for an operand the policy does not cast (here W: no .w rule), which is the input."""
    x, dout, w = rand(N, IC, seed=6), rand(N, OC, seed=7), rand(OC, IC, seed=8)
    got = []
    for views in (False, True):
        c = ctx()
        if views:
            r, va, vb = c.dgrad_operands(a=None, b=None, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC)
            assert vb is None  # W is not cast: the caller's own input
            got.append((r, np.frombuffer(va, dtype=np.float32).reshape(N, OC).copy(), w))
            r, va, vb = c.wgrad_operands(a=None, b=None, dout=dout, x=x, proj=O, layer=0, N=N, IC=IC, OC=OC)
            got.append((r, np.frombuffer(va, dtype=np.float32).reshape(N, OC).copy(),
                        np.frombuffer(vb, dtype=np.float32).reshape(N, IC).copy()))
        else:
            da, db = np.empty_like(dout), np.empty_like(w)
            got.append((c.dgrad_operands(a=da, b=db, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC), da, db))
            a, b = np.empty_like(dout), np.empty_like(x)
            got.append((c.wgrad_operands(a=a, b=b, dout=dout, x=x, proj=O, layer=0, N=N, IC=IC, OC=OC), a, b))
    for (r1, a1, b1), (r2, a2, b2) in zip(got[:2], got[2:]):
        assert r1 == r2
        assert np.array_equal(a1.view(np.uint32), a2.view(np.uint32))
        assert np.array_equal(b1.view(np.uint32), b2.view(np.uint32))
    assert not np.array_equal(got[0][1], dout)  # dout was cast (bf16)


@pytest.mark.parametrize("views", [False, True])
def test_dgrad_takes_the_forward_cast_of_w_where_orientations_agree(views):
    """w_cast: the forward's cast of W, which dgrad takes where W's rule casts alike both ways
    (bf16: the very array, reported as fprop_w) and casts again where it does not (1x32 MX
    blocks); the operand is the fresh cast along OC either way. A w_cast of the wrong size is
    refused."""
    dout, w = rand(N, OC, seed=9), rand(OC, IC, seed=10)
    W_SITE = 4  # o.w
    for rule, takes in (("bf16", True), ("e4m3 mx", False)):
        pol = f"name t\nsite *.w {rule}\nsite *.grad bf16\n"
        c = ctx(pol)
        w_cast = fresh(W_SITE, 0, w, False, policy=pol)
        if views:
            r, _, vb = c.dgrad_operands(a=None, b=None, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC,
                                        w_cast=w_cast)
            b = np.frombuffer(vb, dtype=np.float32).reshape(OC, IC)
            assert np.shares_memory(b, w_cast) == takes
        else:
            b = np.empty_like(w)
            r = c.dgrad_operands(a=np.empty_like(dout), b=b, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC,
                                 w_cast=w_cast)
        assert r["fprop_w"] == takes, rule
        assert np.array_equal(b.view(np.uint32), fresh(W_SITE, 0, w, True, policy=pol).view(np.uint32)), rule
        with pytest.raises(TypeError, match="w_cast"):
            c.dgrad_operands(a=None, b=None, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC, w_cast=w_cast[:2])


def test_refusals():
    c = ctx("name t\nsite *.in e4m3\nsite *.grad e5m2\naccumulator m13 *.wgrad\n")
    x, dout = rand(N, IC), rand(N, OC)
    with pytest.raises(ValueError, match="matmul_emulated"):
        wgrad(c, dout, x)
    with pytest.raises(ValueError, match="projection"):
        c.wgrad_operands(a=dout.copy(), b=x.copy(), dout=dout, x=x, proj=9, layer=0, N=N, IC=IC, OC=OC)
    with pytest.raises(TypeError):
        c.wgrad_operands(dout.copy(), x.copy(), dout, x, QKV, 0, N, IC, OC)  # keywords only


DGRAD, WGRAD = 1, 2


def test_wgrad_product_is_the_manual_one():
    """ctx.wgrad (autocast's operands: the Hadamard rotation, the casts, the emulated accumulator)
    equals what fplab.torch did by hand: rotate both operands, then matmul_emulated."""
    text = _autocast.policy_text("nvfp4") + "accumulator m13:promote=128 *.wgrad\n"
    x, dout = rand(N, IC, seed=10), rand(N, OC, seed=11)
    c = _autocast.Context(text, "test", n_layers=2, seed=3)
    dw = np.zeros((OC, IC), np.float32)
    r1 = c.wgrad(out=dw, dout=dout, x=x, proj=QKV, layer=0, N=N, IC=IC, OC=OC)
    dw2 = np.zeros((OC, IC), np.float32)
    r2 = c.wgrad(out=dw2, dout=dout, x=x, proj=QKV, layer=0, N=N, IC=IC, OC=OC)
    assert not r1["wgrad_x"] and not r2["wgrad_x"]  # emulated operands are cast afresh
    m = _autocast.Context(text, "test", n_layers=2, seed=3)
    xh, gh = np.empty_like(x), np.empty_like(dout)
    m.hadamard(xh, x, N, IC)
    m.hadamard(gh, dout, N, OC)
    ref = np.zeros((OC, IC), np.float32)
    m.matmul_emulated(QKV, WGRAD, ref, gh, 2, N, OC, True, False, xh, QKV_IN, N, IC, True, False, 0, OC, IC, N, True)
    assert np.array_equal(dw.view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(dw2.view(np.uint32), ref.view(np.uint32))


def test_dgrad_product_sets_or_adds_the_operands_product():
    """ctx.dgrad: dgrad_operands' operands multiplied in float32 (out = dout W); accumulate=True
    adds to what out holds; both bit for bit against dgrad_operands plus the library's matmul."""
    x, dout, w = rand(N, IC, seed=20), rand(N, OC, seed=21), rand(OC, IC, seed=22)
    c, m = ctx(), ctx()
    dx = np.zeros((N, IC), np.float32)
    c.dgrad(out=dx, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC)
    da, db = np.empty_like(dout), np.empty_like(w)
    m.dgrad_operands(a=da, b=db, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC)
    ref = np.zeros((N, IC), np.float32)
    m.matmul(pass_=DGRAD, out=ref, a=da, b=db, N=N, IC=IC, OC=OC, accumulate=False)
    assert np.array_equal(dx.view(np.uint32), ref.view(np.uint32))
    c.dgrad(out=dx, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC, accumulate=True)
    m.matmul(pass_=DGRAD, out=ref, a=da, b=db, N=N, IC=IC, OC=OC, accumulate=True)
    assert np.array_equal(dx.view(np.uint32), ref.view(np.uint32))
    with pytest.raises(TypeError):
        c.dgrad(out=dx, dout=dout, w=w, proj=O, layer=0, N=N, IC=IC, OC=OC, accumulate=True, bogus=1)
