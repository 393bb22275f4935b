# train_loss.gp: Training loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot train_loss.gp
# in this directory; the numbers are in train_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "train_loss.png"
set ylabel "training loss"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Training loss"
plot \
    "train_loss.dat" index 0 using 1:4 with lines lw 2 lc rgb "#1f77b4" dt 1 title "fp32", \
    "train_loss.dat" index 1 using 1:4 with lines lw 2 lc rgb "#d62728" dt 1 title "fp16-amp-noscale", \
    "train_loss.dat" index 2 using 1:4 with lines lw 2 lc rgb "#2ca02c" dt 1 title "n1024-noscale", \
    "train_loss.dat" index 3 using 1:4 with lines lw 2 lc rgb "#ff7f0e" dt 1 title "n1024-amp"
