#!/usr/bin/env bash
# How the H200 runs of kernels nobody here wrote, the Gluon Hopper attention and the interleaved design were made
# (device tool, one H200): ptxprobe from this checkout, the wheels the image lacks (pyelftools, capstone) carried in
# .whl/, the third-party sources in external/ (fetched by experiments/external/fetch.py, never committed); results
# tarred into $OUT.
#   bash experiments/gpu/h200_study.sh sota|capture-tutorial|capture-inductor|names|cute-aot|smoke|probe|interleaved|fast|user-defaults|defaults|defaults-together|defaults-long-warmup|defaults-signed-rank|sampled-regimes|interpret-check|atlas-speed|atlas-inductor|repro-defaults|overflow ...
. "$(dirname "$0")/preamble.sh"  # wheels, toolchains, PYTHONPATH, $OUT and $RUNS, the card in $OUT/status.txt
pp() { python3 -m ptxprobe.cli "$@"; }
keep() {  # name: tar the run directory into $OUT (no ncu reports, no Triton caches)
  tar -C /tmp/runs --exclude='*.ncu-rep' --exclude='triton-cache' --exclude='triton-dump' -czf "$OUT/$1.tar.gz" "$1"
}
for what in "$@"; do case "$what" in
  sota)  # the Hopper attention: correctness of every variant, then throughput beside cuDNN/flash SDPA and Triton
    timeout 330 python3 experiments/benchmarks/attention_sota.py --out "$OUT/sota" --dtypes fp16,fp8e4nv --head-dims 128 \
      --timeout 170 --rounds 10 2>&1 | tail -24
    timeout 150 python3 experiments/benchmarks/attention_sota.py --out "$OUT/sota-checks" --dtypes bf16,fp16,fp8e4nv \
      --head-dims 64,128 --no-bench --timeout 100 2>&1 | tail -4 ;;
  fp8)  # the Hopper attention's fp8 throughput the first call's time limit cut off (checks ran in sota-checks)
    timeout 110 python3 experiments/benchmarks/attention_sota.py --out "$OUT/sota-fp8" --dtypes fp8e4nv --head-dims 128 \
      --seq-lens 4096,16384 --no-check --timeout 100 --rounds 10 2>&1 | tail -8 ;;
  cute-aot)  # CuTe DSL Hopper GEMM and FMHA, prepared on CPU (experiments/external/cute_aot.py prepare)
    timeout 100 python3 experiments/external/cute_aot.py run --dir aot --out "$OUT/cute_aot.json" --rounds 30 \
      2>&1 | tail -6 ;;
  capture-tutorial)  # Triton's fused-attention tutorial, captured, swept (Triton's ptxas), A/B end to end
    timeout -s INT "${SECONDS_CAPTURE:-300}" python3 -m ptxprobe.cli capture -o /tmp/runs/capture-tutorial -s archs=sm_90a -s ptxas=triton \
      -s repeat=1 --run --rounds "${ROUNDS:-5}" \
      --metric 'kernel_ms=(\S+)' -- python3 experiments/external/triton_tutorial_attention.py \
      external/triton_fused_attention.py --seconds 0.4 > "$OUT/capture-tutorial.txt" 2>&1
    echo "capture-tutorial: exit $?" | tee -a "$OUT/status.txt"; tail -20 "$OUT/capture-tutorial.txt"
    keep capture-tutorial ;;
  capture-inductor)
    timeout -s INT "${SECONDS_CAPTURE:-330}" python3 -m ptxprobe.cli capture -o /tmp/runs/capture-inductor -s archs=sm_90a \
      -s ptxas=triton -s repeat=1 --run --rounds "${ROUNDS:-8}" \
      --metric 'step_ms=(\S+)' -- python3 experiments/external/inductor_model.py --seconds 0.4 \
      > "$OUT/capture-inductor.txt" 2>&1
    echo "capture-inductor: exit $?" | tee -a "$OUT/status.txt"; tail -20 "$OUT/capture-inductor.txt"
    keep capture-inductor ;;
  names)  # the name study on the Gluon Hopper attention, calibrated timing
    timeout -s INT "${SECONDS_NAMES:-400}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_gluon_hopper.toml --run -j 16 -q \
      -o /tmp/runs/h200-gluon-hopper > "$OUT/h200-gluon-hopper.txt" 2>&1
    echo "h200-gluon-hopper: exit $?" | tee -a "$OUT/status.txt"; tail -30 "$OUT/h200-gluon-hopper.txt"
    keep h200-gluon-hopper ;;
  smoke)  # the GPU tests of the timing and calibration path (the interleaved design's first GPU run)
    timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -x -k "calibration or registered_kernels or identical" \
      2>&1 | tee "$OUT/gpu-tests.log" | tail -6 ;;
  probe)  # how fast the power-capped clock wanders, and which sample design cancels it
    timeout 200 python3 experiments/benchmarks/interleave_probe.py "$OUT/interleave-probe" 2>&1 | tail -14 ;;
  interleaved)  # the 48-group name study timed with the interleaved design, calibrated
    timeout -s INT "${SECONDS_SWEEP:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_interleaved.toml --run -j 16 -q \
      -o /tmp/runs/h200-interleaved > "$OUT/h200-interleaved.txt" 2>&1
    echo "h200-interleaved: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-interleaved.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-interleaved 2>&1 | tail -30
    keep h200-interleaved ;;
  interleaved-user)  # sgemm.cu and the CUDA C++ attention, the interleaved design (nvcc on the device)
    timeout -s INT "${SECONDS_USER:-200}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_interleaved_user.toml \
      --run -j 16 -q -o /tmp/runs/h200-interleaved-user > "$OUT/h200-interleaved-user.txt" 2>&1
    echo "h200-interleaved-user: exit $?" | tee -a "$OUT/status.txt"; tail -8 "$OUT/h200-interleaved-user.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-interleaved-user 2>&1 | tail -30
    keep h200-interleaved-user ;;
  fast)  # the 48-group study with the defaults that skip identical code and rotate plants (3-minute goal)
    timeout -s INT "${SECONDS_FAST:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_interleaved_fast.toml --run -j 16 -q \
      -o /tmp/runs/h200-interleaved-fast > "$OUT/h200-interleaved-fast.txt" 2>&1
    echo "h200-interleaved-fast: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-interleaved-fast.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-interleaved-fast 2>&1 | tail -30
    keep h200-interleaved-fast ;;
  user-defaults)  # sgemm.cu and the CUDA C++ attention with the defaults (identical code skipped, signed-rank interval)
    timeout -s INT "${SECONDS_USER:-200}" python3 -m ptxprobe.cli rename-sweep \
      -e experiments/definitions/h200_interleaved_user_defaults.toml --run -j 16 -q -o /tmp/runs/h200-user-defaults \
      > "$OUT/h200-user-defaults.txt" 2>&1
    echo "h200-user-defaults: exit $?" | tee -a "$OUT/status.txt"; tail -8 "$OUT/h200-user-defaults.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-user-defaults 2>&1 | tail -30
    keep h200-user-defaults ;;
  defaults)  # the 48-group study with every default (signed-rank-hac, ceiling/overflow stopping)
    timeout -s INT "${SECONDS_FAST:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_defaults.toml --run -j 16 -q \
      -o /tmp/runs/h200-defaults > "$OUT/h200-defaults.txt" 2>&1
    echo "h200-defaults: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-defaults.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-defaults 2>&1 | tail -30
    keep h200-defaults ;;
  defaults-together)  # the same study with every pair of a names block timed until all may stop: what stopping
    # each comparison alone saves, on one card
    timeout -s INT "${SECONDS_FAST:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_defaults_together.toml \
      --run -j 16 -q -o /tmp/runs/h200-defaults-together > "$OUT/h200-defaults-together.txt" 2>&1
    echo "h200-defaults-together: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-defaults-together.txt"
    keep h200-defaults-together ;;
  defaults-long-warmup)  # the same study with the warm-up the defaults had before (0.1 s per label, now 0.02 s):
    # what the shorter warm-up saves, and the A/A and planted goals without it, on one card
    timeout -s INT "${SECONDS_FAST:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_defaults_long_warmup.toml \
      --run -j 16 -q -o /tmp/runs/h200-defaults-long-warmup > "$OUT/h200-defaults-long-warmup.txt" 2>&1
    echo "h200-defaults-long-warmup: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-defaults-long-warmup.txt"
    python3 experiments/benchmarks/gpu_noise.py /tmp/runs/h200-defaults-long-warmup 2>&1 | tail -30
    keep h200-defaults-long-warmup ;;
  defaults-signed-rank)  # the same study under the exact signed-rank interval: what the default's widening costs
    timeout -s INT "${SECONDS_FAST:-420}" python3 -m ptxprobe.cli rename-sweep -e experiments/definitions/h200_defaults_signed_rank.toml \
      --run -j 16 -q -o /tmp/runs/h200-defaults-signed-rank > "$OUT/h200-defaults-signed-rank.txt" 2>&1
    echo "h200-defaults-signed-rank: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-defaults-signed-rank.txt"
    keep h200-defaults-signed-rank ;;
  sampled-regimes)  # four groups of the defaults study timed in bursts, then held (experiments/definitions/
    # h200_defaults_sampled_regimes.toml: the sustained half about 144-288 GPU s)
    for r in ${SAMPLED_REGIMES:-burst sustained}; do
      timeout -s INT "${SECONDS_SAMPLED:-300}" python3 -m ptxprobe.cli rename-sweep --regime $r \
        -e experiments/definitions/h200_defaults_sampled_regimes.toml --run -j 16 -q -o /tmp/runs/h200-sampled-$r \
        > "$OUT/h200-sampled-$r.txt" 2>&1
      echo "h200-sampled-$r: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-sampled-$r.txt"
      keep h200-sampled-$r
    done ;;
  interpret-check)  # capture --interpret (CPU tensors, the GPU unused) vs a GPU capture of the same liger-kernel
    # driver (experiments/atlas/drivers; the liger-kernel wheel carried in .whl/): the same PTX, byte for byte?
    timeout 240 python3 -m ptxprobe.cli capture -o /tmp/runs/gpu-capture -s repeat=1 -s ptxas=triton -q -- \
      python3 experiments/atlas/drivers/drive_liger_kernel.py --device cuda > "$OUT/gpu-capture.txt" 2>&1
    echo "gpu-capture: exit $?" | tee -a "$OUT/status.txt"
    timeout 300 python3 -m ptxprobe.cli capture --interpret --arch sm_90a -o /tmp/runs/interpreted-capture -s repeat=1 \
      -s ptxas=triton -q -- python3 experiments/atlas/drivers/drive_liger_kernel.py > "$OUT/interpreted-capture.txt" 2>&1
    echo "interpreted-capture: exit $?" | tee -a "$OUT/status.txt"
    python3 -m experiments.atlas compare-captures /tmp/runs/gpu-capture /tmp/runs/interpreted-capture \
      --out "$OUT/interpret-check.json" | tail -30
    for d in gpu-capture interpreted-capture; do cp /tmp/runs/$d/captured.json "$OUT/$d.captured.json"; done ;;
  atlas-speed)  # the atlas's speed sample: each op of SPEED_OPS (driver:op[:dtype], drivers/drive_<driver>.py) timed
    # in its library's own call path: capture --run, every kernel of the op under the baseline, triggered and control
    # names and an A/A copy (Triton's ptxas), ROUNDS rounds, the op's median ms per call (op_timing.py) the measure
    for spec in ${SPEED_OPS:-liger_kernel:rms_norm:bf16}; do
      IFS=: read -r drv op dt <<< "$spec"
      name="speed-$drv-$op${dt:+-$dt}"
      timeout -s INT "${SECONDS_OP:-300}" python3 -m ptxprobe.cli capture -o "/tmp/runs/$name" -s archs=sm_90a \
        -s ptxas=triton -s repeat=1 -q -j 16 --run --rounds "${ROUNDS:-8}" --metric 'ms=(\S+)' -- python3 \
        "experiments/atlas/drivers/drive_$drv.py" --device cuda --op "$op" ${dt:+--dtype "$dt"} \
        --time "${OP_SECONDS:-0.3}" > "$OUT/$name.txt" 2>&1
      echo "$name: exit $? after $SECONDS s" | tee -a "$OUT/status.txt"; tail -12 "$OUT/$name.txt"
    done
    # one file back: each run's records (captured.json, the sweep's rows, ab.json), no PTX, cubins or caches
    tar -C /tmp/runs --exclude='*.ptx' --exclude='*.cubin' --exclude='triton-cache' --exclude='triton-dump' \
      --exclude='ptx' --exclude='inputs' -czf "$OUT/atlas-speed-${SPEED_PART:-1}.tar.gz" $(cd /tmp/runs && ls -d speed-*)
    ;;
  atlas-inductor)  # Inductor's kernels of real architectures (drivers/drive_inductor.py, the image's transformers):
    # captured on the card (Inductor needs one), swept there by Triton's ptxas; the PTX comes back (never committed)
    # to be swept at every release on a CPU machine (python -m experiments.atlas inductor)
    timeout -s INT "${SECONDS_INDUCTOR:-480}" python3 -m ptxprobe.cli capture -o /tmp/runs/inductor -s archs=sm_90a \
      -s ptxas=triton -s repeat=1 -q -j 16 -- python3 experiments/atlas/drivers/drive_inductor.py \
      ${INDUCTOR_MODELS:-} > "$OUT/inductor.txt" 2>&1
    echo "inductor: exit $? after $SECONDS s" | tee -a "$OUT/status.txt"; grep atlas-driver /tmp/runs/inductor/program.log
    tail -5 "$OUT/inductor.txt"
    tar -C /tmp/runs --exclude='triton-cache' --exclude='triton-dump' --exclude='sweep' -czf "$OUT/inductor.tar.gz" \
      inductor
    ;;
  repro-defaults)  # a defaults run (REPRO_OF, a committed directory) re-measured by `ptxprobe repro`
    timeout -s INT "${SECONDS_REPRO:-360}" python3 -m ptxprobe.cli repro --json -j 16 -o /tmp/runs/h200-defaults-repro \
      "${REPRO_OF:-experiments/results/2026-12-03-h200-defaults}" > "$OUT/h200-defaults-repro.json" \
      2> "$OUT/h200-defaults-repro.err"
    echo "h200-defaults-repro: exit $?" | tee -a "$OUT/status.txt"; tail -3 "$OUT/h200-defaults-repro.err"
    python3 -c 'import collections, json, sys; d = json.load(open(sys.argv[1]))
print("static", collections.Counter(r["status"] for r in d["rows"]))
print("runtime", collections.Counter(r["status"] for r in d["runtime_rows"]))' "$OUT/h200-defaults-repro.json"
    keep h200-defaults-repro ;;
  overflow)  # the ceiling/overflow stopping rule made to act on the H200's noisiest groups
    timeout -s INT "${SECONDS_OVERFLOW:-200}" python3 -m ptxprobe.cli rename-sweep \
      -e experiments/definitions/h200_overflow_check.toml --run -j 16 -q -o /tmp/runs/h200-overflow-check \
      > "$OUT/h200-overflow-check.txt" 2>&1
    echo "h200-overflow-check: exit $?" | tee -a "$OUT/status.txt"; tail -12 "$OUT/h200-overflow-check.txt"
    keep h200-overflow-check ;;
esac; done
