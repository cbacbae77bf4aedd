#!/usr/bin/env bash
# Compile-time probes beside their Eigen counterparts: seconds and peak resident memory of one g++ -O2 compile
# of each probe file (benchmarks/compile_time/), and the ratio to its peer, in one run. Not a test: timings vary
# with the host. Usage: [REPEAT=N] benchmarks/compile_time.sh [CXX]   (Eigen from Debian's libeigen3-dev)
# Each tilebsp probe is compiled twice: header-only (tilebsp::tilebsp) and against the compiled library
# (-DTILEBSP_COMPILED: what tilebsp::compiled consumers see; the library's own build is not timed here).
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-g++}
probes=benchmarks/compile_time
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-std=c++20 -O2 -Iinclude -I/usr/include/eigen3)

measure() {  # times file [extra flags...] -> "seconds peak_MB": the least time of `times` compiles
  local times=$1 file=$2
  shift 2
  : >"$out/times"
  for _ in $(seq "$times"); do
    /usr/bin/time -f '%e %M' -o "$out/time" "$cxx" "${flags[@]}" "$@" -c "$probes/$file" -o "$out/probe.o"
    cat "$out/time" >>"$out/times"
  done
  sort -n "$out/times" | head -1 | awk '{printf "%.2f %.0f\n", $1, $2 / 1024}'
}
# A single compile swings by a quarter on a shared host (the first one also reads the headers from disk): the
# peers, seconds each, always take the least of 3; ours the least of REPEAT (default 1).
repeat=${REPEAT:-1}

read -r eigen_bare_s eigen_bare_mb < <(measure 3 eigen_bare.cpp)
read -r eigen_product_s eigen_product_mb < <(measure 3 eigen_product.cpp)
printf '%-34s %8s %8s %8s\n' probe seconds peak_MB ratio
printf '%-34s %8s %8s %8s\n' 'Eigen: #include <Eigen/Dense>' "$eigen_bare_s" "$eigen_bare_mb" 1.00
printf '%-34s %8s %8s %8s\n' 'Eigen: 256x256 product' "$eigen_product_s" "$eigen_product_mb" 1.00
# Issue 65's targets: compiled 1.5x, 2x and 3x Eigen (include, matmul, conv step); header-only 2.5x, 10x and 15x.
for mode in header-only compiled; do
  extra=()
  targets=(2.5x - 10x 15x)
  if [ "$mode" = compiled ]; then
    extra=(-DTILEBSP_COMPILED)
    targets=(1.5x - 2x 3x)
  fi
  for probe in "bare bare.cpp $eigen_bare_s (target ${targets[0]})" "readme readme.cpp $eigen_bare_s (target ${targets[1]})" \
               "matmul matmul.cpp $eigen_product_s (target ${targets[2]})" "conv_step conv_step.cpp $eigen_product_s (target ${targets[3]})"; do
    read -r name file peer target <<<"$probe"
    read -r s mb < <(measure "$repeat" "$file" "${extra[@]}")
    printf '%-34s %8s %8s %8s %s\n' "$mode: $name" "$s" "$mb" "$(awk -v a="$s" -v b="$peer" 'BEGIN{printf "%.2f", a / b}')" \
      "$target"
  done
done
