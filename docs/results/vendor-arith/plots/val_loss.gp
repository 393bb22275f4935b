# val_loss.gp: Validation loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_loss.gp
# in this directory; the numbers are in val_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1840 font ",10"
} else {
    set terminal png noenhanced size 1260,1840
}
set output "val_loss.png"
set ylabel "validation loss"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 5,3 title "Validation loss (x: optimizer step; one panel per preset)" font ",12"
set yrange [1.67176798:4.3597725]
set title "fp32"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#1f77b4" title "fp32"
set title "fp8-current"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#d62728" title "fp8-current"
set title "fp8-delayed"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 2 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#2ca02c" title "fp8-delayed"
set title "fp8-current-hopper"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 3 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#ff7f0e" title "fp8-current-hopper"
set title "fp8-current-hopper-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 4 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#9467bd" title "fp8-current-hopper-p128"
set title "fp8-current-blackwell"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 5 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#8c564b" title "fp8-current-blackwell"
set title "fp8-current-blackwell-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 6 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#e377c2" title "fp8-current-blackwell-p128"
set title "fp8-current-cdna3"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 7 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#7f7f7f" title "fp8-current-cdna3"
set title "fp8-current-cdna3-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 8 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#bcbd22" title "fp8-current-cdna3-p128"
set title "fp8-delayed-hopper"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 9 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#17becf" title "fp8-delayed-hopper"
set title "fp8-delayed-hopper-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 10 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#000000" title "fp8-delayed-hopper-p128"
set title "fp8-delayed-blackwell"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 11 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#000080" title "fp8-delayed-blackwell"
set title "fp8-delayed-blackwell-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 12 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#b8860b" title "fp8-delayed-blackwell-p128"
set title "fp8-delayed-cdna3"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 13 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#006400" title "fp8-delayed-cdna3"
set title "fp8-delayed-cdna3-p128"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 14 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#800000" title "fp8-delayed-cdna3-p128"
unset multiplot
