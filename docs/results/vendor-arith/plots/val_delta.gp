# val_delta.gp: Validation loss against the baseline
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_delta.gp
# in this directory; the numbers are in val_delta.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1840 font ",10"
} else {
    set terminal png noenhanced size 1260,1840
}
set output "val_delta.png"
set ylabel "validation loss - fp32's (same seed)"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 5,3 title "Validation loss against the baseline (x: optimizer step; one panel per preset)" font ",12"
set arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb "#000000" lw 1
set style fill transparent solid 0.15 noborder
set yrange [-0.0166323375:0.0205172475]
set title "fp8-current"
plot "val_delta.dat" index 0 using 1:3:4 with filledcurves lc rgb "#d62728" notitle, \
    "val_delta.dat" index 0 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#d62728" notitle
set title "fp8-delayed"
plot "val_delta.dat" index 1 using 1:3:4 with filledcurves lc rgb "#2ca02c" notitle, \
    "val_delta.dat" index 1 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#2ca02c" notitle
set title "fp8-current-hopper"
plot "val_delta.dat" index 2 using 1:3:4 with filledcurves lc rgb "#ff7f0e" notitle, \
    "val_delta.dat" index 2 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#ff7f0e" notitle
set title "fp8-current-hopper-p128"
plot "val_delta.dat" index 3 using 1:3:4 with filledcurves lc rgb "#9467bd" notitle, \
    "val_delta.dat" index 3 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#9467bd" notitle
set title "fp8-current-blackwell"
plot "val_delta.dat" index 4 using 1:3:4 with filledcurves lc rgb "#8c564b" notitle, \
    "val_delta.dat" index 4 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#8c564b" notitle
set title "fp8-current-blackwell-p128"
plot "val_delta.dat" index 5 using 1:3:4 with filledcurves lc rgb "#e377c2" notitle, \
    "val_delta.dat" index 5 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#e377c2" notitle
set title "fp8-current-cdna3"
plot "val_delta.dat" index 6 using 1:3:4 with filledcurves lc rgb "#7f7f7f" notitle, \
    "val_delta.dat" index 6 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#7f7f7f" notitle
set title "fp8-current-cdna3-p128"
plot "val_delta.dat" index 7 using 1:3:4 with filledcurves lc rgb "#bcbd22" notitle, \
    "val_delta.dat" index 7 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#bcbd22" notitle
set title "fp8-delayed-hopper"
plot "val_delta.dat" index 8 using 1:3:4 with filledcurves lc rgb "#17becf" notitle, \
    "val_delta.dat" index 8 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#17becf" notitle
set title "fp8-delayed-hopper-p128"
plot "val_delta.dat" index 9 using 1:3:4 with filledcurves lc rgb "#000000" notitle, \
    "val_delta.dat" index 9 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#000000" notitle
set title "fp8-delayed-blackwell"
plot "val_delta.dat" index 10 using 1:3:4 with filledcurves lc rgb "#000080" notitle, \
    "val_delta.dat" index 10 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#000080" notitle
set title "fp8-delayed-blackwell-p128"
plot "val_delta.dat" index 11 using 1:3:4 with filledcurves lc rgb "#b8860b" notitle, \
    "val_delta.dat" index 11 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#b8860b" notitle
set title "fp8-delayed-cdna3"
plot "val_delta.dat" index 12 using 1:3:4 with filledcurves lc rgb "#006400" notitle, \
    "val_delta.dat" index 12 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#006400" notitle
set title "fp8-delayed-cdna3-p128"
plot "val_delta.dat" index 13 using 1:3:4 with filledcurves lc rgb "#800000" notitle, \
    "val_delta.dat" index 13 using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc rgb "#800000" notitle
unset multiplot
