set terminal pngcairo size 1200,520 font ',10'
set output 'benchmarks/bench-4ranks/bench.png'
set datafile separator ','
set multiplot layout 1,2 title 'zeroc bench: small, 4 ranks'
set style fill solid 0.8
set boxwidth 0.7
set xtics rotate by -40 noenhanced
set key off
set grid ytics
set yrange [0:*]
set title 'throughput (tokens/s, median)'
plot 'benchmarks/bench-4ranks/bench.csv' every ::1 using 0:(strcol(9) eq "ok" ? $11 : 1/0):xtic(1) with boxes lc rgb '#3a7bd5'
set title 'peak device memory per rank (MiB)'
plot 'benchmarks/bench-4ranks/bench.csv' every ::1 using 0:(strcol(9) eq "ok" ? $15 : 1/0):xtic(1) with boxes lc rgb '#d5753a'
unset multiplot
