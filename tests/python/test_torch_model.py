"""Issue 36, item 1: the model owns its policy (a module swap, fplab.torch.PolicyLinear). A
policy stays until remove_policy; copy.deepcopy gives a model computing with its own weights and
its own policy state; torch.save(model) and state_dict()/load_state_dict() work; the policy's
state (amax histories, scaler, step, micro-batch counters) is in model.state_dict(), so a
standard checkpoint resumes bit for bit."""
import copy
import io

import pytest

from conftest import same_bits

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fplab.torch")

from test_torch_policy import Toy, data  # noqa: E402


def _train(m, pol, opt, steps, first=0):
    for s in range(first, first + steps):
        x = data(seed=100 + s)
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        pol.end_step(loss)


def test_module_swap_and_remove_policy():
    m = Toy()
    q = m.layers[0].self_attn.q_proj
    w = q.weight
    pol = ft.apply_policy(m, "mxfp8")
    assert isinstance(q, ft.PolicyLinear) and m.layers[0].self_attn.q_proj is q and q.weight is w
    assert ft.applied_policies(m) == [pol]
    assert any(k.endswith("._extra_state") for k in m.state_dict())
    assert ft.remove_policy(m) == 1
    assert type(q) is torch.nn.Linear and ft.applied_policies(m) == []
    assert not any(k.endswith("._extra_state") for k in m.state_dict())


def test_deepcopy_computes_with_its_own_weights_and_state():
    x = data()
    m = Toy()
    pol = ft.apply_policy(m, "fp8-delayed")
    m(x).square().mean().backward()
    pol.end_step(0.0)
    c = copy.deepcopy(m)
    (pc,) = ft.applied_policies(c)
    assert pc is not pol and pc.handle != pol.handle and pc.step == 1
    r = copy.deepcopy(m)  # the reference: a second copy, run from the same state
    with torch.no_grad():
        for p in [*c.parameters(), *r.parameters()]:
            p.mul_(2)
    yc = c(x).detach()
    with torch.no_grad():
        ym = m(x)
    same_bits(yc.numpy(), r(x).detach().numpy())
    assert not torch.equal(yc, ym)
    # their states are their own: a step of the copy does not move the original's
    c(x).square().mean().backward()
    pc.end_step(0.0)
    assert pc.step == 2 and pol.step == 1
    with torch.no_grad():
        same_bits(m(x).numpy(), ym.numpy())


def test_torch_save_model_and_state_dict_round_trip():
    x = data()
    m = Toy()
    ft.apply_policy(m, "mxfp4")
    want = m(x).detach()
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    m2 = torch.load(buf, weights_only=False)
    (p2,) = ft.applied_policies(m2)
    assert p2.name == "mxfp4"
    same_bits(m2(x).detach().numpy(), want.numpy())
    # state_dict into a fresh model under the same policy (weights_only load: the default)
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m3 = Toy(seed=5)
    ft.apply_policy(m3, "mxfp4")
    m3.load_state_dict(torch.load(buf))
    same_bits(m3(x).detach().numpy(), want.numpy())
    # another policy's state is refused
    m4 = Toy(seed=5)
    ft.apply_policy(m4, "mxfp8")
    with pytest.raises(ValueError, match="another policy"):
        m4.load_state_dict(m.state_dict())


def test_fp8_delayed_checkpoint_resumes_bit_for_bit():
    """A standard checkpoint (model and optimizer state dicts, torch.save/torch.load) of an
    fp8-delayed run taken after 2 steps resumes to the weights of the uninterrupted 4-step run:
    the amax histories travel in the model's state dict."""
    m = Toy()
    pol = ft.apply_policy(m, "fp8-delayed")
    opt = ft.PolicyOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2), pol)
    _train(m, pol, opt, 4)
    want = [p.detach().clone() for p in m.parameters()]

    m1 = Toy()
    pol1 = ft.apply_policy(m1, "fp8-delayed")
    opt1 = ft.PolicyOptimizer(torch.optim.AdamW(m1.parameters(), lr=1e-2), pol1)
    _train(m1, pol1, opt1, 2)
    buf = io.BytesIO()
    torch.save({"model": m1.state_dict(), "opt": opt1.state_dict()}, buf)
    del m1, pol1, opt1
    buf.seek(0)
    ck = torch.load(buf)
    m2 = Toy(seed=9)
    pol2 = ft.apply_policy(m2, "fp8-delayed")
    opt2 = ft.PolicyOptimizer(torch.optim.AdamW(m2.parameters(), lr=1e-2), pol2)
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    assert pol2.step == 2
    _train(m2, pol2, opt2, 2, first=2)
    for a, b in zip(m2.parameters(), want):
        same_bits(a.detach().numpy(), b.numpy())


def test_step_line_written_by_the_c_writer(tmp_path):
    """end_step's log line comes from the C writer (fplab._autocast's step_line, the trainer's
    fields and ac_write_json's telemetry), not from Python."""
    import json
    m = Toy()
    log = tmp_path / "log.jsonl"
    with ft.apply_policy(m, "mxfp8", log=str(log)) as pol:
        m(data()).square().mean().backward()
        tel = pol.ctx.json()
        want = pol.ctx.step_line(1, 0.5, 1e-3, float("nan"), 0.0, 0.0, 1.0, False, float("nan"))
        line = pol.end_step(0.5, lr=1e-3)
    assert want.startswith('{"step":1,"loss":0.5,"lr":0.001,"grad_norm":"nan",') and want.endswith(tel + "}")
    written = log.read_text().splitlines()[1]
    assert json.loads(written)["sites"] == line["sites"]
    assert written.split('"tokens_per_s"')[0] == want.split('"tokens_per_s"')[0]
