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
    "val_loss.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 2 dt 2 title "bf16", \
    "val_loss.dat" index 2 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 3 dt 3 title "diloco-32", \
    "val_loss.dat" index 3 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 4 dt 4 title "diloco-32-nvfp4", \
    "val_loss.dat" index 4 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 5 dt 5 title "e4m3", \
    "val_loss.dat" index 5 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 6 dt 1 title "e4m3-ef", \
    "val_loss.dat" index 6 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 7 dt 2 title "local-sgd-1", \
    "val_loss.dat" index 7 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 8 dt 3 title "local-sgd-32", \
    "val_loss.dat" index 8 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 9 dt 4 title "local-sgd-4", \
    "val_loss.dat" index 9 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 10 dt 5 title "local-sgd-8", \
    "val_loss.dat" index 10 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 11 dt 1 title "mxfp4", \
    "val_loss.dat" index 11 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 12 dt 2 title "mxfp4-ef", \
    "val_loss.dat" index 12 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 13 dt 3 title "nvfp4", \
    "val_loss.dat" index 13 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 14 dt 4 title "nvfp4-ef"
