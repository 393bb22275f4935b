set terminal pngcairo size 900,560
set output "val_loss.png"
set title "Validation loss by accumulator (e4m3/e5m2 operands, K up to 2048)"
set xlabel "step"
set ylabel "validation loss"
set key top right
set grid
plot "val_loss.dat" using 1:2 with linespoints title "fp32", \
     "val_loss.dat" using 1:3 with linespoints title "fp8-current", \
     "val_loss.dat" using 1:4 with linespoints title "fp8-acc14-rne", \
     "val_loss.dat" using 1:5 with linespoints title "fp8-acc14-rtz", \
     "val_loss.dat" using 1:6 with linespoints title "fp8-acc14-rtz-p128", \
     "val_loss.dat" using 1:7 with linespoints title "fp8-acc11-rtz", \
     "val_loss.dat" using 1:8 with linespoints title "fp8-acc11-rtz-p128", \
     "val_loss.dat" using 1:9 with linespoints title "fp8-acc8-rtz", \
     "val_loss.dat" using 1:10 with linespoints title "fp8-acc8-rtz-p128"
