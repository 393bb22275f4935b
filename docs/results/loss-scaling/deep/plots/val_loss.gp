# val_loss.gp: Validation loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_loss.gp
# in this directory; the numbers are in val_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "val_loss.png"
set ylabel "validation loss"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Validation loss"
plot \
    "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#1f77b4" dt 1 title "fp32", \
    "val_loss.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#d62728" dt 1 title "fp16-amp-noscale"
