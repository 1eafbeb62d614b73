#!/usr/bin/env bash
# How the committed H200 runs were made (device tool, one H200): ptxprobe from this checkout, the wheels
# the image lacks (pyelftools, capstone) and ptxas 12.4.131 carried in .whl/, results tarred into $OUT.
#   bash experiments/gpu/h200_sweeps.sh smoke|design|user|long
# WHEELS=.carry: the same, with the toolchains as toolchains.tar.xz (the tree a device call carries is capped)
. "$(dirname "$0")/preamble.sh"  # wheels, toolchains, PYTHONPATH, $OUT and $RUNS, the card in $OUT/status.txt
run() {  # name, experiment, seconds
  timeout -s INT "$3" python3 -m ptxprobe.cli rename-sweep -e "$2" --run -j 16 -q -o "/tmp/runs/$1" > "$OUT/$1.txt" 2>&1
  echo "$1: exit $?" | tee -a "$OUT/status.txt"
  tar -C /tmp/runs -czf "$OUT/$1.tar.gz" "$1"
}
python3 -m ptxprobe.cli toolchain list 2>&1 | tail -12 | tee -a "$OUT/status.txt"
case "${1:-smoke}" in
  smoke) timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -x 2>&1 | tee "$OUT/gpu-tests.log" | tail -15 ;;
  design) run h200-design experiments/definitions/h200_design.toml "${2:-540}" ;;
  pairs) run h200-design-pairs experiments/definitions/h200_design.toml "${2:-540}" ;;  # the same experiment, timed with the paired design
  sweep-explain)  # rename-sweep --run --explain end to end on sgemm.cu, as a user would run it
    timeout -s INT "${2:-280}" python3 -m ptxprobe.cli rename-sweep --cu experiments/user/sgemm.cu --entry sgemm \
      --spec experiments/user/sgemm.toml -s ptxas=triton --run --explain -j 16 -q -o /tmp/runs/h200-sweep-explain \
      > "$OUT/h200-sweep-explain.txt" 2>&1
    echo "h200-sweep-explain: exit $?" | tee -a "$OUT/status.txt"
    tar -C /tmp/runs --exclude='*.ncu-rep' -czf "$OUT/h200-sweep-explain.tar.gz" h200-sweep-explain ;;
  pairs-resume)  # finish the committed paired run: the groups already in its runtime.jsonl are skipped
    mkdir -p /tmp/runs && cp -r experiments/results/2026-12-02-h200-design-pairs /tmp/runs/h200-design-pairs
    run h200-design-pairs experiments/definitions/h200_design.toml "${2:-420}" ;;
  user) run h200-design-user experiments/definitions/h200_design_user.toml "${2:-540}" ;;
  long) run h200-design-long experiments/definitions/h200_design_long.toml "${2:-540}" ;;
  explain)  # ncu stall samples for the committed sgemm and ptxas-12.4 attention groups (why a name changes speed)
    mkdir -p /tmp/runs
    for r in design-user design; do
      cp -r "experiments/results/2026-12-02-h200-$r" "/tmp/runs/h200-$r"; rm -rf "/tmp/runs/h200-$r/explain"
    done
    ex() {  # run dir, group filter, label
      timeout -s INT 270 python3 -m ptxprobe.cli explain "/tmp/runs/$1" --group "$2" --max-groups 1 > "$OUT/$3.txt" 2>&1
      echo "$3: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/$3.txt"
    }
    ex h200-design-user 'sgemm@m=4096,n=4096,k=4096' explain-sgemm
    ex h200-design 'attention/fp16/d128/full/m128n64w8s3@4096@ptxas=12.4' explain-attention
    ex h200-design 'attention_persistent/fp8e5/d128/causal/m128n64w8s3@16384' explain-fp8
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_explain.py 2>&1 | tail -5 | tee "$OUT/gpu-explain-test.txt"
    tar -C /tmp/runs --exclude='*.ncu-rep' -czf "$OUT/explain.tar.gz" h200-design-user/explain h200-design/explain \
      $(cd /tmp/runs && ls -d */explain.json 2>/dev/null) ;;
esac
