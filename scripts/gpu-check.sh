#!/usr/bin/env bash
# GPU check, run from the repository root on a CUDA machine (the H200 of the device tool):
# environment report, the GPU tests, the kernel compile tests, then the benchmarks.
# Logs go to $OUT (default ./gpu-out): gpu-tests.log, bench.log (keep the ones BENCHMARKS.md
# cites in benchmarks/logs/). Takes about 2-5 minutes;
# every stage has a time limit so the whole stays under 8 minutes.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

# wheels carried in .whl/ (e.g. numpy 2.4 for numba-cuda) go first on the path
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || { echo "gpu-check: wheel install failed" >&2; exit 1; }
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi

status=0
note() { printf '\n==== %s\n' "$*"; }

note "environment"
nvidia-smi || status=1
"$PY" - <<'EOF'
import importlib, platform
print("python", platform.python_version())
for mod in ("numpy", "numba", "numba_cuda", "cupy"):
    try:
        print(f"{mod:<11}", getattr(importlib.import_module(mod), "__version__", "?"))
    except Exception as exc:
        print(f"{mod:<11} unavailable: {exc}")
try:
    import cupy
    print("CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(),
          "driver", cupy.cuda.runtime.driverGetVersion())
except Exception as exc:
    print("cupy runtime: unavailable:", exc)
EOF
command -v nvcc >/dev/null && nvcc --version | tail -1

note "GPU tests (pytest -m gpu)"
timeout 250 "$PY" -m pytest -o addopts=-ra -m gpu -v -rsP --durations=15 -p no:cacheprovider 2>&1 \
    | tee "$OUT/gpu-tests.log" | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|Ghia|max \|" \
    | tail -60
tests_rc=$?
note "kernel compile tests (nvcc, registers)"
timeout 60 "$PY" -m pytest -o addopts=-ra -q -rs -p no:cacheprovider tests/test_kernels_compile.py \
    tests/test_md_kernels_compile.py 2>&1 | tee -a "$OUT/gpu-tests.log" | tail -25
compile_rc=$?

note "benchmark: 8192x8192 float32, 1 subdomain"
: >"$OUT/bench.log"
timeout 100 "$PY" -m simsplit.cli.bench --backend cupy --backend numba-cuda --grid 8192x8192 \
    --subdomains 1 --steps 100 --repeats 5 --precision float32 2>&1 | tee -a "$OUT/bench.log"
big_rc=$?
note "benchmark: cost of splitting, cupy float32: 4096x8192 on 1 slab vs 2 slabs of 4096x4096"
for ov in on off; do
    timeout 60 "$PY" -m simsplit bench --backend cupy --grid 4096x8192 --subdomains 1 \
        --steps 100 --repeats 5 --overlap $ov --no-graph 2>&1 | tee -a "$OUT/bench.log" | head -3
    timeout 60 "$PY" -m simsplit bench --backend cupy --grid 4096x8192 --subdomains 2 \
        --steps 100 --repeats 5 --overlap $ov --no-graph 2>&1 | tee -a "$OUT/bench.log" | head -3
done
note "single-rank NCCL transport and the devices report"
timeout 60 "$PY" -m simsplit run cases/cavity.yaml --backend cupy --transport nccl \
    --set domain.shape=[512,512] --steps 2000 --set run.timing=true --output "$OUT/nccl" \
    --quiet 2>&1 | tail -12
timeout 30 "$PY" -m simsplit devices 2>&1 | tail -15
note "MD benchmark (quick)"
timeout 100 "$PY" scripts/bench_md_gpu.py --quick 2>&1 | tee "$OUT/bench-md.log" | tail -15
note "benchmark: 128x128 float32, 2 subdomains (steps/s; graph = CUDA-graph replay)"
timeout 45 "$PY" -m simsplit.cli.bench --backend cupy --backend numba-cuda --grid 128x128 \
    --subdomains 2 --steps 2000 --repeats 3 --precision float32 2>&1 | grep -v Warn \
    | tee -a "$OUT/bench.log"
small_rc=$?

note "summary"
result() { if [ "$1" -eq 0 ]; then echo ok; elif [ "$1" -eq 124 ]; then echo "TIMED OUT"; else echo "FAILED (rc $1)"; fi; }
printf '%-34s %s  %s\n' "GPU tests" "$(result $tests_rc)" \
    "$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$OUT/gpu-tests.log" | head -1)"
printf '%-34s %s  %s\n' "kernel compile tests" "$(result $compile_rc)" \
    "$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$OUT/gpu-tests.log" | tail -1)"
printf '%-34s %s\n' "bench 8192x8192 float32" "$(result $big_rc)"
printf '%-34s %s\n' "bench 128x128 x2 subdomains" "$(result $small_rc)"
echo "targets: cupy 8192x8192 float32 >= 85% of copy bandwidth (~49,000 MLUPS at 4.18 TB/s);"
echo "         128x128 on 2 subdomains >= 10,000 steps/s (graph column)"
grep -E '^(cupy|numba-cuda) |^copy bandwidth' "$OUT/bench.log"
for rc in $tests_rc $compile_rc $big_rc $small_rc; do [ "$rc" -eq 0 ] || status=1; done
exit $status
