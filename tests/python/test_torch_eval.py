"""fplab.torch_eval (only where torch and transformers are installed): a tiny random
LlamaForCausalLM saved with save_pretrained, evaluated under policies: the fp32 policy's KL
divergence to the fp32 reference is exactly 0 with top-1 agreement 1, a 4-bit policy's is not,
the rows are deterministic, the per-site rows cover every Linear, the JSON lines are what
`fplab report` reads as ptq.jsonl, and bad inputs are refused with a message naming them."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
te = pytest.importorskip("fplab.torch_eval")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

CTX = 32
TEXT = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.\n" * 2


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """(checkpoint directory, text file): vocabulary 256, so the text's bytes are its ids."""
    d = tmp_path_factory.mktemp("eval")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    LlamaForCausalLM(cfg).save_pretrained(d / "model")
    (d / "text.txt").write_text(TEXT)
    return str(d / "model"), str(d / "text.txt")


@pytest.fixture(scope="module")
def model_chunks(ckpt):
    model = te.load_model(ckpt[0])
    ids, bos = te.load_tokens(ckpt[1], "bytes", ckpt[0], model.config.vocab_size)
    return model, te.chunk_tokens(ids, CTX, 2, bos)


def by(rows, role, policy=None):
    return [r for r in rows if r["role"] == role and (policy is None or r["policy"] == policy)]


def test_fp32_exact_coarse_policy_positive_and_deterministic(model_chunks):
    model, chunks = model_chunks
    assert chunks.shape == (2, CTX)
    rows = te.evaluate(model, chunks, ["fp32", "mxfp4"])
    assert [(r["role"], r["policy"]) for r in rows] == [("reference", "fp32"), ("floor", "torch"),
                                                        ("policy", "fp32"), ("policy", "mxfp4")]
    fp32 = by(rows, "policy", "fp32")[0]
    # the fp32 policy's own forwards against the reference's: the same numbers
    assert fp32["kld"] == 0.0 and fp32["kld_max"] == 0.0 and fp32["top1"] == 1.0 and fp32["delta"] == 0.0
    assert fp32["tokens"] == 2 * (CTX - CTX // 2 - 1)
    # plain PyTorch's products differ from the library's float32 ones in the last bits only; the
    # float64 sum of p (log p - log q) over near-equal distributions may round a little below 0
    assert abs(by(rows, "floor")[0]["kld"]) < 1e-9
    mx = by(rows, "policy", "mxfp4")[0]
    assert mx["kld"] > 1e-6 and mx["kld_max"] >= mx["kld_p99"] >= 0 and mx["dp_rms"] > 0
    assert rows[0]["ppl"] == pytest.approx(2.718281828459045 ** rows[0]["val_loss"])
    again = te.evaluate(model, chunks, ["fp32", "mxfp4"])
    assert again == rows


def test_per_site_rows_cover_every_linear(model_chunks):
    model, chunks = model_chunks
    rows = te.evaluate(model, chunks[:1], ["nvfp4"], per="linear")
    linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    sites = by(rows, "site", "nvfp4")
    assert [r["site"] for r in sites] == linears
    assert all(r["kld"] >= 0 for r in sites) and any(r["kld"] > 0 for r in sites)
    by_layer = te.evaluate(model, chunks[:1], ["nvfp4"], per="layer")
    assert [r["site"] for r in by(by_layer, "site")] == ["L0", "L1", "model"]
    # the whole policy's row does not depend on what else is evaluated
    assert by(by_layer, "policy")[0] == by(rows, "policy")[0]


def test_cli_writes_ptq_rows(ckpt, tmp_path, capsys):
    out = tmp_path / "ptq.jsonl"
    rc = te.main(["--model", ckpt[0], "--text", ckpt[1], "--tokenizer", "bytes", "--ctx", str(CTX),
                  "--chunks", "1", "--policy", "w4-mxfp4", "--per", "projection", "--out", str(out),
                  "--progress", "0"])
    assert rc == 0
    table = capsys.readouterr().out
    assert "| policy" in table and "w4-mxfp4" in table and "mlp.down" in table
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["policy"] == "fp32" and rows[0]["site"] is None and rows[0]["delta"] == 0.0
    whole = [r for r in rows if r["policy"] == "w4-mxfp4" and r["site"] is None]
    assert len(whole) == 1 and whole[0]["n_ctx"] == CTX and whole[0]["chunks"] == 1
    assert {r["site"] for r in rows if r["site"]} == {"attn.qkv", "attn.o", "mlp.gate_up", "mlp.down", "lm_head"}
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


@pytest.mark.parametrize("case, want", [
    ("missing-dir", "no such directory"),
    ("no-config", "no config.json"),
    ("missing-text", "no such file"),
    ("empty-text", "no text"),
    ("short-text", "fewer than one chunk"),
    ("no-tokenizer", "no tokenizer in"),
    ("bad-policy", "--policy no-such-preset"),
    ("bad-ctx", "--ctx 2"),
])
def test_bad_inputs(ckpt, tmp_path, capsys, case, want):
    model, text = ckpt
    args = {"--model": model, "--text": text, "--tokenizer": "bytes", "--ctx": str(CTX), "--policy": "mxfp4",
            "--progress": "0"}
    if case == "missing-dir":
        args["--model"] = str(tmp_path / "nope")
    elif case == "no-config":
        args["--model"] = str(tmp_path)
    elif case == "missing-text":
        args["--text"] = str(tmp_path / "nope.txt")
    elif case in ("empty-text", "short-text"):
        (tmp_path / "t.txt").write_text("  \n" if case == "empty-text" else "abc")
        args["--text"] = str(tmp_path / "t.txt")
    elif case == "no-tokenizer":
        args["--tokenizer"] = "auto"
    elif case == "bad-policy":
        args["--policy"] = "no-such-preset"
    elif case == "bad-ctx":
        args["--ctx"] = "2"
    rc = te.main([x for kv in args.items() for x in kv])
    err = capsys.readouterr().err
    assert rc == 2 and want in err, err
