# grad_snr.gp: Gradient signal over quantization noise
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot grad_snr.gp
# in this directory; the numbers are in grad_snr.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "grad_snr.png"
set ylabel "||g|| / ||g_policy - g||"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Gradient signal over quantization noise"
set logscale y
set yrange [1:*]
set arrow from graph 0, first sqrt(3) to graph 1, first sqrt(3) nohead dt 2 lc rgb "#606060"
set label "sqrt(3)" at graph 0.01, first sqrt(3) offset 0,0.6 front
plot \
    "grad_snr.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#d62728" dt 1 title "nvfp4", \
    "grad_snr.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#2ca02c" dt 1 title "mxfp4"
