#!/usr/bin/env python3
"""torch_train_llama.py: the training loop practitioners write, under an fplab precision policy:
a Hugging Face LlamaForCausalLM (a local checkpoint directory, or a config for tests), gradient
accumulation, activation checkpointing, torch.compile, the loss scaler, DDP (torchrun), and the
policy's telemetry in the C trainer's JSON-lines log, which `fplab report OUT` draws
(docs/torch.md, "The practitioners' loop").

    python3 tools/torch_train_llama.py --tiny --data FILE --tokenizer bytes --policy mxfp8 --out OUT
    torchrun --nproc_per_node 2 tools/torch_train_llama.py --model DIR --data FILE --policy mxfp8 --out OUT

Writes OUT/runs/POLICY/seed-S/log.jsonl (rank 0's telemetry) and, at the end, the trained model
(save_pretrained) in OUT/runs/POLICY/seed-S/model; an existing run directory is refused, never
overwritten. Micro-batch g of the run (g = (step * accum + micro) * world + rank) is the same
windows of the token stream whatever the split between processes and accumulation, so 2 ranks x
1 micro-batch and 1 process x 2 micro-batches see the same data. Only fplab.torch's public API.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import fplab.torch as ft
from fplab.torch_eval import EvalError, load_tokens

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Trains a Hugging Face Llama under an fplab precision policy: gradient accumulation, "
        "activation checkpointing, torch.compile, the policy's loss scaler and weight-update rounding, DDP "
        "under torchrun; writes OUT/runs/POLICY/seed-S/log.jsonl (fplab report OUT draws it) and the trained "
        "model beside it. Refuses an existing run directory.")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a local checkpoint directory (save_pretrained's)")
    src.add_argument("--config", help="a LlamaConfig as JSON (a file or inline), random weights")
    src.add_argument("--tiny", action="store_true", help="a tiny random Llama (vocabulary 256: use --tokenizer bytes)")
    ap.add_argument("--data", required=True, help="the training text")
    ap.add_argument("--tokenizer", default="auto", help="auto (the checkpoint's), bytes, or a directory [auto]")
    ap.add_argument("--policy", default="mxfp8", help="a preset or policy file (fplab policy --list) [%(default)s]")
    ap.add_argument("--out", required=True, help="output directory: OUT/runs/POLICY/seed-S/ is created")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4, help="sequences per micro-batch per process [%(default)s]")
    ap.add_argument("--seq", type=int, default=64, help="tokens per sequence [%(default)s]")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches accumulated per step [%(default)s]")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (0: none) [%(default)s]")
    ap.add_argument("--optimizer", default="torch", choices=("torch", "fplab"), help="torch: torch.optim.AdamW; "
                    "fplab: fplab.torch.AdamW, one pass with the policy's weight side [%(default)s]")
    ap.add_argument("--seed", type=int, default=0, help="weights, batches and stochastic rounding [%(default)s]")
    ap.add_argument("--checkpointing", action="store_true", help="activation checkpointing "
                    "(model.gradient_checkpointing_enable, non-reentrant)")
    ap.add_argument("--compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                    help="torch.compile the model (backend: inductor, or aot_eager / eager to trace without code "
                    "generation)")
    ap.add_argument("--telemetry", default="sites", choices=("off", "sites", "layers"))
    ap.add_argument("--no-save", action="store_true", help="do not save the trained model")
    a = ap.parse_args(argv)
    for k in ("steps", "batch", "seq", "accum"):
        if getattr(a, k) < 1:
            ap.error(f"--{k} {getattr(a, k)}: expected at least 1")
    return a


def setup_dist():
    """(rank, world, device) under torchrun (gloo on the CPU, NCCL on GPUs), or (0, 1, device)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if torch.cuda.is_available() else torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        return dist.get_rank(), world, dev
    return 0, 1, dev


def build_model(a):
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(a.seed)
    if a.model:
        if not os.path.isfile(os.path.join(a.model, "config.json")):
            raise EvalError(f"--model {a.model}: no config.json: not a Hugging Face checkpoint directory")
        return AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.tiny:
        cfg = LlamaConfig(**TINY)
    else:
        text = open(a.config).read() if os.path.isfile(a.config) else a.config
        try:
            cfg = LlamaConfig(**json.loads(text))
        except (ValueError, TypeError) as e:
            raise EvalError(f"--config: expected a LlamaConfig as JSON ({e})") from None
    return LlamaForCausalLM(cfg)


def micro_batch(ids, g, a):
    """Micro-batch g of the run: a.batch windows of a.seq + 1 tokens at offsets drawn from (seed, g)."""
    gen = torch.Generator().manual_seed(a.seed * 1000003 + g)
    starts = torch.randint(0, ids.numel() - a.seq - 1, (a.batch,), generator=gen)
    return torch.stack([ids[s:s + a.seq + 1] for s in starts.tolist()])


def train_step(step, model, opt, scaler, ids, a, rank, world, dev):
    """One optimizer step over a.accum micro-batches; returns (mean loss over all ranks, grad norm)."""
    total = torch.zeros((), dtype=torch.float64)
    for micro in range(a.accum):
        batch = micro_batch(ids, (step * a.accum + micro) * world + rank, a).to(dev)
        # DDP reduces the gradients once per step: skip the all-reduce on all but the last micro-batch
        sync = model.no_sync() if world > 1 and micro < a.accum - 1 else _nullctx()
        with sync:
            logits = model(input_ids=batch[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)) / a.accum
            scaler.scale(loss).backward()
        total += loss.detach().double().cpu()
    scaler.unscale_(opt)
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
    scaler.step(opt)  # skipped when a gradient is inf/NaN
    scaler.update()
    opt.zero_grad(set_to_none=True)
    if world > 1:
        dist.all_reduce(total)
        total /= world
    return total.item(), gnorm.item()


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv=None):
    a = parse_args(argv)
    rank, world, dev = setup_dist()
    run = os.path.join(a.out, "runs", os.path.splitext(os.path.basename(a.policy))[0], f"seed-{a.seed}")
    try:
        if os.path.exists(run):
            raise EvalError(f"--out {a.out}: {run} exists; choose another --out (runs are never overwritten)")
        hf = build_model(a).float().to(dev).train()
        ids, _ = load_tokens(a.data, a.tokenizer, a.model, hf.config.vocab_size)
        if ids.numel() < a.seq + 2:
            raise EvalError(f"--data {a.data}: {ids.numel()} tokens, fewer than --seq {a.seq} + 2")
        try:
            ft.policy_text(a.policy)
        except ValueError as e:
            raise EvalError(f"--policy {a.policy}: {e}") from None
    except EvalError as e:
        print(f"torch_train_llama: {e}", file=sys.stderr)
        return 2
    if world > 1:
        dist.barrier()  # every rank checked the run directory before rank 0 creates it
    if rank == 0:
        os.makedirs(run)
    if a.checkpointing:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # dp_group: the ranks' stochastic-rounding keys continue the micro-batches' (a * ranks + rank)
    # and delayed scaling's amax is the largest over the ranks, so R ranks x A micro-batches compute
    # what 1 process x R*A micro-batches does
    pol = ft.apply_policy(hf, a.policy, seed=a.seed, telemetry=a.telemetry,
                          log=os.path.join(run, "log.jsonl") if rank == 0 else None,
                          dp_group=True if world > 1 else None)
    adamw = ft.AdamW if a.optimizer == "fplab" else torch.optim.AdamW
    opt = ft.PolicyOptimizer(adamw(hf.parameters(), lr=a.lr), pol)
    scaler = ft.GradScaler(pol)
    model = hf
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    if a.compile:
        model = torch.compile(model, backend=a.compile)
    tokens = a.accum * a.batch * a.seq * world
    if rank == 0:
        print(f"torch_train_llama: {a.model or ('tiny' if a.tiny else 'config')}, "
              f"{sum(p.numel() for p in hf.parameters())} parameters; policy {pol.name}; {world} process(es) x "
              f"{a.accum} micro-batches x {a.batch} x {a.seq} tokens; checkpointing {'on' if a.checkpointing else 'off'}, "
              f"compile {a.compile or 'off'}; {dev}; run {run}", flush=True)
    t0 = time.monotonic()
    for step in range(a.steps):
        t = time.monotonic()
        loss, gnorm = train_step(step, model, opt, scaler, ids, a, rank, world, dev)
        line = pol.end_step(loss, lr=a.lr, grad_norm=gnorm, tokens=tokens)
        if rank == 0:
            dt = time.monotonic() - t
            print(f"step {step + 1}/{a.steps}: loss {loss:.6f}, grad norm {gnorm:.4g}, loss scale "
                  f"{line.get('loss_scale', 1)}, skipped {line.get('skipped', 0)}, {1e3 * dt:.0f} ms, "
                  f"{tokens / dt:.0f} tokens/s", flush=True)
    pol.remove()  # writes the log's end line
    if rank == 0:
        if not a.no_save:
            hf.save_pretrained(os.path.join(run, "model"))
        print(f"torch_train_llama: {a.steps} steps in {time.monotonic() - t0:.1f} s; log {run}/log.jsonl"
              f"{'' if a.no_save else f', model {run}/model'}; fplab report {a.out} draws it", flush=True)
    if world > 1:
        # gloo's worker threads release a finished collective's tensors under the GIL, which this
        # thread holds until it waits: a rank that exits right after its last all-reduce can reach
        # interpreter shutdown first and abort (pytorch/pytorch#190489); the barrier waits without
        # it, so they finish first. A rank still aborted in that teardown after the barrier (1
        # run in about 30), so a rank leaves without it, its files closed (the log by
        # pol.remove(), the model by save_pretrained)
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
