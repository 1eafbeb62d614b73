# The GPU machine's preamble, sourced by every script in experiments/gpu/ (run from the repository root on the device
# tool's machine): the wheels its image lacks from $WHEELS (default .whl/: pyelftools, capstone, cxxfilt; the CuTe
# DSL's for the cute steps) into /tmp/site, ptxas releases from $WHEELS/toolchains.tar.xz into
# PTXPROBE_TOOLCHAINS=/tmp/toolchains, ptxprobe from this checkout on PYTHONPATH, results under $OUT (runs under
# $RUNS), the card's identity appended to $OUT/status.txt.
#   SITE_READY=1  /tmp/site was filled by the caller (a wheel over a call's 64 MiB travels unpacked, in parts)
#   DRY_RUN=1     any machine, no GPU: nothing installed, this checkout on PYTHONPATH (the scripts' static parts)
set -uo pipefail
if [ -z "${DRY_RUN:-}" ]; then
  W=${WHEELS:-.whl}
  [ -n "${SITE_READY:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site "$W"/*.whl || exit 2
  ln -sfn "$PWD/kernels" /tmp/site/ptxprobe_kernels
  TOOLCHAINS="$PWD/$W/toolchains"
  if [ -f "$W/toolchains.tar.xz" ]; then tar -C /tmp -xJf "$W/toolchains.tar.xz" && TOOLCHAINS=/tmp/toolchains; fi
  # the CuTe DSL's .pth (which puts its dsl_packages on sys.path) is not read from a PYTHONPATH entry: named here
  export PYTHONPATH="/tmp/site/nvidia_cutlass_dsl/dsl_packages:/tmp/site:$PWD" PTXPROBE_CACHE=/tmp/ptxprobe-cache \
    PTXPROBE_TOOLCHAINS="$TOOLCHAINS"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-/tmp/runs}
mkdir -p "$RUNS" "$OUT"
if [ -z "${DRY_RUN:-}" ]; then
  nvidia-smi --query-gpu=name,uuid,driver_version,vbios_version,clocks.sm,clocks.max.sm,power.limit,ecc.mode.current \
    --format=csv,noheader >> "$OUT/status.txt"
fi
