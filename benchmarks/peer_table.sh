#!/bin/sh
# The per-row table of bench_matmul and bench_conv against oneDNN on this host: each binary once with interleaved
# repetitions (ours and oneDNN alternate within the run), JSON kept in OUT_DIR, ratios printed by ratios.py with
# the instruction sets the run recorded. For the AVX2 table on an AVX-512 host, cap both, on a build whose library
# holds the avx2 kernel set (-DTILEBSP_KERNEL_ISAS="host;avx2;generic"; without it the cap falls to the generic
# set, which the table's first line then names): TILEBSP_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2
# TILEBSP_CACHE_SIZES=32K,512K,32M benchmarks/peer_table.sh (docs/11).
# Usage: benchmarks/peer_table.sh [build dir, default build/release] [out dir, default /tmp/peer_table] [repetitions]
set -eu
build=${1:-build/release}
out=${2:-/tmp/peer_table}
reps=${3:-3}
here=$(dirname "$0")
mkdir -p "$out"
for b in bench_matmul bench_conv; do
  [ -x "$build/benchmarks/$b" ] || { echo "peer_table: no $build/benchmarks/$b (build the benchmarks first)" >&2; exit 2; }
done
[ -x "$build/benchmarks/fma_peak" ] && "$build/benchmarks/fma_peak"
"$build/benchmarks/bench_matmul" --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 --benchmark_filter='BM_(Matmul|Onednn)' \
  --benchmark_out="$out/matmul.json" --benchmark_out_format=json >/dev/null
"$build/benchmarks/bench_conv" --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 --benchmark_filter='BM_(Conv|Onednn)' \
  --benchmark_out="$out/conv.json" --benchmark_out_format=json >/dev/null
echo "$(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
python3 "$here/ratios.py" "$out/matmul.json"
python3 "$here/ratios.py" "$out/conv.json"
