# swamped.gp: Swamped weight updates
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot swamped.gp
# in this directory; the numbers are in swamped.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "swamped.png"
set ylabel "swamped fraction of weight updates"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Swamped weight updates"
set yrange [0:*]
set label "SR: a 'swamped' update is one this draw rounded back to the old weight; it is not lost on average" at graph 0.02, graph 0.96 front
plot \
    "swamped.dat" index 0 using 1:2 with lines lw 2 lc rgb "#8c564b" dt 2 title "pure-bf16", \
    "swamped.dat" index 1 using 1:2 with lines lw 2 lc rgb "#e377c2" dt 2 title "pure-bf16-sr (SR, see the caption)", \
    "swamped.dat" index 2 using 1:2 with lines lw 2 lc rgb "#7f7f7f" dt 2 title "pure-bf16-kahan"
