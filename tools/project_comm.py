#!/usr/bin/env python3
"""project_comm.py: the alpha-beta model of fplab's all-reduce, fitted to bench_dist's
measurements, and projected to 8..1024 ranks on 100 Gb/s and 1 Gb/s links.

    mpirun -np 4 build/bench/bench_dist --json > bench.jsonl
    tools/project_comm.py bench.jsonl > docs/results/dist-study/projection.md

Model (reduce-scatter + all-gather, as trainer/dist_wire.c does; a ring has the same terms): an
all-reduce of B bytes over p ranks takes
    T(p, B) = 2 (p - 1) alpha + 2 (p - 1) / p * B * beta + 2 codec * n
with alpha the per-message latency, beta the seconds per byte of a link, and codec the seconds
per value to encode and decode a packed format (measured on this CPU; each rank encodes and
decodes its contribution and the sums, n values each). alpha and beta are fitted
to the float32 rows (seconds = a + b * bytes_sent, least squares on relative error); the projection replaces them
by a link's (stated below), keeps the fitted codec, and compares with the compute time of a step.
Standard library only.
"""
import json
import sys

# Links of the projection: (name, alpha seconds, beta seconds per byte).
LINKS = [("100 Gb/s (RDMA, 5 us)", 5e-6, 8 / 100e9), ("1 Gb/s (TCP, 50 us)", 50e-6, 8 / 1e9)]
RANKS = [8, 32, 128, 1024]
# Models: name, parameters, compute seconds per optimizer step per rank, where that comes from.
MODELS = [
    ("15m (6.1 M params) on this CPU", 6_123_168, 2048 / 1982.0,
     "B 8 x T 256 tokens per rank at 1,982 tok/s (docs/benchmarks.md, 2 threads)"),
    ("1B Llama (1.1 B params) on an H100-class GPU", 1_100_048_384, 6 * 1.1e9 * 8192 / 400e12,
     "8,192 tokens per rank, 6 N flops per token at 400 TFLOP/s (40% of an H100's dense bf16)"),
]
# Schemes: name, bits per value on the wire, steps per communication, codec key (bench wire).
SCHEMES = [
    ("DP fp32", 32, 1, "fp32"),
    ("DP bf16", 16, 1, "bf16"),
    ("DP MXFP4", 4.25, 1, "mxfp4"),
    ("local SGD K=8, fp32", 32, 8, "fp32"),
    ("DiLoCo H=32, NVFP4", 4.5, 32, "nvfp4"),
]


def fit(rows):
    """seconds = a + b * bytes_sent over the float32 rows, least squares on the relative error
    (weights 1/seconds^2), so the small, latency-bound messages fix a and the large ones b."""
    xs = [r["bytes_sent"] for r in rows]
    ys = [r["seconds"] for r in rows]
    ws = [1 / y ** 2 for y in ys]
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / sw
    my = sum(w * y for w, y in zip(ws, ys)) / sw
    b = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    a = my - b * mx
    worst = max(abs(y - a - b * x) / y for x, y in zip(xs, ys))
    return a, b, worst


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: project_comm.py BENCH.jsonl (mpirun -np N build/bench/bench_dist --json)")
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
    if not rows:
        sys.exit(f"project_comm.py: {sys.argv[1]}: no bench_dist --json rows")
    p = rows[0]["ranks"]
    if p < 2:
        sys.exit(f"project_comm.py: {sys.argv[1]}: measured on one rank; run bench_dist under mpirun -np 2 or more")
    f32 = [r for r in rows if r["wire"] == "fp32"]
    a, b, worst = fit(f32)
    alpha = a / (2 * (p - 1)) if p > 1 else a
    # codec seconds per value: the largest message's encode+decode, per value
    codec = {}
    for r in rows:
        if r["wire"] != "fp32" and r["codec_seconds"] > 0:
            cur = codec.get(r["wire"])
            if cur is None or r["values"] > cur[0]:
                codec[r["wire"]] = (r["values"], r["codec_seconds"] / r["values"])
    codec = {k: v[1] for k, v in codec.items()}
    out = []
    out.append(f"Fitted on {p} ranks of this machine (shared memory, bench_dist, float32 rows): "
               f"alpha = {alpha * 1e6:.1f} us per message, beta = {b * 1e9:.3f} ns per byte "
               f"({1 / b / 1e9:.2f} GB/s per rank); the worst relative misfit of a row is {worst:.0%}.")
    out.append("Encode + decode on this CPU (one thread, per value): " +
               ", ".join(f"{k} {v * 1e9:.2f} ns" for k, v in sorted(codec.items())) + ".")
    out.append("")
    for mname, n, comp, how in MODELS:
        gpu = "GPU" in mname
        for lname, la, lb in LINKS:
            out.append(f"### {mname}, {lname}")
            out.append("")
            out.append(f"Compute {comp * 1e3:.1f} ms per step ({how}). "
                       f"Cells: communication per step in ms (its share of the step, no overlap); "
                       f"**bold**: communication under half the step."
                       + (" Codec time left out (a GPU encodes at memory speed)." if gpu else
                          " Includes this CPU's encode + decode."))
            out.append("")
            out.append("| scheme | " + " | ".join(f"{q} ranks" for q in RANKS) + " |")
            out.append("|---|" + "---:|" * len(RANKS))
            for sname, bits, every, key in SCHEMES:
                cells = []
                for q in RANKS:
                    B = n * bits / 8
                    t = 2 * (q - 1) * la + 2 * (q - 1) / q * B * lb
                    if not gpu and key in codec:  # the contribution and the sums: n values each
                        t += 2 * codec[key] * n
                    t /= every
                    share = t / (t + comp)
                    cell = f"{t * 1e3:.1f} ({share:.0%})"
                    cells.append(f"**{cell}**" if share < 0.5 else cell)
                out.append(f"| {sname} | " + " | ".join(cells) + " |")
            out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
