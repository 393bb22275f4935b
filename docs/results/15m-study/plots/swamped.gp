# swamped.gp: Swamped weight updates
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot swamped.gp
# in this directory; the numbers are in swamped.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "swamped.png"
set title "Swamped weight updates"
set xlabel "optimizer step"
set ylabel "swamped fraction of weight updates"
set datafile missing "NaN"
set key outside right top
set grid
plot \
    "swamped.dat" index 0 using 1:2 with lines lw 2 lc 3 dt 3 title "pure-bf16"
