# overflow.gp: Overflow per site over steps
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot overflow.gp
# in this directory; the numbers are in overflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,760 font ",10"
} else {
    set terminal png noenhanced size 1260,760
}
set output "overflow.png"
set ylabel "overflow fraction (log scale)"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 2,3 title "Overflow per site over steps (x: optimizer step; one panel per preset)" font ",12"
set logscale y
set format y "1e%L"
set yrange [1e-07:1]
set title "fp8-delayed"
plot "overflow.dat" index 0 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 1 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 2 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 3 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 4 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "mxfp8"
plot "overflow.dat" index 5 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "attn.qkv.in", \
    "overflow.dat" index 6 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "mlp.gate_up.in", \
    "overflow.dat" index 7 using 1:2 with lines lw 1.5 lc rgb "#7f7f7f" dt 2 title "mlp.gate_up.w", \
    "overflow.dat" index 8 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.qkv.w", \
    "overflow.dat" index 9 using 1:2 with lines lw 1.5 lc rgb "#17becf" dt 2 title "attn.o.w"
set title "mxfp6"
plot "overflow.dat" index 10 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 11 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 12 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 13 using 1:2 with lines lw 1.5 lc rgb "#000000" dt 3 title "mlp.gate_up.grad", \
    "overflow.dat" index 14 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "attn.qkv.in"
set title "mxfp4"
plot "overflow.dat" index 15 using 1:2 with lines lw 1.5 lc rgb "#8c564b" dt 2 title "attn.qkv.in", \
    "overflow.dat" index 16 using 1:2 with lines lw 1.5 lc rgb "#7f7f7f" dt 2 title "mlp.gate_up.w", \
    "overflow.dat" index 17 using 1:2 with lines lw 1.5 lc rgb "#e377c2" dt 2 title "mlp.gate_up.in", \
    "overflow.dat" index 18 using 1:2 with lines lw 1.5 lc rgb "#bcbd22" dt 2 title "attn.qkv.w", \
    "overflow.dat" index 19 using 1:2 with lines lw 1.5 lc rgb "#17becf" dt 2 title "attn.o.w"
set title "nvfp4"
plot "overflow.dat" index 20 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 21 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 22 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 23 using 1:2 with lines lw 1.5 lc rgb "#000000" dt 3 title "mlp.gate_up.grad"
unset multiplot
