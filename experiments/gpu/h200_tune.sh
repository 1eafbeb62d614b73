#!/usr/bin/env bash
# ptxprobe tune on one H200 (device tool), after experiments/gpu/preamble.sh (wheels from .whl/ into /tmp/site, ptxas
# 12.4.131 from .whl/toolchains.tar.xz; Triton 3.6's ptxas 12.8.93; nvcc 13.0's ptxas on PATH), results under $OUT.
#   bash experiments/gpu/h200_tune.sh tune [sgemm]     # on the H200
#   DRY_RUN=1 bash experiments/gpu/h200_tune.sh tune sgemm   # any machine: the static pruning alone (--no-run)
#   tune   the fp8 persistent attention (experiments/definitions/h200_tune.toml): names {base}/cutlass_{base}, ptxas
#          triton/12.4/13.0, options default and -O2; <= 3 GPU minutes; $OUT/h200-tune.{txt,json,tar.gz}
#   cuda   the registered CUDA C++ FA2 attention (experiments/definitions/h200_tune_cuda.toml: fp16, D128, N 16k), the same space
#          as tune; $OUT/h200-tune-cuda.{txt,json,tar.gz}
#   sgemm  the CUDA C++ FFMA sgemm (experiments/user/sgemm.cu + sgemm.toml, both sizes): nvcc 13.0's ptxas is yours,
#          Triton's and 12.4 besides; $OUT/h200-tune-sgemm.{txt,json,tar.gz}
#   ffma   the Triton FFMA matmul named as a CUTLASS-minded author might (cutlass_matmul_fp32 of
#          experiments/user/ffma_matmul.py, spec ffma_matmul.toml) tuned, then its program run by
#          `ptxprobe apply --rounds $APPLY_ROUNDS` (yours, tuned, A/A each round; the program's own ms= line);
#          $OUT/h200-tune-ffma.{txt,json,tar.gz}, $OUT/h200-apply-ffma.{txt,json}
#   proof  the same in one command: `ptxprobe tune ... --rounds 10 -- python3 experiments/user/ffma_matmul.py ...`
#          (tune, then the program with the recommendation A/B against yours); $OUT/h200-tune-proof.{txt,json,tar.gz}
#   program  the FFMA matmul's program given alone: `ptxprobe tune ... -- python3 experiments/user/ffma_matmul.py
#          cutlass_matmul_fp32` captures its kernel, prunes, races each distinct code inside the program by its ms=
#          line, then the proof A/B; $OUT/h200-tune-program.{txt,json,tar.gz}, $OUT/h200-tune-program-apply.json
#   cute   a CuTe DSL program: the GPU test of apply's JIT swap (tests/test_gpu_cute.py), then CUTLASS's FA2 example
#          (fetched into external/) run by its own run() through experiments/external/cute_fa2_program.py, tuned
#          by its us= line: its kernel's name as the DSL gives it (cutlass) against the trigger-free spelling, your
#          own ptxas, raced inside the program, then the proof A/B; the DSL's wheels (cp312) must be in .whl/;
#          $OUT/h200-tune-cute.{txt,json,tar.gz}, $OUT/h200-tune-cute-apply.json, $OUT/gpu-test-cute.log;
#          CUTE_ARGS=--static-layout CUTE_TAG=-static SKIP_GPU_TEST=1: the static-layout variant of the program
#   cute-regime  the static-layout CuTe FA2 program (as cute with CUTE_ARGS=--static-layout) tuned in two regimes of
#          its own: runs of CUTE_BURST_ITERATIONS=20 timed launches (about 75 ms on an H200: a burst), then runs that
#          launch untimed for CUTE_SETTLE_S=1.5 s before timing CUTE_SUSTAINED_ITERATIONS=500 (held at the power
#          limit); a program's regime is the program's own, so tune records each run's clock and power beside it;
#          $OUT/h200-tune-cute-{burst,sustained}.{txt,json,tar.gz} and -apply.json; on an H100 one run of the program
#          took about 20 s (its JIT compile), so each regime needs a call of its own: CUTE_REGIMES=burst, then
#          CUTE_REGIMES=sustained, SECONDS_CUTE_REGIME=560
#   The CuTe DSL's wheels are larger than a device call carries (nvidia-cutlass-dsl-libs-cu12 is 92 MB): its files
#   travel unpacked as two xz parts, the first copied to the machine's /tmp by a call of its own (a carried path
#   is removed from the machine when the next call does not carry it), then extracted into /tmp/site with the small
#   DSL wheels installed beside, and this script run with SITE_READY=1
#   inductor  a torch.compile'd transformer block (experiments/external/inductor_model.py: Inductor writes its Triton
#          kernels) tuned by its step_ms= line: names {base}/cutlass_{base}, your ptxas, default and -O2, each
#          captured kernel raced inside the program, then the proof; stopped by SIGINT at SECONDS_INDUCTOR (tuned.json
#          then holds what the race completed); $OUT/h200-tune-inductor.{txt,json,tar.gz}
#   regime  the FFMA tune of `ffma` proven in both regimes (--regime burst, then --regime sustained: the race in
#          bursts, the proof with each arm held alone); $OUT/h200-tune-ffma-{burst,sustained}.{txt,json,tar.gz}
#   regime-sweep  rename-sweep --run of the FFMA matmul ({base} against the trigger-free spelling), once per regime;
#          $OUT/h200-sweep-ffma-{burst,sustained}.{txt,json,tar.gz}
# Each step prints its exit code (0: nothing raced faster, 1: confirmed on fresh rounds, 5: not confirmed,
# 6: slower) and a short table.
. "$(dirname "$0")/preamble.sh"  # wheels, toolchains, PYTHONPATH, $OUT and $RUNS, the card in $OUT/status.txt
RUN=()
[ -n "${DRY_RUN:-}" ] && RUN=(--no-run)
SPACE=(--names '{base},cutlass_{base}' --ptxas "${PTXAS:-12.4,13.0}" --options 'default;-O2' --first-rounds 10
       --max-rounds 60 --target 0.002 -j 16)
summary() {  # the answer in a few lines, read back from tuned.json
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"gpu: {(d.get('gpu') or {}).get('gpu') or 'none (static pruning only)'}  GPU s: {d['gpu_seconds']:.1f}  "
      f"names {d['space']['names']}, ptxas {d['space']['ptxas']}, options {d['space']['option_sets']}")
for k in d["kernels"]:
    g, r = k.get("gain"), k.get("runner_up")
    where = f"{k['kernel']} {k.get('seq_len') or k.get('sizes') or ''}".strip()
    if k["status"] != "tuned":
        print(f"{where}: {len(k['distinct'])} distinct codes of {len(k['distinct']) + len(k['pruned'])}, not timed")
        continue
    best = "keep yours" if k["best_is_yours"] else k["best"]["label"]
    gain = f"{g['ratio']:.4f} [{g['low']:.4f}, {g['high']:.4f}] hw {g['half_width']:.4%}" if g else \
        f"none proven (leader {k.get('leader_verdict')})"
    print(f"{where}: best {best}; gain {gain}; runner-up {r['label'] + ' ' + format(r['ratio'], '.4f') if r else '-'};"
          f" {len(k['distinct'])} codes raced of {len(k['distinct']) + len(k['pruned'])}; "
          f"{k['race']['rounds_measured']} pair-rounds, stopped by {k['race']['stopped_by']}; {k['gpu_seconds']:.1f} GPU s")
    print(f"  change: {k.get('change')}")
PY
}
step() {  # name, seconds, ptxprobe tune arguments...
  local name=$1 secs=$2; shift 2
  timeout -s INT "$secs" python3 -m ptxprobe.cli tune -o "$RUNS/$name" --fresh "${SPACE[@]}" "${RUN[@]}" "$@" \
    > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc" | tee -a "$OUT/status.txt"
  tail -14 "$OUT/$name.txt"
  if [ -f "$RUNS/$name/tuned.json" ]; then
    cp "$RUNS/$name/tuned.json" "$OUT/$name.json"
    summary "$RUNS/$name/tuned.json" | tee "$OUT/$name.summary.txt"
  fi
  tar -C "$RUNS" --exclude='triton-cache' -czf "$OUT/$name.tar.gz" "$name"
}
for what in "$@"; do case "$what" in
  tune)  step h200-tune "${SECONDS_TUNE:-300}" -e experiments/definitions/h200_tune.toml ;;
  cuda)  step h200-tune-cuda "${SECONDS_CUDA:-300}" -e experiments/definitions/h200_tune_cuda.toml ;;
  sgemm) step h200-tune-sgemm "${SECONDS_SGEMM:-240}" --cu experiments/user/sgemm.cu --entry sgemm \
           --spec experiments/user/sgemm.toml -s archs=sm_90a --ptxas "${PTXAS_SGEMM:-triton,12.4}" ;;
  ffma)  step h200-tune-ffma "${SECONDS_FFMA:-150}" --triton experiments/user/ffma_matmul.py:cutlass_matmul_fp32 \
           --spec experiments/user/ffma_matmul.toml -s archs=sm_90a \
           --names '{base},{base_triggered},{base_untriggered}'
         timeout -s INT "${SECONDS_APPLY:-300}" python3 -m ptxprobe.cli apply "$RUNS/h200-tune-ffma" \
           --rounds "${APPLY_ROUNDS:-10}" --metric 'ms=(\S+)' -- python3 experiments/user/ffma_matmul.py cutlass_matmul_fp32 \
           > "$OUT/h200-apply-ffma.txt" 2>&1
         echo "h200-apply-ffma: exit $?" | tee -a "$OUT/status.txt"; tail -20 "$OUT/h200-apply-ffma.txt"
         cp "$RUNS/h200-tune-ffma/apply/apply.json" "$OUT/h200-apply-ffma.json" 2>/dev/null
         tar -C "$RUNS" --exclude='triton-cache' -czf "$OUT/h200-tune-ffma.tar.gz" h200-tune-ffma ;;
  proof) step h200-tune-proof "${SECONDS_PROOF:-420}" --triton experiments/user/ffma_matmul.py:cutlass_matmul_fp32 \
           --spec experiments/user/ffma_matmul.toml -s archs=sm_90a \
           --names '{base},{base_triggered},{base_untriggered}' --rounds "${APPLY_ROUNDS:-10}" --metric 'ms=(\S+)' \
           -- python3 experiments/user/ffma_matmul.py cutlass_matmul_fp32 ;;
  program) step h200-tune-program "${SECONDS_PROGRAM:-560}" --names '{base},{base_triggered},{base_untriggered}' \
           --rounds "${APPLY_ROUNDS:-8}" --metric 'ms=(\S+)' -- python3 experiments/user/ffma_matmul.py cutlass_matmul_fp32
         cp "$RUNS/h200-tune-program/apply/apply.json" "$OUT/h200-tune-program-apply.json" 2>/dev/null ;;
  cute)  if [ -z "${SKIP_GPU_TEST:-}" ]; then
           timeout -s INT "${SECONDS_CUTE_TEST:-240}" python3 -m pytest -q -p no:cacheprovider -o addopts="" \
             tests/test_gpu_cute.py -m gpu > "$OUT/gpu-test-cute.log" 2>&1
           echo "gpu-test-cute: exit $?" | tee -a "$OUT/status.txt"; tail -3 "$OUT/gpu-test-cute.log"
         fi
         step "h200-tune-cute${CUTE_TAG:-}" "${SECONDS_CUTE:-480}" --names '{base},{base_untriggered}' --ptxas '' \
           --options "${CUTE_OPTIONS:-default}" --rounds "${APPLY_ROUNDS:-6}" --metric 'us=(\S+)' \
           -- python3 experiments/external/cute_fa2_program.py ${CUTE_ARGS:-}
         cp "$RUNS/h200-tune-cute${CUTE_TAG:-}/apply/apply.json" "$OUT/h200-tune-cute${CUTE_TAG:-}-apply.json" \
           2>/dev/null ;;
  cute-regime) for r in ${CUTE_REGIMES:-burst sustained}; do  # the static-layout CuTe FA2 program tuned twice: short runs, held runs
           if [ $r = burst ]; then args="--iterations ${CUTE_BURST_ITERATIONS:-20}"
           else args="--settle-s ${CUTE_SETTLE_S:-1.5} --iterations ${CUTE_SUSTAINED_ITERATIONS:-500}"; fi
           step "h200-tune-cute-$r" "${SECONDS_CUTE_REGIME:-270}" --names '{base},{base_untriggered}' --ptxas '' \
             --options default --rounds "${APPLY_ROUNDS:-6}" --metric 'us=(\S+)' \
             -- python3 experiments/external/cute_fa2_program.py --static-layout $args
           cp "$RUNS/h200-tune-cute-$r/apply/apply.json" "$OUT/h200-tune-cute-$r-apply.json" 2>/dev/null
         done ;;
  inductor) step h200-tune-inductor "${SECONDS_INDUCTOR:-540}" --names '{base},{base_triggered}' --ptxas '' \
           --options 'default;-O2' --rounds "${APPLY_ROUNDS:-6}" --metric 'step_ms=(\S+)' \
           -- python3 experiments/external/inductor_model.py --seconds "${PROGRAM_SECONDS:-0.3}"
         cp "$RUNS/h200-tune-inductor/apply/apply.json" "$OUT/h200-tune-inductor-apply.json" 2>/dev/null ;;
  regime) for r in burst sustained; do
           step "h200-tune-ffma-$r" "$( [ $r = burst ] && echo "${SECONDS_FFMA:-200}" || echo "${SECONDS_SUSTAINED:-390}" )" \
             --triton experiments/user/ffma_matmul.py:cutlass_matmul_fp32 --spec experiments/user/ffma_matmul.toml \
             -s archs=sm_90a --names '{base},{base_triggered},{base_untriggered}' --regime $r
         done ;;
  regime-sweep) for r in ${SWEEP_REGIMES:-burst sustained}; do
           timeout -s INT "${SECONDS_SWEEP:-280}" python3 -m ptxprobe.cli rename-sweep --run --regime $r --fresh \
             -o "$RUNS/h200-sweep-ffma-$r" --triton experiments/user/ffma_matmul.py:cutlass_matmul_fp32 \
             --spec experiments/user/ffma_matmul.toml -s archs=sm_90a -s 'names={base},{base_untriggered}' \
             --json > "$OUT/h200-sweep-ffma-$r.json" 2> "$OUT/h200-sweep-ffma-$r.txt"
           echo "h200-sweep-ffma-$r: exit $?" | tee -a "$OUT/status.txt"; tail -6 "$OUT/h200-sweep-ffma-$r.txt"
           python3 -m ptxprobe.runs.rundir compact "$RUNS/h200-sweep-ffma-$r" > /dev/null 2>&1
           tar -C "$RUNS" --exclude='triton-cache' -czf "$OUT/h200-sweep-ffma-$r.tar.gz" "h200-sweep-ffma-$r"
         done ;;
  *) echo "unknown step $what (tune, cuda, sgemm, ffma, proof, program, cute, cute-regime, inductor, regime, regime-sweep)"; exit 2 ;;
esac; done
