#!/usr/bin/env bash
# Multi-GPU run for issues 8 (NGPU=2) and 9 (NGPU=8, or 4), one call on a machine with NGPU
# GPUs of one host. Fluid (D2Q9 and D3Q19, cupy): one GPU against NGPU GPUs in one process
# (peer-to-peer) and with one rank per GPU (mpiexec, NCCL), strong scaling on fixed grids, weak
# scaling on a fixed grid per GPU, overlap on and off; then the final fields of every multi-GPU
# run compared bit for bit with the one-GPU run (scripts/compare_outputs.py). Raw output in
# $OUT (copy it into docs/ afterwards). Under 10 minutes at NGPU=2.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-./gpu-out}
NGPU=${NGPU:-2}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
note() { printf '\n==== %s  (%s UTC)\n' "$*" "$(date -u +%H:%M:%S)"; }
quiet() { grep -Ev "Warn|warn\(|NumbaPerformance|^\s*$" ; }
devs=$(seq -s, 0 $((NGPU - 1)))
note "devices"
python3 -m simsplit devices 2>&1 | tee "$OUT/devices.log"

bench() {  # label, then simsplit bench arguments
    local label=$1; shift
    printf '%-44s ' "$label" | tee -a "$OUT/scaling.log"
    timeout 120 python3 -m simsplit bench --backend cupy --steps 100 --repeats 3 --no-graph "$@" \
        2>&1 | quiet | grep -E "^cupy" | tee -a "$OUT/scaling.log"
}
for grid in 8192x8192 16384x16384 512x512x512; do
    note "strong scaling $grid"
    bench "$grid 1 GPU" --grid $grid --subdomains 1
    for ov in on off; do
        bench "$grid $NGPU GPUs peer overlap $ov" --grid $grid --subdomains $NGPU \
            --devices $devs --overlap $ov
    done
done
note "weak scaling: 8192^2 and 512^3 per GPU"
bench "8192x$((8192 * NGPU)) $NGPU GPUs peer" --grid 8192x$((8192 * NGPU)) --subdomains $NGPU \
    --devices $devs
bench "512x512x$((512 * NGPU)) $NGPU GPUs peer" --grid 512x512x$((512 * NGPU)) \
    --subdomains $NGPU --devices $devs

run() {  # output dir, then extra arguments: a 2000-step cavity with fields written at the end
    local dir=$1; shift
    timeout 240 "$@" cases/cavity.yaml --backend cupy --set run.precision=float32 \
        --set fluid.reynolds=1000 --set domain.shape=[8192,8192] --steps 2000 \
        --set run.tolerance=0 --set output.plots=false --set run.timing=device \
        --output "$OUT/$dir" --overwrite --quiet 2>&1 | quiet | grep -E "throughput|timing|error"
    rm -rf "$OUT/$dir/checkpoints"
}
note "NCCL, one rank per GPU, and the bitwise comparison (D2Q9 8192^2, 2000 steps)"
run one-gpu python3 -m simsplit run --subdomains 1
run peer python3 -m simsplit run --subdomains $NGPU --devices $devs
run nccl mpiexec --allow-run-as-root -n $NGPU python3 -m simsplit run --set run.transport=nccl
for d in peer nccl; do
    echo "-- $d vs one GPU"
    python3 scripts/compare_outputs.py "$OUT/one-gpu" "$OUT/$d"
done
rm -f "$OUT"/*/fields.h5
note "done"
