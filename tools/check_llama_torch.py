#!/usr/bin/env python3
"""check_llama_torch.py: fplab's Llama forward and backward against Hugging Face transformers'
LlamaForCausalLM (PyTorch, CPU, float64), and the fixture tests/test_llama_torch.c reads.

For each case (the default config of tools/dump_llama_setup.h, untied, and the same with the LM
head tied to the embedding), build/tools/dump_llama writes fplab's parameters, batch, logits,
loss and gradients (float32). The same weights go into LlamaForCausalLM in float64; its logits,
the mean cross-entropy over the counted targets and the gradients of that loss (autograd) are
compared with fplab's: max |logit diff| / max |logit|, |loss diff| / loss, and per parameter
tensor max |grad diff| / max |grad of that tensor| (norm-wise, as fplab's own gradcheck states
it). Exit 1 if any is above TOL. The results go to tests/fixtures/llama_torch_check.json
(written to a temporary name and renamed), which `make test` reads without PyTorch.

Usage: python3 tools/check_llama_torch.py [DUMP_BINARY]   (default build/tools/dump_llama;
`make check-trainer-torch` builds it and runs this). Needs numpy, torch and transformers, and
installs nothing: pip install torch --index-url https://download.pytorch.org/whl/cpu transformers
(where that index cannot be reached, `pip install torch transformers` from PyPI works too; the
wheel is larger).
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    sys.exit(f"check_llama_torch: {e.name} is not installed; run: "
             "pip install torch --index-url https://download.pytorch.org/whl/cpu transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "llama_torch_check.json")
CASES = [("untied", []), ("tied", ["--tied"])]

# Tolerance. fplab computes in float32 (u = 2^-24), the reference in float64, so the differences
# are fplab's float32 rounding, plus the few float32 steps HF keeps inside a float64 model (its
# RMSNorm casts the input to float32; its RoPE cos/sin are computed in float32), each a relative
# u per element (measured: making those float64 moves the largest error below from 1.8e-6 to
# 1.4e-6). Every quantity is a chain of about 20 dependent ops (2 layers x ~8 ops + final norm,
# head, softmax), each a sum of at most K terms; K = 96 here (max of C = 32, H = 96, T = 16,
# B*T = 32 for the weight gradients, V = 23). The worst-case bound 20 x K x 2^-24 is 1.1e-4; the
# probabilistic one (rounding errors of random sign: sqrt(K) for K) is 20 x sqrt(96) x 2^-24 =
# 1.2e-5. We use 1e-4 of the tensor's largest value, between the two and the tolerance of
# fplab's own gradcheck against its double-precision reference (tests/test_llama.c).
TOL = 1e-4


def load_dump(d):
    with open(os.path.join(d, "manifest.json")) as fh:
        man = json.load(fh)
    if man.get("format") != "fplab-llama-dump" or man.get("version") != 1:
        sys.exit(f"check_llama_torch: {d}/manifest.json: expected format fplab-llama-dump version 1, "
                 f"found {man.get('format')!r} version {man.get('version')!r}")
    arrays = {}
    for key, f in man["files"].items():
        path = os.path.join(d, f["file"])
        a = np.fromfile(path, dtype=np.dtype(f["dtype"]))
        want = int(np.prod(f["shape"]))
        if a.size != want:
            sys.exit(f"check_llama_torch: {path}: {a.size} elements, the manifest says {want}")
        arrays[key] = a.reshape(f["shape"])
    return man, arrays


def tensor(arrays, t, what="params"):
    """Tensor t (a manifest entry) of the params or grads buffer, float64, its own shape."""
    n = int(np.prod(t["shape"]))
    return arrays[what][t["offset"]:t["offset"] + n].astype(np.float64).reshape(t["shape"])


# RoPE layouts. fplab (like Meta's Llama and llama2.c) rotates the adjacent pairs (2i, 2i+1) of a
# head; HF's rotate_half rotates (i, i + hs/2). The same rotation with the head's q/k output rows
# reordered: row 2i + j of a head (pair i, component j) becomes row j*hs/2 + i. to_hf is the
# `permute` of HF's convert_llama_weights_to_hf.py, the inverse of llama2.c export.py's
# permute_reverse (which takes HF's q/k weights back to Meta's layout); from_hf is that
# permute_reverse, used here to bring HF's gradients back to fplab's layout (a row permutation P
# maps the gradient by P^T, its inverse).
def to_hf(w, n_heads):  # (n_heads*hs, in), adjacent pairs -> rotate_half halves
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def from_hf(w, n_heads):  # the inverse of to_hf
    rows, cols = w.shape
    return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_model(man, arrays):
    c = man["config"]
    cfg = LlamaConfig(
        vocab_size=c["vocab_size"], hidden_size=c["dim"], intermediate_size=c["hidden_dim"],
        num_hidden_layers=c["n_layers"], num_attention_heads=c["n_heads"],
        num_key_value_heads=c["n_kv_heads"], head_dim=c["dim"] // c["n_heads"],
        max_position_embeddings=c["seq_len"], rope_theta=float(c["rope_theta"]),
        rms_norm_eps=float(c["norm_eps"]),  # fplab's float32 eps, exactly
        tie_word_embeddings=bool(c["tied"]), attention_bias=False, mlp_bias=False,
        hidden_act="silu", attention_dropout=0.0, pretraining_tp=1,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    cfg._attn_implementation = "eager"  # plain matmul + softmax, no fused kernel
    torch.manual_seed(0)  # HF's random init is overwritten below; seeded all the same
    model = LlamaForCausalLM(cfg).to(torch.float64).eval()
    if cfg.tie_word_embeddings and model.lm_head.weight is not model.model.embed_tokens.weight:
        sys.exit("check_llama_torch: tie_word_embeddings is set but lm_head does not share the "
                 "embedding in this transformers version")

    T = {t["name"]: t for t in man["tensors"]}
    nh, nkv = c["n_heads"], c["n_kv_heads"]
    sd = {"model.embed_tokens.weight": tensor(arrays, T["tok_emb"]),
          "model.norm.weight": tensor(arrays, T["final_norm"])}
    if not c["tied"]:
        sd["lm_head.weight"] = tensor(arrays, T["lm_head"])
    for l in range(c["n_layers"]):
        p = f"model.layers.{l}."
        sd[p + "input_layernorm.weight"] = tensor(arrays, T["layers.attn_norm"])[l]
        sd[p + "self_attn.q_proj.weight"] = to_hf(tensor(arrays, T["layers.wq"])[l], nh)
        sd[p + "self_attn.k_proj.weight"] = to_hf(tensor(arrays, T["layers.wk"])[l], nkv)
        sd[p + "self_attn.v_proj.weight"] = tensor(arrays, T["layers.wv"])[l]
        sd[p + "self_attn.o_proj.weight"] = tensor(arrays, T["layers.wo"])[l]
        sd[p + "post_attention_layernorm.weight"] = tensor(arrays, T["layers.mlp_norm"])[l]
        sd[p + "mlp.gate_proj.weight"] = tensor(arrays, T["layers.w_gate"])[l]
        sd[p + "mlp.up_proj.weight"] = tensor(arrays, T["layers.w_up"])[l]
        sd[p + "mlp.down_proj.weight"] = tensor(arrays, T["layers.w_down"])[l]
    params = dict(model.named_parameters())  # a tied lm_head is listed once, as embed_tokens
    missing = set(params) - set(sd)
    if missing:
        sys.exit(f"check_llama_torch: HF parameters not set from fplab's: {sorted(missing)}")
    with torch.no_grad():
        for name, v in sd.items():
            if params[name].shape != v.shape:
                sys.exit(f"check_llama_torch: {name}: HF shape {tuple(params[name].shape)}, "
                         f"fplab gives {v.shape}")
            params[name].copy_(torch.from_numpy(np.ascontiguousarray(v)))
    # RoPE base: the config keyword moved (rope_theta -> rope_parameters) across versions; check
    # what the model uses. HF computes inv_freq in float32: compare at that precision.
    hs = c["dim"] // c["n_heads"]
    want = 1.0 / float(c["rope_theta"]) ** (np.arange(0, hs, 2) / hs)
    got = model.model.rotary_emb.inv_freq.double().numpy()
    if not np.allclose(got, want, rtol=1e-6, atol=0):
        sys.exit(f"check_llama_torch: HF's RoPE frequencies {got} differ from theta "
                 f"{c['rope_theta']}'s {want}")
    return model


def hf_grads(man, model):
    """fplab-layout float64 gradients of each tensor in the manifest, from HF's .grad."""
    c = man["config"]
    nh, nkv, L = c["n_heads"], c["n_kv_heads"], c["n_layers"]
    g = {n: p.grad.detach().numpy() for n, p in model.named_parameters()}
    lay = lambda key, f=lambda x: x: np.stack([f(g[f"model.layers.{l}.{key}.weight"]) for l in range(L)])
    out = {"tok_emb": g["model.embed_tokens.weight"],  # tied: holds the head's gradient too
           "layers.attn_norm": lay("input_layernorm"),
           "layers.wq": lay("self_attn.q_proj", lambda x: from_hf(x, nh)),
           "layers.wk": lay("self_attn.k_proj", lambda x: from_hf(x, nkv)),
           "layers.wv": lay("self_attn.v_proj"),
           "layers.wo": lay("self_attn.o_proj"),
           "layers.mlp_norm": lay("post_attention_layernorm"),
           "layers.w_gate": lay("mlp.gate_proj"),
           "layers.w_down": lay("mlp.down_proj"),
           "layers.w_up": lay("mlp.up_proj"),
           "final_norm": g["model.norm.weight"]}
    if not c["tied"]:
        out["lm_head"] = g["lm_head.weight"]
    return out


def attention_spread(model, tokens):
    """How far HF's attention is from a plain average (which RoPE and the softmax would barely
    change): the mean over rows t >= 1 of the largest probability, and that mean for uniform
    attention over the t + 1 visible positions. None where this version returns no attentions."""
    with torch.no_grad():
        out = model(input_ids=tokens, use_cache=False, output_attentions=True)
    att = getattr(out, "attentions", None)
    if not att or att[0] is None:
        return None
    a = torch.stack(att)[..., 1:, :]  # (L, B, NH, T-1, T)
    T = a.shape[-1]
    return {"max_prob_mean": float(a.amax(-1).mean()),
            "uniform_max_prob_mean": float((1.0 / torch.arange(2, T + 1, dtype=torch.float64)).mean())}


def rel_max(a, b):
    """max |a - b| / max |b| (b the reference); inf when b is all zero."""
    den = float(np.max(np.abs(b)))
    return float(np.max(np.abs(a - b))) / den if den > 0 else float("inf"), den


def check_case(name, args, binary):
    with tempfile.TemporaryDirectory(prefix="fplab_llama_") as d:
        cmd = [binary, "--out", d] + args
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check_llama_torch: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
        man, arrays = load_dump(d)
    c = man["config"]
    model = hf_model(man, arrays)
    tokens = torch.from_numpy(arrays["tokens"].astype(np.int64))
    targets = torch.from_numpy(arrays["targets"].astype(np.int64))
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens, use_cache=False).logits  # (B, T, V) float64
    V = c["vocab_size"]
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)
    loss.backward()

    res = {"name": name, "args": args, "config": c, "seed": man["seed"], "batch": man["batch"],
           "tokens_per_row": man["tokens_per_row"]}
    fl = float.fromhex(man["loss_hex"])
    tl = float(loss.detach())
    res["fplab_loss"], res["torch_loss"] = fl, tl
    res["loss_rel_err"] = abs(fl - tl) / abs(tl)
    res["logits_rel_err"], res["torch_logits_max"] = rel_max(
        arrays["logits"].astype(np.float64), logits.detach().numpy())
    res["attention"] = attention_spread(model, tokens)
    res["grads"] = []
    ref = hf_grads(man, model)
    for t in man["tensors"]:
        e, gmax = rel_max(tensor(arrays, t, "grads"), ref[t["name"]])
        res["grads"].append({"name": t["name"], "rel_err": e, "torch_grad_max": gmax})
    errs = [res["loss_rel_err"], res["logits_rel_err"]] + [g["rel_err"] for g in res["grads"]]
    res["max_rel_err"] = max(errs)
    res["pass"] = bool(all(np.isfinite(errs)) and res["max_rel_err"] <= TOL)
    return res


def print_case(r):
    print(f"\n{r['name']}: dim {r['config']['dim']}, layers {r['config']['n_layers']}, heads "
          f"{r['config']['n_heads']}/{r['config']['n_kv_heads']} kv, hidden {r['config']['hidden_dim']}, "
          f"vocab {r['config']['vocab_size']}, batch {r['batch']} x {r['tokens_per_row']}, seed {r['seed']}")
    if r["attention"]:
        print(f"  attention: mean largest probability {r['attention']['max_prob_mean']:.3f} "
              f"(uniform: {r['attention']['uniform_max_prob_mean']:.3f})")
    print(f"  {'quantity':<22} {'rel err':>10} {'scale':>12}  (tolerance {TOL:g})")
    row = lambda q, e, s: print(f"  {q:<22} {e:10.2e} {s:12.5g}  {'ok' if e <= TOL else 'FAIL'}")
    row("loss", r["loss_rel_err"], r["torch_loss"])
    row("logits", r["logits_rel_err"], r["torch_logits_max"])
    for g in r["grads"]:
        row("grad " + g["name"], g["rel_err"], g["torch_grad_max"])


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tools", "dump_llama")
    if not os.access(binary, os.X_OK):
        sys.exit(f"check_llama_torch: {binary} not found: run `make build/tools/dump_llama` "
                 "(or `make check-trainer-torch`)")
    torch.set_num_threads(1)  # small model: threads buy nothing, and one thread is reproducible
    results = [check_case(name, args, binary) for name, args in CASES]
    for r in results:
        print_case(r)
    ok = all(r["pass"] for r in results)
    out = {
        "what": "fplab Llama (float32) vs transformers LlamaForCausalLM (float64, CPU): relative "
                "errors, written by tools/check_llama_torch.py",
        "tolerance": TOL,
        "pass": ok,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "numpy": np.__version__, "python": platform.python_version(),
        "cases": results,
    }
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    write_atomic(FIXTURE, json.dumps(out, indent=1) + "\n")
    print(f"\ncheck_llama_torch: {'PASS' if ok else 'FAIL'} (max relative error "
          f"{max(r['max_rel_err'] for r in results):.2e}, tolerance {TOL:g}); wrote {FIXTURE} "
          f"(torch {torch.__version__}, transformers {transformers.__version__})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
