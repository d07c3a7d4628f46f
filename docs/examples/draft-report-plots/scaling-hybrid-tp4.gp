set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/draft-report-plots/scaling-hybrid-tp4.svg"
set title "draft: concurrency scaling (hybrid-tp4)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 137.33838903882184
4 174.92577800711427
EOD
$s1 << EOD
1 125.94695324058898
4 149.50444329488036
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · target-only", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · replica-adaptive"
