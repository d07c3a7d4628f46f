set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/campaign-reports/kernels-2026-12-03-7b6b226-plots/scaling-hybrid-tp4.svg"
set title "kernels: concurrency scaling (hybrid-tp4)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 142.49951772386007
4 182.7095183175866
EOD
$s1 << EOD
1 141.22598578671767
4 188.90662160933516
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · before", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · after"
