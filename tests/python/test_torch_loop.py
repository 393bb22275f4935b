"""tools/torch_train_llama.py, docs/torch.md's practitioners' loop (only where torch and
transformers are installed): a tiny random Llama trained a few steps with accumulation and
activation checkpointing under a policy, its log drawn by `fplab report`, its saved model
evaluated by fplab.torch_eval into the run's ptq.jsonl; 2 gloo ranks under torchrun against 1
process accumulating 2 micro-batches; torch.compile (aot_eager) against the eager run,
bit for bit."""
import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
te = pytest.importorskip("fplab.torch_eval")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "torch_train_llama.py")
POLICY = "mxfp8"


def load_script():
    spec = importlib.util.spec_from_file_location("torch_train_llama", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def args(data, out, *more):
    return ["--tiny", "--data", data, "--tokenizer", "bytes", "--policy", POLICY, "--steps", "2", "--batch", "2",
            "--seq", "32", "--out", out, *more]


def steps(out, policy=POLICY):
    with open(os.path.join(out, "runs", policy, "seed-0", "log.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end"
    return [ln for ln in lines if "step" in ln and "event" not in ln]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("loop")
    text = "".join(f"line {i}: the quick brown fox {i * 7919 % 1000} jumps over the lazy dog.\n" for i in range(200))
    (d / "train.txt").write_text(text)
    return str(d / "train.txt")


@pytest.fixture(scope="module")
def accumulated(data, tmp_path_factory):
    """1 process, 2 accumulated micro-batches, activation checkpointing: the run directory."""
    out = str(tmp_path_factory.mktemp("accum") / "out")
    assert load_script().main(args(data, out, "--accum", "2", "--checkpointing")) == 0
    return out


def test_loop_log_report_and_eval(accumulated, data, capsys):
    run = os.path.join(accumulated, "runs", POLICY, "seed-0")
    lines = steps(accumulated)
    assert [ln["step"] for ln in lines] == [1, 2]
    assert all(ln["sites"] and "mlp.down.in" in ln["sites"] for ln in lines)
    assert lines[0]["loss"] > 0 and lines[1]["tokens_per_s"] > 0
    # a second run into the same directory is refused, the first left as it was
    before = open(os.path.join(run, "log.jsonl")).read()
    assert load_script().main(args(data, accumulated)) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert open(os.path.join(run, "log.jsonl")).read() == before
    # the saved model, evaluated under an inference policy into the run's ptq.jsonl
    assert te.main(["--model", os.path.join(run, "model"), "--text", data, "--tokenizer", "bytes", "--ctx", "32",
                    "--chunks", "1", "--policy", "w4-mxfp4", "--progress", "0",
                    "--out", os.path.join(run, "ptq.jsonl")]) == 0
    cli = os.environ.get("FPLAB_CLI")
    if not cli:
        pytest.skip("FPLAB_CLI not set: fplab report not run")
    r = subprocess.run([cli, "report", accumulated, "--no-plots"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    md = open(os.path.join(accumulated, "report.md")).read()
    assert f"| {POLICY} |" in md and "## Post-training quantization" in md and "w4-mxfp4" in md


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv, tmp_path, name):
    """The script in its own process with one thread (torchrun gives each rank one: the same
    thread count on both sides keeps every sum in the same order)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, f"{name}: " + r.stderr[-3000:]


@pytest.mark.parametrize("pol,optimizer", [("nvfp4", "torch"), ("pure-bf16-sr", "torch"), ("pure-bf16-sr", "fplab")])
def test_ddp_two_gloo_ranks_equal_accumulation_bit_for_bit(data, tmp_path, pol, optimizer):
    """nvfp4 (stochastic rounding of the gradients, keyed by micro-batch and rank) and
    pure-bf16-sr (of the weight update, keyed alike on every rank; also with fplab.torch.AdamW,
    whose pass rounds the update): 2 gloo ranks x 1 micro-batch give 1 process x 2 accumulated
    micro-batches' steps bit for bit: losses and gradient norms (the log's telemetry is rank 0's
    micro-batches only, docs/torch.md)."""
    more = ["--policy", pol, "--steps", "3", "--no-save", "--optimizer", optimizer]
    acc, ddp = str(tmp_path / "acc"), str(tmp_path / "ddp")
    _run([SCRIPT, *args(data, acc, "--accum", "2", *more)], tmp_path, "1 process x 2")
    _run(["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()), SCRIPT,
          *args(data, ddp, *more)], tmp_path, "2 ranks x 1")
    a, d = steps(acc, pol), steps(ddp, pol)
    assert [x["step"] for x in a] == [1, 2, 3]
    for x, y in zip(a, d):
        assert (x["loss"], x["grad_norm"]) == (y["loss"], y["grad_norm"])


def test_compile_gives_the_eager_losses(accumulated, data, tmp_path):
    """torch.compile (aot_eager: AOTAutograd's traced forward and backward graphs, run without code
    generation) of the same loop: the policy's operators are traced, and every step's loss,
    gradient norm and telemetry equal the eager run's bit for bit."""
    out = str(tmp_path / "out")
    assert load_script().main(args(data, out, "--accum", "2", "--checkpointing", "--no-save",
                                   "--compile", "aot_eager")) == 0
    keys = ("step", "loss", "grad_norm", "sites", "update")
    got, want = steps(out), steps(accumulated)
    assert len(got) == len(want) == 2
    assert [{k: ln.get(k) for k in keys} for ln in got] == [{k: ln.get(k) for k in keys} for ln in want]
