#!/usr/bin/env bash
# How the committed H200 runs were made (device tool, one H200): ptxprobe from this checkout, the wheels
# the image lacks (pyelftools, capstone) and ptxas 12.4.131 carried in .whl/, results tarred into $OUT.
#   bash experiments/h200_run.sh smoke|design|user|long
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 2
ln -sfn "$PWD/kernels" /tmp/site/ptxprobe_kernels
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
export PTXPROBE_TOOLCHAINS="$PWD/.whl/toolchains" PTXPROBE_CACHE=/tmp/ptxprobe-cache
OUT=${OUT:-/tmp/out}
run() {  # name, experiment, seconds
  timeout -s INT "$3" python3 -m ptxprobe.cli rename-sweep -e "$2" --run -j 16 -q -o "/tmp/runs/$1" > "$OUT/$1.txt" 2>&1
  echo "$1: exit $?" | tee -a "$OUT/status.txt"
  tar -C /tmp/runs -czf "$OUT/$1.tar.gz" "$1"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/status.txt"
python3 -m ptxprobe.cli toolchain list 2>&1 | tail -12 | tee -a "$OUT/status.txt"
case "${1:-smoke}" in
  smoke) timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -x 2>&1 | tee "$OUT/gpu-tests.log" | tail -15 ;;
  design) run h200-design h200_design "${2:-540}" ;;
  user) run h200-design-user experiments/h200_design_user.toml "${2:-540}" ;;
  long) run h200-design-long h200_design_long "${2:-540}" ;;
esac
