# underflow.gp: Underflow per site over steps
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot underflow.gp
# in this directory; the numbers are in underflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1480 font ",10"
} else {
    set terminal png noenhanced size 1260,1480
}
set output "underflow.png"
set ylabel "underflow fraction (log scale)"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 4,3 title "Underflow per site over steps (x: optimizer step; one panel per preset)" font ",12"
set logscale y
set format y "1e%L"
set yrange [1e-07:1]
set title "fp16-amp"
plot "underflow.dat" index 0 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 1 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 2 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w", \
    "underflow.dat" index 3 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 4 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad"
set title "fp16-amp-noscale"
plot "underflow.dat" index 5 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "lm_head.grad", \
    "underflow.dat" index 6 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 7 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 8 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "mlp.down.grad", \
    "underflow.dat" index 9 using 1:2 with lines lw 1.5 lc rgb "#7f7f7f" dt 2 title "attn.o.grad"
set title "fp16-static-1024"
plot "underflow.dat" index 10 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 11 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 12 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 13 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w", \
    "underflow.dat" index 14 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w"
set title "fp8-delayed"
plot "underflow.dat" index 15 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 16 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 17 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 18 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 19 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w"
set title "fp8-current"
plot "underflow.dat" index 20 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 21 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 22 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.o.in", \
    "underflow.dat" index 23 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 24 using 1:2 with lines lw 1.5 lc rgb "#17becf" dt 2 title "attn.qkv.w"
set title "fp8-block"
plot "underflow.dat" index 25 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 26 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 27 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 28 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w", \
    "underflow.dat" index 29 using 1:2 with lines lw 1.5 lc rgb "#000000" dt 3 title "mlp.gate_up.w"
set title "mxfp8"
plot "underflow.dat" index 30 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 31 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.o.in", \
    "underflow.dat" index 32 using 1:2 with lines lw 1.5 lc rgb "#000080" dt 3 title "mlp.gate_up.in", \
    "underflow.dat" index 33 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w", \
    "underflow.dat" index 34 using 1:2 with lines lw 1.5 lc rgb "#000000" dt 3 title "mlp.gate_up.w"
set title "mxfp6"
plot "underflow.dat" index 35 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 36 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 37 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.o.in", \
    "underflow.dat" index 38 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 39 using 1:2 with lines lw 1.5 lc rgb "#000080" dt 3 title "mlp.gate_up.in"
set title "mxfp4"
plot "underflow.dat" index 40 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 41 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 42 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 43 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.o.in", \
    "underflow.dat" index 44 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w"
set title "nvfp4"
plot "underflow.dat" index 45 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "underflow.dat" index 46 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 47 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.w", \
    "underflow.dat" index 48 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.w", \
    "underflow.dat" index 49 using 1:2 with lines lw 1.5 lc rgb "#000000" dt 3 title "mlp.gate_up.w"
unset multiplot
