set terminal svg size 900,560 noenhanced font 'sans,11' background rgb 'white'
set output "/work/main/docs/examples/release-report-plots/scaling-hybrid-tp4.svg"
set title "release: concurrency scaling (hybrid-tp4)"
set key inside top left box opaque
set grid ytics lc rgb '#dddddd'
set xlabel 'concurrent requests'
set ylabel 'aggregate tok/s (median over batches)'
set logscale x 2
set yrange [0:*]
$s0 << EOD
1 663.0058701931246
2 721.8464367658901
4 974.0773395479155
8 1004.3660935350778
16 1051.14809139869
EOD
$s1 << EOD
1 648.2426696792314
2 798.5347100608761
4 936.462616256302
8 1005.3183534629085
16 1096.3382001188315
EOD
$s2 << EOD
1 544.6419215205885
2 707.2234303185951
4 808.4165736948172
8 735.3434093168846
16 716.6359642443095
EOD
$s3 << EOD
1 535.9573423917511
2 583.7906567073709
4 684.7360731154351
8 666.8882691469103
16 768.0897663221879
EOD
$s4 << EOD
3 704.2429889047853
6 864.1506217715687
12 989.8681119356074
EOD
$s5 << EOD
3 745.5619620744458
6 936.86924298689
12 1001.9327761456739
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 1 title "code-sweep: code · baseline", \
     $s1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 1 title "code-sweep: code · candidate", \
     $s2 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 2 title "topic-sweep: topic · baseline", \
     $s3 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 2 title "topic-sweep: topic · candidate", \
     $s4 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' dt 3 title "mixed-sweep: mixed · baseline", \
     $s5 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' dt 3 title "mixed-sweep: mixed · candidate"
