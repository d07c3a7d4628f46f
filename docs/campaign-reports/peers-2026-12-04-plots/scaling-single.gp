set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/campaign-reports/peers-2026-12-04-plots/scaling-single.svg"
set title "peers: concurrency scaling (single)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 568.1371095154872
4 810.83991875434
16 1062.239080077577
EOD
$s1 << EOD
1 50.09284420288598
4 146.39220070253396
16 311.1014116876926
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · tandem", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · llama-cpp"
