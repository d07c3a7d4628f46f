set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/scheduler-report-plots/scaling-single.svg"
set title "scheduler: concurrency scaling (single)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 512.4841780846562
4 998.2008957077114
16 1355.9948272593706
EOD
$s1 << EOD
1 516.3487525081892
4 1436.4520878772892
16 1899.1339205252966
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · before", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · after"
