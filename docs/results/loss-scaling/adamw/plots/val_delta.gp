# val_delta.gp: Validation loss against the baseline
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_delta.gp
# in this directory; the numbers are in val_delta.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "val_delta.png"
set ylabel "validation loss - fp32's (same seed)"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Validation loss against the baseline"
set arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb "#000000" lw 1
set style fill transparent solid 0.15 noborder
plot \
    "val_delta.dat" index 0 using 1:3:4 with filledcurves lc rgb "#d62728" notitle, \
    "val_delta.dat" index 0 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#d62728" dt 1 title "fp16-amp-noscale", \
    "val_delta.dat" index 1 using 1:3:4 with filledcurves lc rgb "#2ca02c" notitle, \
    "val_delta.dat" index 1 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#2ca02c" dt 1 title "n1024-noscale", \
    "val_delta.dat" index 2 using 1:3:4 with filledcurves lc rgb "#ff7f0e" notitle, \
    "val_delta.dat" index 2 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#ff7f0e" dt 1 title "n1024-amp"
