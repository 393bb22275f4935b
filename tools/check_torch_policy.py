#!/usr/bin/env python3
"""check_torch_policy.py: fplab.torch.apply_policy on Hugging Face's LlamaForCausalLM against the C
trainer, trained for STEPS steps from the same weights and batches under each preset; writes
tests/fixtures/torch_policy_check.json (atomically), which `make test` reads without PyTorch.

The C side is build/tools/train_policy_dump (the C trainer's step: forward, backward, grads
site, unscale, loss scaler, AdamW, update rounding, adam sites; one micro-batch, no clipping,
constant lr) on the model, weights and batches of tools/dump_llama_setup.h. The PyTorch side is
LlamaForCausalLM (float32, eager attention) with the same weights (tools/check_llama_torch.py's
hf_model), under fplab.torch.apply_policy + GradScaler + PolicyOptimizer(torch.optim.AdamW
(foreach=False)), the loop of docs/torch.md. Compared:

  casts    every cast of step 1, in the C trainer's order per (site, layer, orientation). HF's
           q/k projections hold each head in rotate_half's order; apply_policy's out_order
           (fplab.torch.llama_order) casts them in the C trainer's interleaved order, so that each
           cast sees the C trainer's tensor element for element, block scales and the
           stochastic-rounding draws (keyed by position) included. Where the input of a cast is
           bitwise equal on both sides the values must be bitwise equal (hard failure otherwise);
           where the inputs differ (HF's RMSNorm, RoPE and softmax round differently from
           fplab's, so activations differ in their last bits) the fraction of equal values is
           reported, and the fraction of flipped values: moved by more than 2^-16 relative, a
           step of the format (fp16's is 2^-10 or more) rather than a float32 last bit (a scale
           that differs in its last bit, as NVFP4's float32 tensor scale, moves every value it
           scales by that much). In-place casts (grads, master, adam) are skipped.
  counts   the step-1 telemetry of every site: n and the overflow, underflow, subnormal and NaN
           counts (the logs' fractions times n), equal up to the site's slack. With the same keys,
           a count can move only where a value moves by a step of the format (flipped, above) or
           where an input is zero on one side only (underflow counts nonzero inputs that round to
           zero: a gradient element that cancels to exactly 0 in one summation order and to 1e-12
           in the other moves it with both values 0); the slack of a site is the number of such
           elements in its compared casts (0 for in-place sites, which are not compared). This
           machine's CPU decides how often that happens: on an AMD EPYC (Zen 5), nvfp4's
           mlp.gate_up.grad underflow differs by 2 with 2 such zeros, on the Xeon by none.
           Stochastic rounding keyed to other elements moves the underflow and subnormal counts of
           every SR site by about sqrt(n) (nvfp4 without out_order: 4 of 15 sites, by up to 60).
           A preset fails on any difference past the slack; the report names the site and both
           counts.
  grads    step 1's gradients (loss-scaled, before the grads site), relative 2-norm difference
           (reported; fp32's is the reordering, 6e-7; a key mismatch shows here first: nvfp4
           without out_order, 0.21).
  losses   every step's loss within TOL(preset, step) of the C trainer's.

The tolerance. Two float32 implementations of the same training differ by reordering: for one
forward and backward of this model check_llama_torch.py bounds it at EPS_REORDER = 20 sqrt(K)
2^-24 = 1.2e-5 relative (K = 96, rounding errors of random sign), and the weights after one
AdamW step differ in their last bits (measured here: weights1_max_ulps; more where AdamW's first
step, lr g / (|g| + eps), meets a gradient near eps). How far a loss curve moves from such a
difference depends on the policy: a cast whose input sits at a rounding boundary turns a
last-bit change into a format ulp (bf16: 2^-8, e2m1: 2^-1), after which the runs part as two
runs of the same training with different noise do, and AdamW's early steps, of size lr whatever
the gradient's size, carry every flip into the weights. So it is measured on the C trainer
itself: the run again with every weight before step 1 and after every AdamW step multiplied by
1 + eps (2u - 1), for NOISE_RUNS noise seeds (train_policy_dump --noise), with eps the larger of
EPS_REORDER and the largest step-1 weight difference (weights1_max_ulps x 2^-23), at most 1e-3.
The floor: the two sides' activations differ by up to EPS_REORDER at every step (RMSNorm, RoPE,
softmax), while noise of eps on the weights moves a projection's output by about eps / sqrt(K);
with the earlier floor of 2 ulps, mxfp4 (weights1_max_ulps 2) had no flip in its noise runs and
a tolerance of 4e-4 at step 14, where the two sides, bitwise equal in every step-1 cast, had
parted by 0.16 after a flip at step 10.
TOL(preset, step) = 4 x the largest |loss - unperturbed loss| of those runs up to that step, at
least 1e-4 x the loss (check_llama_torch's tolerance for one forward). A preset passes when every
step is inside, every equal-input cast is bitwise equal and the step-1 counts are equal up to
their slack. Read the late steps of the quantized presets as "the same distribution", not as
agreement: after the first flip the C trainer's own noise runs part by as much. (Gradient noise
was tried first and is too weak a model: AdamW's first step is lr sign(g), blind to relative
changes of g.)

Usage: python3 tools/check_torch_policy.py [--presets fp32,bf16-amp,...] [--steps 50]
       [--dump build/tools/train_policy_dump] [--no-fixture]
Needs numpy, torch, transformers and the fplab package (make test-torch's venv has them but
transformers: pip install transformers).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_llama_torch as clt  # noqa: E402  (hf_model, from_hf)

import fplab.torch as ft  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "torch_policy_check.json")
PRESETS = ["fp32", "bf16-amp", "mxfp8", "fp16-amp", "pure-bf16-sr", "fp8-delayed", "mxfp4", "nvfp4"]
EPS_REORDER = 1.2e-5
NOISE_RUNS = 3
INPLACE = {"grads", "master", "adam.m", "adam.v"}


def run_c(dump, policy, out, steps, lr, noise=0.0, noise_seed=0):
    cmd = [dump, "--policy", policy, "--out", out, "--steps", str(steps), "--lr", repr(lr)]
    if noise:
        cmd += ["--noise", repr(noise), "--noise-seed", str(noise_seed)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return [json.loads(_nan(s)) for s in open(os.path.join(out, "log.jsonl"))]


def _nan(s):
    return s.replace(":nan", ':"nan"').replace(":inf", ':"inf"').replace(":-inf", ':"-inf"')


def load(out):
    man = json.load(open(os.path.join(out, "manifest.json")))
    if man.get("format") != "fplab-train-policy-dump" or man.get("version") != 1:
        sys.exit(f"check_torch_policy: {out}/manifest.json: not a train_policy_dump manifest of version 1")
    arrays = {k: np.fromfile(os.path.join(out, f["file"]), dtype=np.dtype(f["dtype"])).reshape(f["shape"])
              for k, f in man["files"].items()}
    casts = [json.loads(s) for s in open(os.path.join(out, "casts.jsonl"))]
    return man, arrays, casts


def run_torch(man, arrays, policy):
    c = man["config"]
    model = clt.hf_model(man, arrays).float().train()
    # q and k cast in the C trainer's interleaved RoPE layout (HF holds them in rotate_half's), so
    # that block scales and stochastic-rounding draws fall on the same elements on both sides;
    # products="fplab": the float32 products in the C trainer's order of summation
    pol = ft.apply_policy(model, policy, seed=man["seed"], n_layers=c["n_layers"],
                          out_order=ft.llama_order(model.config), products="fplab")
    a = man["adamw"]
    # the update's stochastic rounding (pure-bf16-sr) in the C trainer's buffer order too
    opt = ft.PolicyOptimizer(torch.optim.AdamW(model.parameters(), lr=man["lr"], betas=(a["beta1"], a["beta2"]),
                                               eps=a["eps"], weight_decay=a["weight_decay"], foreach=False), pol,
                             flat_order=c_order(man, model))
    scaler = ft.GradScaler(pol)
    V = c["vocab_size"]
    lines = []
    pol.record = []
    for step in range(man["steps"]):
        x = torch.from_numpy(arrays["tokens"][step].astype(np.int64))
        y = torch.from_numpy(arrays["targets"][step].astype(np.int64))
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=-1)
        scaler.scale(loss).backward()
        if step == 0:  # step 1's gradients, loss-scaled and uncast, in fplab's layout
            g1 = c_layout(man, model, "grad")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        lines.append(pol.end_step(loss))
        if step == 0:
            rec, pol.record = pol.record, None
            w1 = c_layout(man, model, "data")
    pol.remove()
    return lines, rec, g1, w1


def c_order(man, model):
    """The C trainer's parameter buffer as indices into the concatenation of model.parameters():
    c_layout of a model whose every element holds its own index (exact in float32 here)."""
    ps = list(model.parameters())
    saved = [p.detach().clone() for p in ps]
    with torch.no_grad():
        o = 0
        for p in ps:
            p.copy_(torch.arange(o, o + p.numel(), dtype=torch.float32).view_as(p))
            o += p.numel()
        assert o < 2 ** 24
        order = c_layout(man, model, "data").astype(np.int64)
        for p, v in zip(ps, saved):
            p.copy_(v)
    return torch.from_numpy(order)


def c_layout(man, model, what):
    """The model's parameters (what="data") or gradients ("grad") as fplab's flat buffer (float64)."""
    c = man["config"]
    nh, nkv, L = c["n_heads"], c["n_kv_heads"], c["n_layers"]
    g = {n: getattr(p, what).detach().numpy().astype(np.float64) for n, p in model.named_parameters()}
    lay = lambda key, f=lambda x: x: np.stack([f(g[f"model.layers.{l}.{key}.weight"]) for l in range(L)])
    out = {"tok_emb": g["model.embed_tokens.weight"], "layers.attn_norm": lay("input_layernorm"),
           "layers.wq": lay("self_attn.q_proj", lambda x: clt.from_hf(x, nh)),
           "layers.wk": lay("self_attn.k_proj", lambda x: clt.from_hf(x, nkv)),
           "layers.wv": lay("self_attn.v_proj"), "layers.wo": lay("self_attn.o_proj"),
           "layers.mlp_norm": lay("post_attention_layernorm"), "layers.w_gate": lay("mlp.gate_proj"),
           "layers.w_down": lay("mlp.down_proj"), "layers.w_up": lay("mlp.up_proj"),
           "final_norm": g["model.norm.weight"]}
    if not c["tied"]:
        out["lm_head"] = g["lm_head.weight"]
    return np.concatenate([out[t["name"]].reshape(-1) for t in man["tensors"]])


def compare_casts(man, arrays, ccasts, trec):
    data = arrays["casts"]
    cgroups, tgroups = {}, {}
    for e in ccasts:
        if e["site"] in INPLACE:
            continue
        r, k = e["rows"], e["cols"]
        x = data[e["x_offset"]:e["x_offset"] + r * k].reshape(r, k)
        y = data[e["y_offset"]:e["y_offset"] + r * k].reshape(r, k)
        cgroups.setdefault((e["site"], e["layer"], e["k_rows"]), []).append((x, y))
    for site, layer, k_rows, _count, x, y in trec:
        if site in INPLACE:
            continue
        tgroups.setdefault((site, layer, k_rows), []).append((x.numpy(), y.numpy()))
    out = {"tensors": 0, "bitwise_inputs": 0, "bitwise_values_where_inputs_equal": 0, "failures": [],
           "values_equal_fraction_where_inputs_differ": None, "values_flipped_fraction_where_inputs_differ": None,
           "structure": "same"}
    if set(cgroups) != set(tgroups) or any(len(cgroups[k]) != len(tgroups[k]) for k in cgroups):
        out["structure"] = {"c_only": sorted(map(str, set(cgroups) - set(tgroups))),
                            "torch_only": sorted(map(str, set(tgroups) - set(cgroups))),
                            "counts": {str(k): (len(cgroups.get(k, [])), len(tgroups.get(k, [])))
                                       for k in set(cgroups) | set(tgroups)
                                       if len(cgroups.get(k, [])) != len(tgroups.get(k, []))}}
    eq = tot = flipped = 0
    slack = out["count_slack"] = {}  # per site: values flipped, and inputs zero on one side only
    for key in sorted(set(cgroups) & set(tgroups), key=str):
        for i, ((cx, cy), (tx, ty)) in enumerate(zip(cgroups[key], tgroups[key])):
            out["tensors"] += 1
            if cx.shape != tx.shape:
                out["failures"].append(f"{key} #{i}: shape C {cx.shape}, torch {tx.shape}")
                continue
            same_in = np.array_equal(cx.view(np.uint32), tx.view(np.uint32))
            same_out = (cy.view(np.uint32) == ty.view(np.uint32)) | (np.isnan(cy) & np.isnan(ty))
            if same_in:
                out["bitwise_inputs"] += 1
                if same_out.all():
                    out["bitwise_values_where_inputs_equal"] += 1
                else:
                    out["failures"].append(f"{key} #{i}: equal inputs, {int((~same_out).sum())} values differ")
            else:
                eq += int(same_out.sum())
                tot += same_out.size
                moved = np.abs(cy.astype(np.float64) - ty) > 2.0 ** -16 * np.maximum(np.abs(cy), np.abs(ty))
                flipped += int((moved & ~same_out).sum())
                slack[key[0]] = (slack.get(key[0], 0) + int((moved & ~same_out).sum()) +
                                 int(((cx == 0) != (tx == 0)).sum()))
    if tot:
        out["values_equal_fraction_where_inputs_differ"] = eq / tot
        out["values_flipped_fraction_where_inputs_differ"] = flipped / tot
    return out


def _fmt(x):
    return "-" if x is None else f"{x:.3g}"


def machine():
    """The CPU this ran on and OpenBLAS's kernel choice: both move the C trainer's float32 sums,
    and so the numbers of a result (not whether it passes)."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            name = next((l.split(":", 1)[1].strip() for l in fh if l.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}"


def within_slack(c, t, slack):
    """Two sites' step-1 counts: the same n, every count within slack of the other's."""
    if c is None or t is None or c["n"] != t["n"]:
        return False
    return all(abs(c[k] - t[k]) <= slack for k in ("overflow", "underflow", "subnormal", "nan"))


def counts(line):
    res = {}
    for site, t in line.get("sites", {}).items():
        n = t["n"]
        res[site] = {"n": n, **{k: int(round(float(t[k]) * n)) for k in ("overflow", "underflow", "subnormal", "nan")}}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dump", default=os.path.join(ROOT, "build", "tools", "train_policy_dump"))
    ap.add_argument("--no-fixture", action="store_true")
    args = ap.parse_args()
    results, ok_all = {}, True
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets.split(","):
            out = os.path.join(tmp, preset)
            cl = run_c(args.dump, preset, out, args.steps, args.lr)
            closs = np.array([float(l["loss"]) for l in cl])
            man, arrays, ccasts = load(out)
            tl, trec, g1, w1 = run_torch(man, arrays, preset)
            gc = arrays["grads1"].astype(np.float64)
            gdiff = float(np.linalg.norm(g1 - gc) / np.linalg.norm(gc))
            wc32 = arrays["params1"]
            wc = wc32.astype(np.float64)
            # the step-1 weight difference in float32 ulps of each weight (its largest), and noise
            # of that many ulps: eps = ulps x 2^-23 relative (at least EPS_REORDER)
            # (weights below 1e-3 of the largest are left out: a weight an update took to about 0
            # has a tiny ulp, and one of them would set the noise for all)
            big = np.abs(wc) >= 1e-3 * np.abs(wc).max()
            wdiff = float(np.max(np.abs(w1 - wc)[big] / np.spacing(np.abs(wc32[big])).astype(np.float64)))
            eps = min(max(EPS_REORDER, wdiff * 2.0 ** -23), 1e-3)
            spread = np.zeros(args.steps)
            for s in range(1, NOISE_RUNS + 1):
                nl = run_c(args.dump, preset, os.path.join(tmp, f"{preset}-n{s}"), args.steps, args.lr, eps, s)
                spread = np.maximum(spread, np.abs(np.array([float(l["loss"]) for l in nl]) - closs))
            tol = np.maximum(4 * np.maximum.accumulate(spread), 1e-4 * np.abs(closs))
            tloss = np.array([float(l["loss"]) for l in tl])
            diff = np.abs(tloss - closs)
            cc = compare_casts(man, arrays, ccasts, trec)
            c1, t1 = counts(cl[0]), counts(tl[0])
            moves = {s: {"c": c1.get(s), "torch": t1.get(s), "slack": cc["count_slack"].get(s, 0)}
                     for s in set(c1) | set(t1) if c1.get(s) != t1.get(s)}
            count_diff = {s: d for s, d in moves.items() if not within_slack(d["c"], d["torch"], d["slack"])}
            ok = (bool((diff <= tol).all()) and not count_diff and not cc["failures"] and cc["structure"] == "same")
            ok_all &= ok
            worst = int(np.argmax(diff / tol))
            results[preset] = {
                "ok": ok, "machine": machine(), "steps": args.steps, "grad1_rel_diff": gdiff,
                "weights1_max_ulps": wdiff, "noise_eps": eps, "loss_c_first_last": [closs[0], closs[-1]],
                "loss_torch_first_last": [tloss[0], tloss[-1]], "max_abs_loss_diff": float(diff.max()),
                "worst_step": worst + 1, "diff_at_worst": float(diff[worst]), "tol_at_worst": float(tol[worst]),
                "tol_last": float(tol[-1]), "skipped_c": int(sum(l["skipped"] for l in cl)),
                "skipped_torch": int(sum(l["skipped"] for l in tl)), "casts": cc,
                "step1_counts_equal_sites": len(set(c1) | set(t1)) - len(moves), "step1_count_diffs": count_diff,
                "step1_count_moves_within_slack": {s: d for s, d in moves.items() if s not in count_diff},
            }
            r = results[preset]
            print(f"{preset:13s} {'ok  ' if ok else 'FAIL'} loss C {closs[0]:.6f}->{closs[-1]:.6f} torch "
                  f"{tloss[0]:.6f}->{tloss[-1]:.6f} grad1 {gdiff:.1e} w1 {wdiff:.0f} ulp max|diff| {diff.max():.2e} (step {worst + 1}: tol "
                  f"{tol[worst]:.2e}); casts {cc['bitwise_values_where_inputs_equal']}/{cc['bitwise_inputs']} "
                  f"bitwise of {cc['tensors']} (equal-input tensors), "
                  f"{_fmt(cc['values_equal_fraction_where_inputs_differ'])} equal, "
                  f"{_fmt(cc['values_flipped_fraction_where_inputs_differ'])} flipped elsewhere; step-1 counts: "
                  f"{r['step1_counts_equal_sites']} sites equal, {len(moves) - len(count_diff)} within their "
                  f"slack, {len(count_diff)} differ", flush=True)
            for f in cc["failures"][:5]:
                print("   ", f)
            for s, d in list(count_diff.items())[:5]:
                print("    counts", s, d)
            if not args.no_fixture:
                write_fixture(preset, results[preset])
    sys.exit(0 if ok_all else 1)


def write_fixture(preset, result):
    """Merges one preset's result into the fixture (under a lock: runs for other presets may write
    at the same time), written to a temporary file and renamed."""
    import fcntl
    # the lock lives beside the temporary files, not in tests/fixtures (nothing to commit there)
    with open(os.path.join(tempfile.gettempdir(), "fplab_torch_policy_check.lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        doc = {"tool": "tools/check_torch_policy.py", "torch": torch.__version__,
               "transformers": clt.transformers.__version__, "eps_reorder": EPS_REORDER, "noise_runs": NOISE_RUNS,
               "results": {}}
        if os.path.exists(FIXTURE):
            doc["results"] = json.load(open(FIXTURE))["results"]
        doc["results"][preset] = result
        fd, tmpf = tempfile.mkstemp(dir=os.path.dirname(FIXTURE), prefix=".torch_policy_check.")
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=1, default=float)
            fh.write("\n")
        os.chmod(tmpf, 0o644)  # mkstemp's 0600 would become the committed file's mode
        os.replace(tmpf, FIXTURE)


if __name__ == "__main__":
    main()
