set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/kernels-report-plots/scaling-hybrid-tp4.svg"
set title "kernels-195296b: concurrency scaling (hybrid-tp4)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 165.22006070776877
4 225.4639637874524
EOD
$s1 << EOD
1 179.3408526747284
4 403.1886005032645
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · before", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · after"
