# underflow.gp: Underflow per site over steps
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot underflow.gp
# in this directory; the numbers are in underflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1840 font ",10"
} else {
    set terminal png noenhanced size 1260,1840
}
set output "underflow.png"
set ylabel "underflow fraction (log scale)"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 5,3 title "Underflow per site over steps (x: optimizer step; one panel per preset)" font ",12"
set logscale y
set format y "1e%L"
set yrange [1e-07:1]
set title "fp8-current"
plot "underflow.dat" index 0 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 1 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 2 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 3 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 4 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-delayed"
plot "underflow.dat" index 5 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 6 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 7 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 8 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 9 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-current-hopper"
plot "underflow.dat" index 10 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 11 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 12 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 13 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 14 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-current-hopper-p128"
plot "underflow.dat" index 15 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 16 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 17 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 18 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 19 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-current-blackwell"
plot "underflow.dat" index 20 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 21 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 22 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 23 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 24 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-current-blackwell-p128"
plot "underflow.dat" index 25 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 26 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 27 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 28 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 29 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-current-cdna3"
plot "underflow.dat" index 30 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 31 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 32 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 33 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 34 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-current-cdna3-p128"
plot "underflow.dat" index 35 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 36 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 37 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.in", \
    "underflow.dat" index 38 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 39 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.qkv.w"
set title "fp8-delayed-hopper"
plot "underflow.dat" index 40 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 41 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 42 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 43 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 44 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-delayed-hopper-p128"
plot "underflow.dat" index 45 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 46 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 47 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 48 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 49 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-delayed-blackwell"
plot "underflow.dat" index 50 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 51 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 52 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 53 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 54 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-delayed-blackwell-p128"
plot "underflow.dat" index 55 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 56 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 57 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 58 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 59 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-delayed-cdna3"
plot "underflow.dat" index 60 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 61 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 62 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 63 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 64 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
set title "fp8-delayed-cdna3-p128"
plot "underflow.dat" index 65 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "mlp.down.in", \
    "underflow.dat" index 66 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 67 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "mlp.gate_up.grad", \
    "underflow.dat" index 68 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 69 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "attn.o.w"
unset multiplot
