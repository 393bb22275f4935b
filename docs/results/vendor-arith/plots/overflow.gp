# overflow.gp: Overflow per site over steps
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot overflow.gp
# in this directory; the numbers are in overflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1120 font ",10"
} else {
    set terminal png noenhanced size 1260,1120
}
set output "overflow.png"
set ylabel "overflow fraction (log scale)"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 3,3 title "Overflow per site over steps (x: optimizer step; one panel per preset)" font ",12"
set logscale y
set format y "1e%L"
set yrange [1e-07:1]
set title "fp8-delayed"
plot "overflow.dat" index 0 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 1 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 2 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 3 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 4 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-hopper"
plot "overflow.dat" index 5 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 6 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 7 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 8 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 9 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-hopper-p128"
plot "overflow.dat" index 10 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 11 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 12 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 13 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 14 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-blackwell"
plot "overflow.dat" index 15 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 16 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 17 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 18 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 19 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-blackwell-p128"
plot "overflow.dat" index 20 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 21 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 22 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 23 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 24 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-cdna3"
plot "overflow.dat" index 25 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 26 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 27 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 28 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 29 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
set title "fp8-delayed-cdna3-p128"
plot "overflow.dat" index 30 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "overflow.dat" index 31 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.down.in", \
    "overflow.dat" index 32 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "attn.o.grad", \
    "overflow.dat" index 33 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "overflow.dat" index 34 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.in"
unset multiplot
