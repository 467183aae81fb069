#!/usr/bin/env bash
# Short GPU verification (about 4 minutes): the GPU test set, the 8192^2 benchmark, the CUDA
# error-context demo, autotuning, and a monitored 3D cavity. Logs under $OUT (./gpu-out;
# the ones BENCHMARKS.md cites go to benchmarks/logs/).
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
note() { printf '\n==== %s\n' "$*"; }
note "GPU tests"
timeout 150 python3 -m pytest -o addopts=-ra -m gpu -q -rsfE -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" \
    | grep -Ev "Warning|warn\(" | tail -25
note "D2Q9 8192x8192 float32 (defaults: 256 threads, neighbour flags)"
timeout 50 python3 -m simsplit bench --backend cupy --grid 8192x8192 --steps 100 --repeats 5 \
    --no-graph 2>&1 | tee "$OUT/bench.log" | tail -4
note "autotune (4096x4096)"
timeout 60 python3 -m simsplit bench --backend cupy --grid 4096x4096 --steps 100 --repeats 3 \
    --autotune 2>&1 | tee -a "$OUT/bench.log" | tail -8
note "CUDA error context: broken launch at step 10, then with run.debug"
SIMSPLIT_TEST_BAD_LAUNCH=stream_collide:10 timeout 30 python3 -m simsplit run cases/cavity.yaml \
    --backend cupy --steps 20 --quiet --set output.dir=null 2>&1 | tail -3; echo "exit code ${PIPESTATUS[0]}"
SIMSPLIT_TEST_BAD_LAUNCH=stream_collide:10 timeout 30 python3 -m simsplit run cases/cavity.yaml \
    --backend cupy --steps 20 --quiet --set run.debug=true --set output.dir=null 2>&1 | tail -2
note "3D cavity 128^3 float32 on cupy with --monitor"
timeout 60 python3 -m simsplit run cases/cavity3d.yaml --backend cupy --set run.precision=float32 \
    --set domain.shape=[128,128,128] --steps 3000 --set run.tolerance=0 --monitor 0.2 \
    --output "$OUT/c3d" --set output.plots=false --quiet 2>&1 | grep -v Warn | tail -14
