set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/campaign-reports/scheduler-2026-12-04-115f24e-plots/scaling-single.svg"
set title "scheduler: concurrency scaling (single)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 598.5455023479849
4 1022.8689959123915
16 1277.5850848667255
EOD
$s1 << EOD
1 601.1283785531941
4 1027.781923893524
16 1364.851486223835
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · before", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · after"
