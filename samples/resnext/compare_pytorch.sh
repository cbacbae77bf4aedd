#!/bin/sh
# Side by side on this machine: PyTorch's ResNeXt-101 32x4d (channels_last, batch 4, 2 threads, 4 input channels)
# and samples/resnext in f32 with the same batch and threads; prints both and the ratio.
# Usage: samples/resnext/compare_pytorch.sh [path/to/torch_resnext.py] [path/to/resnext binary]
set -eu
peer=${1:-../shared/peers/torch_resnext.py}
bin=${2:-build/release/samples/resnext/resnext}
[ -f "$peer" ] || { echo "compare_pytorch: no peer script at $peer" >&2; exit 2; }
[ -x "$bin" ] || { echo "compare_pytorch: no sample binary at $bin (build the release preset first)" >&2; exit 2; }
torch_out=$(/usr/bin/python3 "$peer" 4 2 4)
echo "$torch_out"
ours_out=$("$bin" --dtype f32 --batch-size 4 --host-threads 2)
echo "$ours_out" | tail -n 12
torch_ips=$(echo "$torch_out" | awk '/^channels_last/ {print $NF == "img/s" ? $(NF-1) : $NF}')
ours_ips=$(echo "$ours_out" | awk '/^throughput_img_per_s:/ {print $2}')
awk -v a="$ours_ips" -v b="$torch_ips" 'BEGIN { printf "tilebsp f32 %.2f img/s, PyTorch channels_last %.2f img/s: ratio %.2fx\n", a, b, a / b }'
