"""Issue 36, item 4: beyond one process (gloo on the CPU, ranks spawned by torch.multiprocessing).
DDP with 2 ranks x 1 micro-batch gives the gradients and, through a PolicyOptimizer, the weights
of 1 rank x 2 accumulated micro-batches bit for bit under every preset without state (stochastic
rounding keyed by micro-batch a * ranks + rank, as the C trainer's data-parallel runs; the
update's own draws, pure-bf16-sr's, keyed as micro-batch 0 on every rank); under delayed scaling
the amax histories are all-reduced (MAX) at each end_step, so the ranks keep equal scales.
FSDP2 (fully_shard) and accelerate's Accelerator.prepare train a model under a policy."""
import os
import socket
import sys

import pytest

from conftest import same_bits

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fplab.torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

from test_torch_policy import Toy, data  # noqa: E402

STATELESS = ["fp32", "bf16-amp", "fp16-amp", "pure-bf16-sr", "mxfp8", "mxfp4", "nvfp4"]
STEPS = 2


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank, world, port):
    """Gloo over two processes. A worker ends with a barrier: gloo's threads release a finished
    collective's tensors under the GIL, which the worker holds until it waits, and a process that
    exits right after its last collective can reach interpreter shutdown first and abort
    ("terminate called without an active exception", pytorch/pytorch#190489). That still
    happened after the barrier (1 run in about 30), so a worker that succeeded then leaves
    without the interpreter's teardown (_leave)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def _leave():
    """A worker's end after its work succeeded and its files are closed: no interpreter teardown,
    in which a thread of gloo's or DDP's can still abort the process (see _init). A worker that
    raised does not get here: mp.spawn reports its exception."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _batch(step, micro):
    return data(n=16, seed=1000 + 10 * step + micro)


def _ddp_worker(rank, world, port, presets, out):
    _init(rank, world, port)
    try:
        res = {}
        for preset in presets:
            m = Toy(layers=1)
            pol = ft.apply_policy(m, preset, dp_group=True)
            d = torch.nn.parallel.DistributedDataParallel(m)
            opt = ft.PolicyOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), pol)
            grads = []
            for step in range(STEPS):
                d(_batch(step, rank)).square().mean().backward()
                grads.append([p.grad.clone() for p in m.parameters()])
                opt.step()
                opt.zero_grad()
                pol.end_step(0.0)
            hist = pol.ctx.state() if preset == "fp8-delayed" else None
            res[preset] = (grads, [p.detach().clone() for p in m.parameters()], hist)
        if rank == 0 or "fp8-delayed" in presets:
            torch.save(res, f"{out}.{rank}")
        dist.barrier()  # see _init
    finally:
        dist.destroy_process_group()
    _leave()


def _accumulated(preset):
    """1 rank, 2 micro-batches accumulated, the gradient averaged as DDP averages it."""
    torch.set_num_threads(1)
    m = Toy(layers=1)
    pol = ft.apply_policy(m, preset)
    opt = ft.PolicyOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), pol)
    grads = []
    for step in range(STEPS):
        for micro in range(2):
            m(_batch(step, micro)).square().mean().backward()
        with torch.no_grad():
            for p in m.parameters():
                p.grad.div_(2)
        grads.append([p.grad.clone() for p in m.parameters()])
        opt.step()
        opt.zero_grad()
        pol.end_step(0.0)
    return grads, [p.detach().clone() for p in m.parameters()]


def test_ddp_two_ranks_equal_two_accumulated_micro_batches(tmp_path):
    out = str(tmp_path / "ddp")
    mp.spawn(_ddp_worker, args=(2, _port(), STATELESS + ["fp8-delayed"], out), nprocs=2, join=True)
    r0, r1 = torch.load(f"{out}.0"), torch.load(f"{out}.1")
    for preset in STATELESS:
        grads, weights = _accumulated(preset)
        for step, (gs, want) in enumerate(zip(r0[preset][0], grads)):
            for a, b in zip(gs, want):
                same_bits(a.numpy(), b.numpy(), f"{preset}: step {step}'s gradients")
        for a, b in zip(r0[preset][1], weights):  # the update (pure-bf16-sr: stochastic) too
            same_bits(a.numpy(), b.numpy(), f"{preset}: the weights after {STEPS} steps")
    # delayed scaling: the histories are the ranks' MAX, equal on both ranks
    assert r0["fp8-delayed"][2] == r1["fp8-delayed"][2]


def _fsdp_worker(rank, world, port, out):
    _init(rank, world, port)
    try:
        from torch.distributed.fsdp import fully_shard
        m = Toy(layers=1)
        pol = ft.apply_policy(m, "mxfp8", dp_group=True)
        for layer in m.layers:
            fully_shard(layer)
        fully_shard(m)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses = []
        for step in range(STEPS):
            loss = m(_batch(step, rank)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            pol.end_step(loss)
            losses.append(loss.item())
        tel = pol.telemetry()
        if rank == 0:
            torch.save((losses, tel), out)
        dist.barrier()  # see _init
    finally:
        dist.destroy_process_group()
    _leave()


def test_fsdp2_trains_under_a_policy(tmp_path):
    out = str(tmp_path / "fsdp")
    mp.spawn(_fsdp_worker, args=(2, _port(), out), nprocs=2, join=True)
    losses, tel = torch.load(out)
    assert all(torch.isfinite(torch.tensor(losses))) and losses[1] < losses[0]
    assert tel["sites"]["mlp.down.in"]["n"] > 0


def test_accelerate_prepare_trains_under_a_policy():
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    m = Toy(layers=1)
    pol = ft.apply_policy(m, "mxfp8")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    pm, popt = acc.prepare(m, opt)
    losses = []
    for step in range(STEPS):
        loss = pm(_batch(step, 0)).square().mean()
        acc.backward(loss)
        popt.step()
        popt.zero_grad()
        pol.end_step(loss)
        losses.append(loss.item())
    assert losses[1] < losses[0]
    assert ft.applied_policies(acc.unwrap_model(pm)) == [pol]
