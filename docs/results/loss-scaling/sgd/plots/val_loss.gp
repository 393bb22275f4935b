# val_loss.gp: Validation loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot val_loss.gp
# in this directory; the numbers are in val_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1120 font ",10"
} else {
    set terminal png noenhanced size 1260,1120
}
set output "val_loss.png"
set ylabel "validation loss"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 3,3 title "Validation loss (x: optimizer step; one panel per preset)" font ",12"
set yrange [1.82497417:8.74290632]
set title "fp32"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#1f77b4" title "fp32"
set title "fp16-amp-noscale"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#d62728" title "fp16-amp-noscale"
set title "n1024-noscale"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 2 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#2ca02c" title "n1024-noscale"
set title "n1024-amp"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 3 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#ff7f0e" title "n1024-amp"
set title "n1024-amp-grow"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 4 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#9467bd" title "n1024-amp-grow"
set title "n1024-static16"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 5 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#8c564b" title "n1024-static16"
set title "n1024-static64"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 6 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#e377c2" title "n1024-static64"
set title "n1024-static256"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 7 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#7f7f7f" title "n1024-static256"
set title "n1024-bf16"
plot "val_loss.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "val_loss.dat" index 8 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "#bcbd22" title "n1024-bf16"
unset multiplot
