set terminal pngcairo noenhanced size 1200,1500 font ",10"
set output "underflow.png"
set multiplot layout 5,1
set logscale y
set yrange [1e-5:1]
set key outside right
set ylabel "underflow fraction"
set xlabel "optimizer step"
set title "fp16-amp-noscale/seed-1"
plot "underflow.dat" index 0 using 1:3 with lines title "attn.qkv.grad", "underflow.dat" index 0 using 1:4 with lines title "attn.o.grad", "underflow.dat" index 0 using 1:5 with lines title "mlp.gate_up.grad", "underflow.dat" index 0 using 1:6 with lines title "mlp.down.grad", "underflow.dat" index 0 using 1:7 with lines title "lm_head.grad"
set title "n1024-noscale/seed-1"
plot "underflow.dat" index 1 using 1:3 with lines title "attn.qkv.grad", "underflow.dat" index 1 using 1:4 with lines title "attn.o.grad", "underflow.dat" index 1 using 1:5 with lines title "mlp.gate_up.grad", "underflow.dat" index 1 using 1:6 with lines title "mlp.down.grad", "underflow.dat" index 1 using 1:7 with lines title "lm_head.grad"
set title "n1024-amp/seed-1"
plot "underflow.dat" index 2 using 1:3 with lines title "attn.qkv.grad", "underflow.dat" index 2 using 1:4 with lines title "attn.o.grad", "underflow.dat" index 2 using 1:5 with lines title "mlp.gate_up.grad", "underflow.dat" index 2 using 1:6 with lines title "mlp.down.grad", "underflow.dat" index 2 using 1:7 with lines title "lm_head.grad"
set title "n1024-amp-grow/seed-1"
plot "underflow.dat" index 3 using 1:3 with lines title "attn.qkv.grad", "underflow.dat" index 3 using 1:4 with lines title "attn.o.grad", "underflow.dat" index 3 using 1:5 with lines title "mlp.gate_up.grad", "underflow.dat" index 3 using 1:6 with lines title "mlp.down.grad", "underflow.dat" index 3 using 1:7 with lines title "lm_head.grad"
set title "n1024-static16/seed-2"
plot "underflow.dat" index 4 using 1:3 with lines title "attn.qkv.grad", "underflow.dat" index 4 using 1:4 with lines title "attn.o.grad", "underflow.dat" index 4 using 1:5 with lines title "mlp.gate_up.grad", "underflow.dat" index 4 using 1:6 with lines title "mlp.down.grad", "underflow.dat" index 4 using 1:7 with lines title "lm_head.grad"
unset multiplot
