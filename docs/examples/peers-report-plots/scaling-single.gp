set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/peers-report-plots/scaling-single.svg"
set title "peers: concurrency scaling (single)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 53.09288611998536
4 142.2423200741851
16 258.49507254162154
EOD
$s1 << EOD
1 562.791008245429
4 871.1169390283935
16 1311.1169878521441
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · llama-cpp", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · tandem"
