#!/bin/sh
# Side by side on this machine: the PyTorch training peer and samples/mnist, each 2 epochs of Fashion-MNIST at
# batch 32 on 2 threads, per model; prints both, their mean training samples/s and the ratio.
# Usage: samples/mnist/compare_pytorch.sh [models, default "mlp cnn"] [path/to/torch_mnist.py] [path/to/mnist binary]
set -eu
models=${1:-mlp cnn}
peer=${2:-../shared/peers/torch_mnist.py}
bin=${3:-build/release/samples/mnist/mnist}
[ -f "$peer" ] || { echo "compare_pytorch: no peer script at $peer" >&2; exit 2; }
[ -x "$bin" ] || { echo "compare_pytorch: no sample binary at $bin (build the release preset first)" >&2; exit 2; }
for m in $models; do
  torch_out=$(/usr/bin/python3 "$peer" "$m" 2 32 2)
  echo "$torch_out"
  ours_out=$("$bin" --model "$m" --epochs 2 --batch-size 32 --host-threads 2)
  echo "$ours_out" | grep -E '^(model|epoch [0-9]+/[0-9]+: loss|test_accuracy)'
  torch_sps=$(echo "$torch_out" | awk '/samples\/s/ { for (i = 1; i <= NF; ++i) if ($i == "samples/s") { s += $(i-1); n++ } } END { print s / n }')
  ours_sps=$(echo "$ours_out" | awk '/^epoch [0-9]+\/[0-9]+: loss/ { s += $(NF-1); n++ } END { print s / n }')
  awk -v m="$m" -v a="$ours_sps" -v b="$torch_sps" \
    'BEGIN { printf "%s: tilebsp %.0f samples/s, PyTorch %.0f samples/s: ratio %.2fx\n", m, a, b, a / b }'
done
