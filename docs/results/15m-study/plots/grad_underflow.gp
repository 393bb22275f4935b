# grad_underflow.gp: Gradient underflow per site
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot grad_underflow.gp
# in this directory; the numbers are in grad_underflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "grad_underflow.png"
set title "Gradient underflow per site"
set xlabel "gradient cast site"
set ylabel "underflow fraction (mean over steps and seeds)"
set datafile missing "NaN"
set key outside right top
set grid
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -25 nomirror
set logscale y
set format y "%.0e"
set yrange [1e-06:1]
plot \
    "grad_underflow.dat" using 2:xtic(1) lc 2 title "bf16-amp", \
    "grad_underflow.dat" using 3 lc 3 title "pure-bf16", \
    "grad_underflow.dat" using 4 lc 4 title "fp8-delayed", \
    "grad_underflow.dat" using 5 lc 5 title "mxfp4", \
    "grad_underflow.dat" using 6 lc 6 title "nvfp4"
