#!/usr/bin/env bash
# Multi-GPU run for issues 8 (NGPU=2) and 9 (NGPU=8, or 4) on a machine with NGPU GPUs of one
# host. STAGES picks a subset (default: all, in this order; split them over calls to stay under
# 10 minutes each):
#   devices  `simsplit devices`: peer matrix, NVLink
#   bench    strong scaling, one process, peer-to-peer, overlap on/off: D2Q9 8192^2, 16384^2,
#            D3Q19 512^3 float32 and fp16 (1 GPU also with one step per sweep: a single slab
#            takes two per sweep, run.temporal_blocking); weak scaling at 8192^2 and 512^3 per GPU
#   nccl2d   D2Q9 8192^2 cavity, 2000 steps: 1 GPU, NGPU GPUs peer, NGPU ranks over NCCL;
#            final fields compared bit for bit with the 1-GPU run; weak scaling over NCCL
#   nccl3d   the same for the D3Q19 cavity at 512^3 (float32, 300 steps)
#   md       LJ liquid (LAMMPS bench/in.lj scaled) at 1,000,188 and 8,001,504 atoms: 1 GPU,
#            NGPU GPUs in one process, NGPU ranks (MPI, host-staged); final positions compared
#   nccl8    (issue 9) D3Q19 over NCCL at 1, 2, 4, 8 ranks: weak (512^3 per GPU) and strong
#            (the largest grid for one GPU), final fields compared across rank counts
# DRY=1 runs every stage on the CPU backend at toy sizes (transports local/mpi instead of
# peer/nccl): a check of the commands themselves on a machine without GPUs.
# Raw output in $OUT; copy the logs worth keeping into benchmarks/logs/ afterwards (named
# <what>_<gpu>_<date>.log, as the ones there).
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # the device machine runs as root
OUT=${OUT:-./gpu-out}
NGPU=${NGPU:-2}
DRY=${DRY:-0}
STAGES=${STAGES:-"devices bench nccl2d nccl3d md"}
mkdir -p "$OUT"
if [[ ${DRY:-0} != 1 ]] && compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
note() { printf '\n==== %s  (%s UTC)\n' "$*" "$(date -u +%H:%M:%S)"; }
quiet() { grep -Ev "Warn|warn\(|NumbaPerformance|^\s*$" ; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
MPIEXEC=(mpiexec)
mpiexec --version 2>/dev/null | grep -qi "open mpi" && MPIEXEC+=(--allow-run-as-root)

if [[ $DRY == 1 ]]; then  # toy sizes on the CPU: every command, none of the figures
    BACKEND=cpu; PEER=local; RANKS=mpi; DEVS=()
    G2=64; G2B=96; G3=16; MD1=4; MD8=6; STEPS2=40; STEPS3=20; STEPSMD=20
else
    BACKEND=cupy; PEER=peer; RANKS=nccl; DEVS=(--devices "$(seq -s, 0 $((NGPU - 1)))")
    G2=8192; G2B=16384; G3=512; MD1=63; MD8=126; STEPS2=2000; STEPS3=300; STEPSMD=200
fi

if has devices; then
    note "devices"
    python3 -m simsplit devices 2>&1 | tee "$OUT/devices.log"
fi

bench() {  # label, then simsplit bench arguments
    local label=$1; shift
    printf '%-48s ' "$label" | tee -a "$OUT/scaling.log"
    timeout 150 python3 -m simsplit bench --backend $BACKEND --steps 100 --repeats 3 --no-graph \
        "$@" 2>&1 | quiet | grep -E "^$BACKEND" | tee -a "$OUT/scaling.log"
}
if has bench; then
    for spec in "${G2}x${G2}" "${G2B}x${G2B}" "${G3}x${G3}x${G3}" \
            "${G3}x${G3}x${G3} --storage float16"; do
        set -- $spec
        note "strong scaling, one process: $*"
        bench "$* 1 GPU" --grid "$@" --subdomains 1
        # slabs on several GPUs pair their steps too (two steps per sweep, their two halo
        # planes through the transport); one step per sweep on one GPU is the reference for
        # how much of that pairing survives the transfers
        [[ $1 == *x*x* ]] && bench "$* 1 GPU one step per sweep" --grid "$@" --subdomains 1 \
            --temporal-blocking off
        for ov in on off; do
            bench "$* $NGPU GPUs $PEER overlap $ov" --grid "$@" --subdomains $NGPU \
                "${DEVS[@]}" --overlap $ov
        done
    done
    note "weak scaling, one process: ${G2}^2 and ${G3}^3 per GPU"
    bench "${G2}x$((G2 * NGPU)) $NGPU GPUs $PEER" --grid ${G2}x$((G2 * NGPU)) \
        --subdomains $NGPU "${DEVS[@]}"
    bench "${G3}x${G3}x$((G3 * NGPU)) $NGPU GPUs $PEER" --grid ${G3}x${G3}x$((G3 * NGPU)) \
        --subdomains $NGPU "${DEVS[@]}"
fi

run() {  # output dir, case, shape, steps, then the launcher and its arguments
    local dir=$1 case=$2 shape=$3 steps=$4; shift 4
    echo "-- $dir" | tee -a "$OUT/runs.log"
    timeout 300 "$@" "$case" --backend $BACKEND --set run.precision=float32 \
        --set domain.shape="$shape" --steps "$steps" --set run.tolerance=0 \
        --set output.plots=false --set run.timing=device --output "$OUT/$dir" --overwrite \
        --quiet 2>&1 | quiet | grep -E "^(backend|throughput|timing)|rror" | tee -a "$OUT/runs.log"
    rm -rf "$OUT/$dir/checkpoints"
}
compare() {  # reference dir, then dirs compared bit for bit with it
    local ref=$1; shift
    for d in "$@"; do
        echo "-- $d vs $ref" | tee -a "$OUT/bitwise.log"
        python3 scripts/compare_outputs.py "$OUT/$ref" "$OUT/$d" 2>&1 | tee -a "$OUT/bitwise.log"
    done
}
fluid_set() {  # label, case, shape, weak shape (NGPU times the grid), steps
    local label=$1 case=$2 shape=$3 weak=$4 steps=$5
    note "$label: 1 GPU, $NGPU GPUs ($PEER), $NGPU ranks ($RANKS), $steps steps"
    run "$label-one" "$case" "$shape" "$steps" python3 -m simsplit run --subdomains 1
    run "$label-one-1step" "$case" "$shape" "$steps" python3 -m simsplit run --subdomains 1 \
        --set run.temporal_blocking=false
    run "$label-$PEER" "$case" "$shape" "$steps" python3 -m simsplit run --subdomains $NGPU \
        "${DEVS[@]}" --transport $PEER
    run "$label-$RANKS" "$case" "$shape" "$steps" "${MPIEXEC[@]}" -n $NGPU python3 -m simsplit \
        run --transport $RANKS
    compare "$label-one" "$label-one-1step" "$label-$PEER" "$label-$RANKS"
    note "$label weak scaling over $RANKS: $shape per rank"
    run "$label-weak-$RANKS" "$case" "$weak" "$steps" "${MPIEXEC[@]}" -n $NGPU python3 -m simsplit \
        run --transport $RANKS
    rm -f "$OUT/$label"*/fields.h5
}
has nccl2d && fluid_set d2q9 cases/cavity.yaml "[$G2,$G2]" "[$G2,$((G2 * NGPU))]" $STEPS2
has nccl3d && fluid_set d3q19 cases/cavity3d.yaml "[$G3,$G3,$G3]" "[$G3,$G3,$((G3 * NGPU))]" \
    $STEPS3
if has nccl8; then
    note "D3Q19 over $RANKS at 1, 2, 4, 8 ranks (issue 9)"
    for n in 1 2 4 8; do
        (( n > NGPU )) && break
        run "d3q19-weak-$n" cases/cavity3d.yaml "[$G3,$G3,$((G3 * n))]" $STEPS3 \
            "${MPIEXEC[@]}" -n $n python3 -m simsplit run --transport $RANKS
        big=$((G3 * 3 / 2))  # 768^3 float32 two-lattice: about 72 GB with rho and u
        run "d3q19-strong-$n" cases/cavity3d.yaml "[$big,$big,$big]" $STEPS3 \
            "${MPIEXEC[@]}" -n $n python3 -m simsplit run --transport $RANKS
    done
    compare d3q19-strong-1 $(for n in 2 4 8; do (( n <= NGPU )) && echo d3q19-strong-$n; done)
    rm -f "$OUT"/d3q19*/fields.h5
fi

md() {  # output dir, fcc cells per side, then the launcher and its arguments
    local dir=$1 cells=$2; shift 2
    echo "-- $dir" | tee -a "$OUT/runs.log"
    timeout 400 "$@" cases/lj_liquid.yaml --backend $BACKEND \
        --set md.lattice.cells="[$cells,$cells,$cells]" --set md.thermo_every=1000000 \
        --steps $STEPSMD --output "$OUT/$dir" --overwrite --quiet 2>&1 | quiet \
        | grep -E "^(backend|wall time|throughput)|rror" | tee -a "$OUT/runs.log"
    rm -rf "$OUT/$dir/checkpoints"
}
if has md; then
    for cells in $MD1 $MD8; do
        atoms=$((4 * cells * cells * cells))
        note "MD, $atoms atoms: 1 GPU, $NGPU GPUs in one process, $NGPU ranks (MPI)"
        md "md$atoms-one" $cells python3 -m simsplit run --subdomains 1
        md "md$atoms-$PEER" $cells python3 -m simsplit run --subdomains $NGPU "${DEVS[@]}"
        md "md$atoms-mpi" $cells "${MPIEXEC[@]}" -n $NGPU python3 -m simsplit run
        compare "md$atoms-one" "md$atoms-$PEER" "md$atoms-mpi"
        rm -f "$OUT"/md$atoms*/*.h5md
    done
fi
note "done"
