#!/usr/bin/env bash
# How the committed static matrices of kernels nobody here wrote were made (CPU only, after
# `ptxprobe toolchain install all` and `python experiments/external/fetch.py`):
#   bash experiments/external/static_matrix.sh OUT_DIR [CAPTURED_TUTORIAL_DIR [CAPTURED_INDUCTOR_DIR]]
# CAPTURED_TUTORIAL_DIR: a `ptxprobe capture` of experiments/external/triton_tutorial_attention.py made on a GPU
# machine (experiments/gpu/h200_study.sh capture-tutorial); its PTX is swept over every release here.
set -uo pipefail
OUT=${1:?out dir}; CAP=${2:-}; IND=${3:-}
pp() { python3 -m ptxprobe.cli "$@"; }
sweep() { name=$1; shift; pp rename-sweep "$@" -o "$OUT/$name" -q --fresh > "$OUT/$name.txt" 2>&1; echo "$name: exit $?"; }
mkdir -p "$OUT"
# CuTe DSL examples, compiled without a GPU for sm_90a and sm_100a, then every release that takes them
pp capture --arch sm_90a -o "$OUT/cute-sm90a" -s archs=sm_90a -s ptxas=all -s repeat=2 -s max_repeat=4 -q --fresh \
  -- python3 experiments/external/cute_dsl_compile.py hopper > "$OUT/cute-sm90a.txt" 2>&1; echo "cute-sm90a: exit $?"
pp capture --arch sm_100a -o "$OUT/cute-sm100a" -s archs=sm_100a -s ptxas=all -s repeat=2 -s max_repeat=4 -q --fresh \
  -- python3 experiments/external/cute_dsl_compile.py blackwell > "$OUT/cute-sm100a.txt" 2>&1; echo "cute-sm100a: exit $?"
# FlashAttention-4's Hopper forward (flash-attn-4 from PyPI), compiled without a GPU for sm_90a, every release
pp capture --arch sm_90a -o "$OUT/fa4-sm90a" -s archs=sm_90a -s ptxas=all -s repeat=2 -s max_repeat=4 -q --fresh \
  -- python3 experiments/external/cute_dsl_compile.py fa4 > "$OUT/fa4-sm90a.txt" 2>&1; echo "fa4-sm90a: exit $?"
# Triton's Gluon attention example, its fp8 kernel (named cutlass_gluon_attention by the example), sm_100a
sweep gluon-tutorial-sm100a --triton external/triton_gluon_attention.py:attention_kernel \
  --spec experiments/external/gluon_attention.toml -s archs=sm_100a -s ptxas=all -s repeat=2 -s max_repeat=4
# Triton's fused-attention tutorial as captured on the H200: every release for sm_90a
if [ -n "$CAP" ]; then
  sweep tutorial-sm90a $(for f in "$CAP"/ptx/*.ptx; do echo --ptx "$f"; done) -s archs=sm_90a -s ptxas=all \
    -s repeat=2 -s max_repeat=4
fi
# the torch.compile'd block's Inductor kernels as captured on the H200 (experiments/gpu/h200_study.sh capture-inductor)
if [ -n "$IND" ]; then
  sweep inductor-sm90a $(for f in "$IND"/ptx/*.ptx; do echo --ptx "$f"; done) -s archs=sm_90a -s ptxas=all \
    -s repeat=2 -s max_repeat=4
fi
# the other strstr literals of ptxas-scan as name prefixes on the external kernels, one release per minor
TRIG='{base},cutlass_{base},xutlass_{base},cub_{base},sweepKernel_{base},SweepKernel_{base},KeyKernel_{base},RegionKernel_{base}'
sweep triggers-external $(for f in "$OUT"/cute-sm90a/ptx/*.ptx; do echo --ptx "$f"; done) \
  $( [ -n "$CAP" ] && for f in "$CAP"/ptx/*.ptx; do echo --ptx "$f"; done) -s archs=sm_90a \
  -s ptxas=12.8,12.9,13.0,13.1,13.2,13.3,13.4,13.5 -s "names=$TRIG" -s repeat=2 -s max_repeat=4
# the Gluon Hopper attention over 12.4-13.5
sweep gluon-hopper-static -e experiments/definitions/gluon_hopper_static.toml
