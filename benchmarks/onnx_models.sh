#!/usr/bin/env bash
# torchvision classifiers through `tilebsp run` and ONNX Runtime, same file, same batch, same threads, one run.
# Usage: benchmarks/onnx_models.sh BUILD_DIR ORT_DIR MODELS_DIR [MODEL ...]
#   BUILD_DIR: a release build (its samples/tilebsp/tilebsp); ORT_DIR: ../shared/peers/onnxruntime after its
#   `npm install` (its README); MODELS_DIR: where the models are exported (benchmarks/onnx_export.py) when
#   missing. Environment: BATCH (4), THREADS (2), RUNS (6: ours counts all but the first, ORT's after 2 warm-ups).
# Prints per model: our items/s, ONNX Runtime's, the ratio, startup (our build + compile + engine, ORT's session
# creation as it comes, and again with glibc's heap on transparent huge pages, as the tool asks for its own:
# `huge_pages on` in its startup line), and the largest difference from PyTorch's outputs as a fraction of
# PyTorch's largest |output|.
set -euo pipefail
build=$1 ort=$2 models=$3
shift 3
list=("$@")
[ ${#list[@]} -gt 0 ] || list=(resnet50 resnext50_32x4d mobilenet_v2 efficientnet_b0 densenet121 squeezenet1_1 vgg11 inception_v3 vit_b_16)
batch=${BATCH:-4} threads=${THREADS:-2} runs=${RUNS:-6}
tool=$build/samples/tilebsp/tilebsp
mkdir -p "$models"
printf "%-18s %10s %10s %7s %12s %10s %12s %12s\n" model "ours/s" "ort/s" ratio "startup s" "ort s" "ort s (huge)" "err vs torch"
for m in "${list[@]}"; do
  if [ ! -f "$models/$m.onnx" ]; then
    /usr/bin/python3 "$(dirname "$0")/onnx_export.py" "$m" "$models" --batch "$batch" > /dev/null 2>&1
  fi
  ours=$("$tool" run "$models/$m.onnx" --batch-size "$batch" --inputs "$models/$m.input.npy" --outdir "$models/out_$m" \
         --iterations "$runs" --host-threads "$threads" 2>&1) || { echo "$m: tilebsp failed: $ours" | tail -3; continue; }
  rate=$(sed -n 's/^throughput_items_per_s: //p' <<< "$ours")
  startup=$(sed -n 's/^startup: build_s \([0-9.]*\) compile_s \([0-9.]*\) engine_s \([0-9.]*\).*/\1 \2 \3/p' <<< "$ours" | awk '{printf "%.2f", $1 + $2 + $3}')
  peer=$(cd "$ort" && node ort_model.mjs "$models/$m.onnx" --input "$models/$m.input.npy" --threads "$threads" --runs "$((runs - 1))" 2>&1)
  ort_rate=$(sed -n 's/.*throughput \([0-9.]*\) items\/s.*/\1/p' <<< "$peer")
  ort_start=$(sed -n 's/.*session_create \([0-9.]*\) ms.*/\1/p' <<< "$peer" | awk '{printf "%.2f", $1 / 1000}')
  ort_huge=$(cd "$ort" && GLIBC_TUNABLES=glibc.malloc.hugetlb=1 node ort_model.mjs "$models/$m.onnx" --input "$models/$m.input.npy" \
             --threads "$threads" --runs 1 2>&1 | sed -n 's/.*session_create \([0-9.]*\) ms.*/\1/p' | awk '{printf "%.2f", $1 / 1000}')
  err=$(/usr/bin/python3 -c "
import numpy as np, glob
ours = np.load(sorted(glob.glob('$models/out_$m/*.npy'))[0]); ref = np.load('$models/$m.torch.npy')
peak = np.abs(ref).max()
print('%.2e' % (np.abs(ours - ref).max() / peak) if peak > 0 else 'ref all 0')")
  printf "%-18s %10.2f %10.2f %7.2f %12s %10s %12s %12s\n" "$m" "$rate" "$ort_rate" "$(awk "BEGIN{print $rate / $ort_rate}")" "$startup" "$ort_start" "$ort_huge" "$err"
done
