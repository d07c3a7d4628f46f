set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/release-report-plots/scaling-hybrid-ep2-local1.svg"
set title "release: concurrency scaling (hybrid-ep2-local1)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 706.0099478416498
2 808.7814548096444
4 959.3319994114244
8 1019.9026910851799
16 1025.6101442354116
EOD
$s1 << EOD
1 745.897767812646
2 980.0606231586746
4 1107.1615567030108
8 1074.9113684068875
16 1077.4490064884028
EOD
$s2 << EOD
1 600.5684233580905
2 646.3551596882314
4 780.8830280770628
8 640.9097496169718
16 706.1379085482222
EOD
$s3 << EOD
1 687.9693223614736
2 794.6015243140405
4 921.211445327948
8 671.4066357705792
16 771.863817550661
EOD
$s4 << EOD
3 875.7303877279508
6 925.8833142812923
12 1004.287266080379
EOD
$s5 << EOD
3 800.1645511742013
6 964.4627290664164
12 1035.1592441651446
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · baseline", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · candidate", \
     $s2 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 2 title "topic-sweep: topic · baseline", \
     $s3 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 2 title "topic-sweep: topic · candidate", \
     $s4 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 3 title "mixed-sweep: mixed · baseline", \
     $s5 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 3 title "mixed-sweep: mixed · candidate"
