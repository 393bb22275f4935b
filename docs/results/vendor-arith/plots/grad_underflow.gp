# grad_underflow.gp: Gradient underflow per site
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot grad_underflow.gp
# in this directory; the numbers are in grad_underflow.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "grad_underflow.png"
set ylabel "underflow fraction (mean over steps and seeds)"
set datafile missing "NaN"
set grid
set xlabel "gradient cast site"
set key outside right top
set title "Gradient underflow per site"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -25 nomirror
set logscale y
set format y "%.0e"
set yrange [1e-10:1]
plot \
    "grad_underflow.dat" using 2:xtic(1) lc rgb "#d62728" title "fp8-current", \
    "grad_underflow.dat" using 3 lc rgb "#2ca02c" title "fp8-delayed", \
    "grad_underflow.dat" using 4 lc rgb "#ff7f0e" title "fp8-current-hopper", \
    "grad_underflow.dat" using 5 lc rgb "#9467bd" title "fp8-current-hopper-p128", \
    "grad_underflow.dat" using 6 lc rgb "#8c564b" title "fp8-current-blackwell", \
    "grad_underflow.dat" using 7 lc rgb "#e377c2" title "fp8-current-blackwell-p128", \
    "grad_underflow.dat" using 8 lc rgb "#7f7f7f" title "fp8-current-cdna3", \
    "grad_underflow.dat" using 9 lc rgb "#bcbd22" title "fp8-current-cdna3-p128", \
    "grad_underflow.dat" using 10 lc rgb "#17becf" title "fp8-delayed-hopper", \
    "grad_underflow.dat" using 11 lc rgb "#000000" title "fp8-delayed-hopper-p128", \
    "grad_underflow.dat" using 12 lc rgb "#000080" title "fp8-delayed-blackwell", \
    "grad_underflow.dat" using 13 lc rgb "#b8860b" title "fp8-delayed-blackwell-p128", \
    "grad_underflow.dat" using 14 lc rgb "#006400" title "fp8-delayed-cdna3", \
    "grad_underflow.dat" using 15 lc rgb "#800000" title "fp8-delayed-cdna3-p128"
