#!/bin/sh
# ResNeXt-101 32x4d f32 inference, batch 4, 2 threads, side by side on this machine: samples/resnext, ONNX Runtime
# (onnxruntime-node, CPU provider) and PyTorch (channels_last and NCHW). Rounds run the three in turn, so that a
# change in the machine's load touches all of them; prints each round, the medians and our ratios to each peer.
# Each median is also given as GFLOP/s (2 x the network's multiply-adds per image x img/s) and, where
# benchmarks/fma_peak was built beside the sample, as a share of the host's multiply-add peak: no library passes it.
# Usage: samples/resnext/compare_peers.sh [rounds] [resnext binary] [peers dir] [ONNX Runtime dir]
#   the ONNX Runtime dir holds node_modules and resnext101_32x4d.onnx (../shared/peers/onnxruntime/README.md);
#   without it the ONNX Runtime column is left out. BATCH and THREADS override 4 and 2.
set -eu
rounds=${1:-3}
bin=${2:-build/release/samples/resnext/resnext}
peers=${3:-../shared/peers}
ort=${4:-/tmp/ortpeer}
batch=${BATCH:-4}
threads=${THREADS:-2}
[ -x "$bin" ] || { echo "compare_peers: no sample binary at $bin (build the release preset first)" >&2; exit 2; }
[ -f "$peers/torch_resnext.py" ] || { echo "compare_peers: no PyTorch peer at $peers/torch_resnext.py" >&2; exit 2; }
have_ort=0
if [ -f "$ort/resnext101_32x4d.onnx" ] && [ -d "$ort/node_modules" ] && command -v node >/dev/null; then
  have_ort=1
else
  echo "compare_peers: no ONNX Runtime model at $ort/resnext101_32x4d.onnx: left out" >&2
fi
grep -q avx512f /proc/cpuinfo && isa=avx512 || isa=avx2
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $isa; batch $batch, $threads threads"
peak_bin=$(dirname "$bin")/../../benchmarks/fma_peak
peak=0
if [ -x "$peak_bin" ]; then
  peak=$("$peak_bin" "$threads" | awk -F': ' '/^fma_peak_gflops_[0-9]+_threads/ {print $2}')
  echo "f32 multiply-add peak on $threads threads: $peak GFLOP/s ($("$peak_bin" 1 | awk -F': ' '/^isa/ {print $2}'))"
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
  out=$("$bin" --dtype f32 --batch-size "$batch" --host-threads "$threads" --batches-per-step 1 --iterations 6)
  ours=$(echo "$out" | awk '/^throughput_img_per_s:/ {print $2}')
  gmac=$(echo "$out" | awk '/GMAC per image/ {for (i = 1; i <= NF; ++i) if ($i == "GMAC") print $(i-1)}')
  echo "tilebsp $r $ours" >>"$results"
  if [ "$have_ort" = 1 ]; then
    o=$(cd "$ort" && node ort_resnext.mjs resnext101_32x4d.onnx "$batch" "$threads" 5 | awk '/^ort_cpu/ {print $(NF-1)}')
    echo "onnxruntime $r $o" >>"$results"
  fi
  t=$(/usr/bin/python3 "$peers/torch_resnext.py" "$batch" "$threads" 4)
  echo "pytorch_channels_last $r $(echo "$t" | awk '/^channels_last/ {print $(NF-1)}')" >>"$results"
  echo "pytorch_nchw $r $(echo "$t" | awk '/^nchw/ {print $(NF-1)}')" >>"$results"
  grep " $r " "$results" | awk '{printf "  round %s %-22s %7.2f img/s\n", $2, $1, $3}'
  r=$((r + 1))
done
awk -v gmac="$gmac" -v peak="$peak" '
  { v[$1] = v[$1] " " $3; n[$1]++ }
  END {
    for (k in v) {
      c = split(substr(v[k], 2), a, " ")
      for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      med[k] = c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
      gf = 2 * gmac * med[k]
      printf "median %-22s %7.2f img/s (%d rounds), %6.1f GFLOP/s", k, med[k], c, gf
      if (peak > 0) printf " = %3.0f%% of the multiply-add peak", 100 * gf / peak
      printf "\n"
    }
    for (k in med) if (k != "tilebsp") printf "tilebsp / %-22s %5.2fx\n", k, med["tilebsp"] / med[k]
  }' "$results" | sort
