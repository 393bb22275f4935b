# val_loss.gp: Validation loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_loss.gp
# in this directory; the numbers are in val_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "val_loss.png"
set title "Validation loss"
set xlabel "optimizer step"
set ylabel "validation loss"
set datafile missing "NaN"
set key outside right top
set grid
plot \
    "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 1 dt 1 title "fp32", \
    "val_loss.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 2 dt 2 title "bf16-amp", \
    "val_loss.dat" index 2 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 3 dt 3 title "fp16-amp", \
    "val_loss.dat" index 3 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 4 dt 4 title "fp16-amp-noscale", \
    "val_loss.dat" index 4 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 5 dt 5 title "fp16-static-1024", \
    "val_loss.dat" index 5 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 6 dt 1 title "pure-bf16", \
    "val_loss.dat" index 6 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 7 dt 2 title "pure-bf16-sr", \
    "val_loss.dat" index 7 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 8 dt 3 title "pure-bf16-kahan", \
    "val_loss.dat" index 8 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 9 dt 4 title "fp8-delayed", \
    "val_loss.dat" index 9 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 10 dt 5 title "fp8-current", \
    "val_loss.dat" index 10 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 11 dt 1 title "fp8-block", \
    "val_loss.dat" index 11 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 12 dt 2 title "mxfp8", \
    "val_loss.dat" index 12 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 13 dt 3 title "mxfp6", \
    "val_loss.dat" index 13 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 14 dt 4 title "mxfp4", \
    "val_loss.dat" index 14 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 15 dt 5 title "nvfp4"
