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
    "swamped.dat" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 6 dt 1 title "pure-bf16", \
    "swamped.dat" index 1 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 7 dt 2 title "pure-bf16-sr", \
    "swamped.dat" index 2 using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc 8 dt 3 title "pure-bf16-kahan"
