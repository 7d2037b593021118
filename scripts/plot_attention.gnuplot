# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# plot_attention.gnuplot — rendered by scripts/plot_attention.sh, which sets
# datafile (blocks of "tokens ms bound_ms" per cache), outfile, blocks, qpk
# and names (the caches, in block order).
set terminal pngcairo size 1050,560 font "sans,11" noenhanced  # cache names keep their underscores
set output outfile
set title sprintf("kvq fused decode attention, 8 KV heads x 128, %d query head(s) per KV head, one thread", qpk)
set xlabel "cached tokens"
set ylabel "ms per decode step (one layer)"
set logscale xy
set xrange [700:200000]  # up to the 128K rows of a full run
set key outside right top
set grid
plot for [i=0:blocks-1] datafile index i using 1:2 with linespoints lw 2 pt 7 \
       title columnheader(1), \
     for [i=0:blocks-1] datafile index i using 1:3 with lines dt 2 lc i+1 \
       title sprintf("%s bound", word(names, i+1))
