#!/usr/bin/env bash
# Time to first result: graph build and compile seconds and peak resident memory of the samples (--compile-only),
# with and without the executable cache, beside ONNX Runtime's session creation for the same ResNeXt-101, in one
# run. Not a test: timings vary with the host.
# Usage: benchmarks/startup.sh BUILD_DIR [ORT_DIR]
#   BUILD_DIR: a Release build with the samples (build/release);
#   ORT_DIR:   a prepared ../shared/peers/onnxruntime copy (npm install done, resnext101_32x4d.onnx exported with
#              batch 4; see its README). Without it the peer is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: benchmarks/startup.sh BUILD_DIR [ORT_DIR]}
ort=${2:-}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT

# "build_s compile_s peak_GB compiled|loaded" from a sample's "startup:" line (--compile-only)
figures() { awk '/^startup:/ { print $3, $5, $7, $9 }'; }

printf '%-44s %8s %8s %8s %8s  %s\n' case build_s comp_s total_s peak_GB compile
row() {  # label, sample command...
  local label=$1
  shift
  read -r b c m h < <("$@" 2>/dev/null | figures)
  printf '%-44s %8.2f %8.2f %8.2f %8.2f  %s\n' "$label" "$b" "$c" "$(echo "$b + $c" | bc -l)" "$m" "$h"
  echo "$b + $c" | bc -l > "$cache/last_total"
}
resnext=("$build/samples/resnext/resnext" --dtype f32 --batch-size 4 --compile-only)
row "ResNeXt-101 f32 b4, 1 IPU" "${resnext[@]}"
one=$(cat "$cache/last_total")
row "ResNeXt-101 f32 b4, 1 IPU, cache miss" "${resnext[@]}" --executable-cache "$cache/resnext"
row "ResNeXt-101 f32 b4, 1 IPU, cache hit" "${resnext[@]}" --executable-cache "$cache/resnext"
row "ResNeXt-101 f32 b4, 4 IPUs" "${resnext[@]}" --num-ipus 4
four=$(cat "$cache/last_total")
row "MNIST CNN (batch 32)" "$build/samples/mnist/mnist" --model cnn --compile-only
row "MNIST CNN (batch 32), cache miss" "$build/samples/mnist/mnist" --model cnn --compile-only --executable-cache "$cache/mnist"
row "MNIST CNN (batch 32), cache hit" "$build/samples/mnist/mnist" --model cnn --compile-only --executable-cache "$cache/mnist"
printf '4 IPUs / 1 IPU: %.2fx (target <= 4x)\n' "$(echo "$four / $one" | bc -l)"
if [ -n "$ort" ]; then
  ms=$(cd "$ort" && node ort_resnext.mjs resnext101_32x4d.onnx 4 2 1 | awk '{ for (i = 1; i < NF; ++i) if ($i == "session_create") print $(i + 1) }')
  printf '%-44s %35.2f\n' "ONNX Runtime: InferenceSession.create" "$(echo "$ms / 1000" | bc -l)"
  printf 'tilebsp 1 IPU / ONNX Runtime session: %.2fx (target <= 5x)\n' "$(echo "$one * 1000 / $ms" | bc -l)"
fi
