#!/usr/bin/env bash
# Which Triton releases ptxprobe's static path works with: for each release, a fresh venv with that Triton and
# ptxprobe's other dependencies (no torch), the static tests that emit Triton and Gluon kernels, and a real sweep;
# then summarize.py writes summary.json (the record tests/test_triton_range.py checks pyproject.toml against).
# Run from a clean checkout (a copy of HEAD: `git archive HEAD | tar -x -C DIR`), one release after another:
#   experiments/results/2026-12-03-cpu-triton-range/check.sh 3.6.0 3.4.0 3.5.1 3.7.1 3.8.0 3.9.0
# WORK (default /tmp/triton-range) holds the venvs, logs and sweeps; the first release named is the reference.
set -u
src=$(cd "$(dirname "$0")/../../.." && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/triton-range}
mkdir -p "$work"
for v in "$@"; do
  venv=$work/venv-$v; out=$work/out/$v; sweep=$work/sweep-$v
  rm -rf "$venv" "$out" "$sweep"; mkdir -p "$out"
  python3 -m venv "$venv"
  # ptxprobe's own dependencies as pyproject.toml lists them, but this Triton; pytest with the plugins its addopts name
  deps=$(python3 -c "import tomllib, sys; d = tomllib.load(open(sys.argv[1], 'rb'))['project']['dependencies']
print(' '.join(x for x in d if not x.startswith('triton')))" "$src/pyproject.toml")
  "$venv/bin/pip" install -q "triton==$v" $deps pytest pytest-timeout pytest-xdist packaging >"$out/install.log" 2>&1 \
    && "$venv/bin/pip" install -q --no-deps -e "$src" >>"$out/install.log" 2>&1
  cache=$(mktemp -d); export PTXPROBE_CACHE=$cache
  (cd "$src" && "$venv/bin/python" -m pytest -p no:cacheprovider -q --junitxml="$out/junit.xml" tests/test_emit.py \
    tests/test_offline_triton.py tests/test_trigger_names.py tests/test_gluon_hopper.py tests/test_user_kernels.py \
    >"$out/pytest.log" 2>&1)
  t=$(date +%s)
  "$venv/bin/ptxprobe" rename-sweep -s archs=sm_90a,sm_100a -s ptxas=triton -o "$sweep" -q >"$out/sweep.log" 2>"$out/sweep.err"
  echo "$? $(( $(date +%s) - t ))" >"$out/sweep.rc"
  "$venv/bin/python" -c "import importlib.metadata as m; print(m.version('triton'))" >"$out/triton.txt"
  for b in "$venv"/lib/python3*/site-packages/triton/backends/nvidia/bin/ptxas*; do
    echo "$(basename "$b") $(sha256sum "$b" | cut -c1-64) $("$b" --version | tail -2 | head -1)"
  done >"$out/ptxas.txt"
  cp "$sweep/results.jsonl" "$sweep/manifest.json" "$out/" 2>/dev/null
  rm -rf "$cache" "$venv"
  echo "$v done"
done
python3 "$here/summarize.py" "$work/out" "$@" --command "$0 $*" >"$here/summary.json.new" && echo "wrote $here/summary.json.new"
