# loss_scale.gp: Loss scale
# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot loss_scale.gp
# in this directory; the numbers are in loss_scale.dat.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo noenhanced size 1000,600 font ",10"
} else {
    set terminal png noenhanced size 1000,600
}
set output "loss_scale.png"
set ylabel "loss scale"
set datafile missing "NaN"
set grid
set xlabel "optimizer step"
set key outside right top
set title "Loss scale"
set logscale y 2
set format y "2^%L"
set yrange [0.000488281:4]
plot \
    "loss_scale.dat" index 0 using 1:2 with steps lw 1.5 lc rgb "#9467bd" title "n1024-amp-grow", \
    "loss_scale.dat" index 0 using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.7 lc rgb "#9467bd" notitle, \
    "loss_scale.dat" index 1 using 1:2 with steps lw 1.5 lc rgb "#9467bd" notitle, \
    "loss_scale.dat" index 1 using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.7 lc rgb "#9467bd" notitle
