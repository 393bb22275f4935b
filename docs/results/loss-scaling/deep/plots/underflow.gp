# underflow.gp: Underflow per site over steps
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot underflow.gp
# in this directory; the numbers are in underflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "underflow.png"
set ylabel "underflow fraction (log scale)"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Underflow per site over steps"
set logscale y
set format y "1e%L"
set yrange [1e-05:1]
set title "Underflow per site over steps: fp16-amp-noscale"
plot "underflow.dat" index 0 using 1:2 with lines lw 1.5 lc rgb "#1f77b4" dt 1 title "attn.qkv.grad", \
    "underflow.dat" index 1 using 1:2 with lines lw 1.5 lc rgb "#d62728" dt 1 title "mlp.gate_up.grad", \
    "underflow.dat" index 2 using 1:2 with lines lw 1.5 lc rgb "#2ca02c" dt 1 title "lm_head.grad", \
    "underflow.dat" index 3 using 1:2 with lines lw 1.5 lc rgb "#ff7f0e" dt 1 title "mlp.down.grad", \
    "underflow.dat" index 4 using 1:2 with lines lw 1.5 lc rgb "#9467bd" dt 1 title "attn.o.grad"
