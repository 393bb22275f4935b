# train_loss.gp: Training loss
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot train_loss.gp
# in this directory; the numbers are in train_loss.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1260,1840 font ",10"
} else {
    set terminal png noenhanced size 1260,1840
}
set output "train_loss.png"
set ylabel "training loss"
set datafile missing "NaN"
set grid
set key below font ",8" samplen 2
set multiplot layout 5,3 title "Training loss (x: optimizer step; one panel per preset)" font ",12"
set yrange [1.50069629:4.37992113]
set title "fp32"
plot "train_loss.dat" index 0 using 1:4 with lines lw 2 lc rgb "#1f77b4" title "fp32"
set title "bf16-amp"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 1 using 1:4 with lines lw 2 lc rgb "#d62728" title "bf16-amp"
set title "fp16-amp"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 2 using 1:4 with lines lw 2 lc rgb "#2ca02c" title "fp16-amp"
set title "fp16-amp-noscale"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 3 using 1:4 with lines lw 2 lc rgb "#ff7f0e" title "fp16-amp-noscale"
set title "fp16-static-1024"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 4 using 1:4 with lines lw 2 lc rgb "#9467bd" title "fp16-static-1024"
set title "pure-bf16"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 5 using 1:4 with lines lw 2 lc rgb "#8c564b" title "pure-bf16"
set title "pure-bf16-sr"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 6 using 1:4 with lines lw 2 lc rgb "#e377c2" title "pure-bf16-sr"
set title "pure-bf16-kahan"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 7 using 1:4 with lines lw 2 lc rgb "#7f7f7f" title "pure-bf16-kahan"
set title "fp8-delayed"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 8 using 1:4 with lines lw 2 lc rgb "#bcbd22" title "fp8-delayed"
set title "fp8-current"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 9 using 1:4 with lines lw 2 lc rgb "#17becf" title "fp8-current"
set title "fp8-block"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 10 using 1:4 with lines lw 2 lc rgb "#000000" title "fp8-block"
set title "mxfp8"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 11 using 1:4 with lines lw 2 lc rgb "#000080" title "mxfp8"
set title "mxfp6"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 12 using 1:4 with lines lw 2 lc rgb "#b8860b" title "mxfp6"
set title "mxfp4"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 13 using 1:4 with lines lw 2 lc rgb "#006400" title "mxfp4"
set title "nvfp4"
plot "train_loss.dat" index 0 using 1:4 with lines lw 1.5 lc rgb "#a0a0a0" title "fp32", \
    "train_loss.dat" index 14 using 1:4 with lines lw 2 lc rgb "#800000" title "nvfp4"
unset multiplot
