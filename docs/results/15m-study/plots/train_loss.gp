# train_loss.gp: Training loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot train_loss.gp
# in this directory; the numbers are in train_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "train_loss.png"
set title "Training loss"
set xlabel "optimizer step"
set ylabel "training loss"
set datafile missing "NaN"
set key outside right top
set grid
plot \
    "train_loss.dat" index 0 using 1:4 with lines lw 2 lc 1 dt 1 title "fp32", \
    "train_loss.dat" index 1 using 1:4 with lines lw 2 lc 2 dt 2 title "bf16-amp", \
    "train_loss.dat" index 2 using 1:4 with lines lw 2 lc 3 dt 3 title "pure-bf16", \
    "train_loss.dat" index 3 using 1:4 with lines lw 2 lc 4 dt 4 title "fp8-delayed", \
    "train_loss.dat" index 4 using 1:4 with lines lw 2 lc 5 dt 5 title "mxfp4", \
    "train_loss.dat" index 5 using 1:4 with lines lw 2 lc 6 dt 1 title "nvfp4"
