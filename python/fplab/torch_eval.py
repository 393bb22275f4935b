"""fplab.torch_eval: a trained Hugging Face causal LM evaluated under inference precision
policies, as post-training quantization: perplexity on a text file, the KL divergence of the
policy's next-token distribution to the reference model's, top-1 agreement and the change of
the correct token's probability (llama.cpp's `perplexity --kl-divergence` statistics, see
docs/torch.md), for the whole policy and with one site (a Linear, a layer or a projection) under
it at a time, so that the sites that hurt stand out.

    python -m fplab.torch_eval --model DIR --text FILE --policy w8a8-fp8,w4-mxfp4 --per linear

Only fplab.torch's public API: each configuration is `fplab.torch.policy(model, name, ...)`
applied around a forward in torch.no_grad() (evaluation forwards cast but count nothing), and
placing one site alone is `sites=[(path, projection), ("*", None)]`. The text is cut into
chunks of --ctx tokens, each scored on its second half (llama.cpp's convention), one chunk per
forward so that a tensor-wide scale (fp8's per-tensor, nvfp4's) sees one chunk, as a deployed
model does. Chunk by chunk, every configuration runs on the chunk and is compared with the
reference's logits of that chunk, so memory holds one chunk's logits per configuration at a time.

Rows (the JSON lines of --out, one per configuration, keys documented in docs/torch.md) have
the shape of `fplab eval --format json`'s rows: saved as RUN/ptq.jsonl beside a run's log.jsonl,
`fplab report` puts their whole-model `delta` in its post-training quantization table.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

import fplab.torch as ft

__all__ = ["evaluate", "load_model", "load_tokens", "chunk_tokens", "format_table", "write_rows", "main"]

PER = ("none", "linear", "layer", "projection")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


class EvalError(ValueError):
    """Bad input from a user: the message names the input and what was expected."""


# --- inputs

def load_model(path):
    """A Hugging Face causal LM from a local checkpoint directory (save_pretrained's), in
    float32 (the policies cast from float32) and in eval mode."""
    if not os.path.isdir(path):
        raise EvalError(f"--model {path}: no such directory (expected a checkpoint directory written by "
                        "save_pretrained)")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise EvalError(f"--model {path}: no config.json: not a Hugging Face checkpoint directory")
    from transformers import AutoModelForCausalLM
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except (OSError, ValueError) as e:
        raise EvalError(f"--model {path}: transformers cannot load it: {e}") from None
    return model.float().eval()


def load_tokens(text_path, tokenizer="auto", model_dir=None, vocab_size=None):
    """(token ids as a 1-D int64 tensor, the BOS id or None). tokenizer: "auto" (the checkpoint
    directory's own tokenizer; an error if it has none), "bytes" (the UTF-8 bytes as the ids,
    for byte-level models and tests; no BOS) or a directory holding a tokenizer."""
    if not os.path.isfile(text_path):
        raise EvalError(f"--text {text_path}: no such file")
    with open(text_path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise EvalError(f"--text {text_path}: no text (the file is empty or only whitespace)")
    if tokenizer == "bytes":
        ids, bos = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.int64), None
    else:
        where = model_dir if tokenizer == "auto" else tokenizer
        if where is None:
            raise EvalError("--tokenizer auto: no checkpoint directory to take a tokenizer from; pass --tokenizer DIR, "
                            "or --tokenizer bytes for a model whose ids are the text's UTF-8 bytes")
        if not any(os.path.exists(os.path.join(where, f)) for f in TOKENIZER_FILES):
            raise EvalError(f"--tokenizer {tokenizer}: no tokenizer in {where} (expected one of "
                            f"{', '.join(TOKENIZER_FILES)}); pass --tokenizer DIR, or --tokenizer bytes for a "
                            "model whose ids are the text's UTF-8 bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EvalError(f"--text {text_path}: not UTF-8 ({e})") from None
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(where)
        ids = torch.tensor(tok(text, add_special_tokens=False)["input_ids"], dtype=torch.int64)
        bos = tok.bos_token_id if getattr(tok, "add_bos_token", tok.bos_token_id is not None) else None
    if vocab_size is not None and ids.numel() and int(ids.max()) >= vocab_size:
        raise EvalError(f"--text {text_path}: token id {int(ids.max())} with --tokenizer {tokenizer}, but the model's "
                        f"vocabulary has {vocab_size} entries")
    return ids, bos


def chunk_tokens(ids, n_ctx, n_chunks=None, bos=None):
    """(chunks, n_ctx) int64: the first len(ids) // n_ctx windows of n_ctx tokens (at most
    n_chunks), the first token of each replaced by bos when there is one (as llama.cpp does)."""
    if n_ctx < 4:
        raise EvalError(f"--ctx {n_ctx}: expected at least 4 tokens (half of each chunk is scored)")
    n = ids.numel() // n_ctx
    if n == 0:
        raise EvalError(f"--text: {ids.numel()} tokens, fewer than one chunk of --ctx {n_ctx}")
    if n_chunks is not None:
        if n_chunks < 1:
            raise EvalError(f"--chunks {n_chunks}: expected at least 1")
        n = min(n, n_chunks)
    c = ids[:n * n_ctx].reshape(n, n_ctx).clone()
    if bos is not None:
        c[:, 0] = bos
    return c


# --- statistics

def token_stats(ref_logits, logits, targets):
    """Per scored token, in float64: nll (-log q(target)), kld (sum_i p_i (log p_i - log q_i),
    p the reference's distribution, q the configuration's), same (argmax equal) and dp
    (q(target) - p(target))."""
    lp = torch.log_softmax(ref_logits.double(), -1)
    lq = torch.log_softmax(logits.double(), -1)
    t = targets.unsqueeze(-1)
    nll = -lq.gather(-1, t).squeeze(-1)
    return {"nll": nll, "kld": (lp.exp() * (lp - lq)).sum(-1), "same": ref_logits.argmax(-1) == logits.argmax(-1),
            "dp": (-nll).exp() - lp.gather(-1, t).squeeze(-1).exp()}


def summarize(per_token, ref_nll):
    """A row's statistics from the per-token tensors of all chunks (concatenated)."""
    nll, kld, dp = per_token["nll"], per_token["kld"], per_token["dp"]
    n = nll.numel()
    mean = nll.mean().item()
    d = nll - ref_nll
    se = lambda x: (x.std().item() / math.sqrt(n)) if n > 1 else float("nan")  # noqa: E731
    return {"val_loss": mean, "ppl": math.exp(mean), "delta": d.mean().item(), "delta_se": se(d),
            "kld": kld.mean().item(), "kld_se": se(kld), "kld_max": kld.max().item(),
            "kld_p99": torch.quantile(kld, 0.99).item(), "top1": per_token["same"].double().mean().item(),
            "dp_mean": dp.mean().item(), "dp_rms": dp.square().mean().sqrt().item(), "tokens": n}


# --- configurations

def _sites_of(model, policy, n_layers, seed):
    """{module path: (projection, layer)} that the policy places (fplab.torch's placement)."""
    with ft.policy(model, policy, n_layers=n_layers, seed=seed) as pol:
        return dict(pol.sites)


def _groups(sites, per, n_layers):
    """[(label, [paths])]: the sites placed alone, one group per row, in the model's order."""
    out = {}
    for path, (proj, layer) in sites.items():
        if per == "linear":
            key = path
        elif per == "layer":
            key = f"L{layer}" if n_layers is None or layer < n_layers else "model"
        else:
            key = proj
        out.setdefault(key, []).append(path)
    return list(out.items())


def configurations(model, policies, reference="fp32", per="none", seed=0):
    """[(role, policy, site label or None, kwargs for fplab.torch.policy, or None for plain PyTorch)]:
    the reference first; then plain PyTorch (role "floor": what the products' summation order
    alone moves, where the reference is a policy); then each policy whole (its own forwards, also
    where it is the reference: KL 0 then says the forwards are deterministic) and, with per, each
    group of its sites alone, the other Linears left to PyTorch."""
    if per not in PER:
        raise EvalError(f"--per {per}: expected one of {', '.join(PER)}")
    n_layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    kw = {"seed": seed, "n_layers": n_layers}
    out = [("reference", reference, None, None if reference == "torch" else dict(kw))]
    if reference != "torch":
        out.append(("floor", "torch", None, None))
    for p in policies:
        if p == "torch":
            continue
        out.append(("policy", p, None, dict(kw)))
        if per == "none":
            continue
        sites = _sites_of(model, p, n_layers, seed)
        for label, paths in _groups(sites, per, n_layers):
            out.append(("site", p, label, dict(kw, sites=[(q, sites[q][0]) for q in paths] + [("*", None)])))
    return out


def _logits(model, ids, kwargs):
    with torch.no_grad():
        if kwargs is None:
            return model(input_ids=ids).logits
        with ft.policy(model, kwargs["policy"], **{k: v for k, v in kwargs.items() if k != "policy"}):
            return model(input_ids=ids).logits


def evaluate(model, chunks, policies, *, reference="fp32", per="none", seed=0, progress=None):
    """The rows (dicts) of every configuration (configurations()) over the chunks ((C, n_ctx)
    token ids): scored positions n_ctx/2 .. n_ctx-2 of each chunk, predicting the next token.
    progress: a callable given a line per chunk (None: silent)."""
    if chunks.dim() != 2 or chunks.shape[0] < 1:
        raise EvalError("chunks: expected a (chunks, n_ctx) tensor with at least one chunk")
    if reference != "torch":
        ft.policy_text(reference)  # a bad name fails here, before any forward
    for p in policies:
        if p != "torch":
            ft.policy_text(p)
    cfgs = configurations(model, policies, reference, per, seed)
    n_ctx = chunks.shape[1]
    first = n_ctx // 2
    acc = [{"nll": [], "kld": [], "same": [], "dp": []} for _ in cfgs]
    t0 = time.monotonic()
    for c in range(chunks.shape[0]):
        ids = chunks[c:c + 1]
        targets = ids[0, first + 1:]
        ref_logits = None
        for i, (_, pol, _, kw) in enumerate(cfgs):
            lg = _logits(model, ids, None if kw is None else dict(kw, policy=pol))[0, first:n_ctx - 1]
            if ref_logits is None:
                ref_logits = lg
            for k, v in token_stats(ref_logits, lg, targets).items():
                acc[i][k].append(v)
        if progress is not None:
            progress(f"chunk {c + 1}/{chunks.shape[0]}: {len(cfgs)} configurations, "
                     f"{time.monotonic() - t0:.1f} s")
    per_token = [{k: torch.cat(v) for k, v in a.items()} for a in acc]
    ref_nll = per_token[0]["nll"]
    rows = []
    for (role, pol, site, _), pt in zip(cfgs, per_token):
        rows.append({"policy": pol, "site": site, "role": role, "reference": reference, **summarize(pt, ref_nll)})
    return rows


# --- output

COLUMNS = (("policy", "{}"), ("role", "{}"), ("site", "{}"), ("ppl", "{:.4f}"), ("delta", "{:+.5f}"), ("kld", "{:.3e}"),
           ("kld_p99", "{:.3e}"), ("kld_max", "{:.3e}"), ("top1", "{:.4f}"), ("dp_rms", "{:.3e}"),
           ("tokens", "{}"))


def format_table(rows):
    """A Markdown table of the rows (site "-" for a whole policy)."""
    cells = [[c for c, _ in COLUMNS]]
    for r in rows:
        cells.append(["-" if r[c] is None else f.format(r[c]) for c, f in COLUMNS])
    w = [max(len(row[j]) for row in cells) for j in range(len(COLUMNS))]
    line = lambda row: "| " + " | ".join(s.ljust(w[j]) if j < 3 else s.rjust(w[j]) for j, s in enumerate(row)) + " |"  # noqa: E731
    rule = "|" + "|".join("-" * (w[j] + 1) + ("-" if j < 3 else ":") for j in range(len(COLUMNS))) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def write_rows(path, rows, meta):
    """One JSON object per row (meta's keys added to each), written whole to a temporary file
    and renamed, so that a failed run leaves nothing half written."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise EvalError(f"--out {path}: no directory {d}")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps({**r, **meta}, separators=(",", ":"), allow_nan=True) + "\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m fplab.torch_eval",
        description="Evaluates a local Hugging Face causal LM checkpoint under inference precision policies "
        "(fplab.torch): perplexity on a text file, KL divergence of each policy's next-token distribution to "
        "the reference's, top-1 agreement and the change of the correct token's probability (llama.cpp's "
        "perplexity --kl-divergence statistics), whole and one site at a time. Prints a Markdown table; "
        "--out writes the rows as JSON lines (fplab report reads them as RUN/ptq.jsonl).",
        epilog="example: python -m fplab.torch_eval --model ckpt/ --text wiki.test.raw --policy w8a8-fp8,w4-mxfp4 "
        "--per linear --out ptq.jsonl")
    ap.add_argument("--model", required=True, help="checkpoint directory (save_pretrained's: config.json and weights)")
    ap.add_argument("--text", required=True, help="the text file to score")
    ap.add_argument("--policy", default="w8a8-fp8,w4-mxfp4",
                    help="comma-separated presets or policy files (fplab policy --list) [%(default)s]")
    ap.add_argument("--reference", default="fp32",
                    help="what the KL divergence is taken to: a policy, or 'torch' for the plain model. fp32 (the "
                    "default) runs the same float32 products as the policies, so the rows measure the formats alone "
                    "[%(default)s]")
    ap.add_argument("--per", default="none", choices=PER,
                    help="also each group of sites alone: each Linear, each layer, or each projection [%(default)s]")
    ap.add_argument("--tokenizer", default="auto",
                    help="auto (the checkpoint's), bytes (UTF-8 bytes as ids) or a tokenizer directory [%(default)s]")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk; the second half is scored [%(default)s]")
    ap.add_argument("--chunks", type=int, default=None, help="at most this many chunks [all]")
    ap.add_argument("--seed", type=int, default=0, help="the policies' stochastic-rounding key [%(default)s]")
    ap.add_argument("--out", help="the rows as JSON lines into this file (written whole, then renamed)")
    ap.add_argument("--progress", type=int, default=1, choices=(0, 1), help="a line per chunk on stderr [1]")
    a = ap.parse_args(argv)
    try:
        policies = [p for p in a.policy.split(",") if p]
        if not policies:
            raise EvalError("--policy: expected a comma-separated list of presets or policy files")
        for p in policies + [a.reference]:
            if p != "torch":
                try:
                    ft.policy_text(p)
                except Exception as e:  # the library's message names the policy
                    raise EvalError(f"--policy {p}: {e}") from None
        model = load_model(a.model)
        ids, bos = load_tokens(a.text, a.tokenizer, a.model, getattr(model.config, "vocab_size", None))
        chunks = chunk_tokens(ids, a.ctx, a.chunks, bos)
    except EvalError as e:
        print(f"fplab.torch_eval: {e}", file=sys.stderr)
        return 2
    print(f"fplab.torch_eval: {a.model}: {sum(p.numel() for p in model.parameters())} parameters; {a.text}: "
          f"{ids.numel()} tokens, {chunks.shape[0]} chunks of {a.ctx} ({chunks.shape[0] * (a.ctx - a.ctx // 2 - 1)} "
          f"scored); reference {a.reference}; policies {','.join(policies)}; per {a.per}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)
    say = (lambda s: print(f"  {s}", file=sys.stderr, flush=True)) if a.progress else None
    try:
        rows = evaluate(model, chunks, policies, reference=a.reference, per=a.per, seed=a.seed, progress=say)
    except EvalError as e:
        print(f"fplab.torch_eval: {e}", file=sys.stderr)
        return 2
    print(format_table(rows))
    if a.out:
        try:
            write_rows(a.out, rows, {"model": os.path.abspath(a.model), "text": os.path.abspath(a.text),
                                     "n_ctx": a.ctx, "chunks": int(chunks.shape[0]), "seed": a.seed})
        except EvalError as e:
            print(f"fplab.torch_eval: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
