#!/usr/bin/env bash
# GPU measurements for BENCHMARKS.md in one call (under 10 minutes), run from the repository
# root on the device machine: STAGES picks a subset (default: all, in this order).
#   tests    pytest -m gpu (fluid, D3Q19 storage/streaming, MD on both GPU backends); TESTS_K picks
#            tests by -k, TESTS_TIMEOUT (s, default 300) bounds the run: the whole set on an H100
#            needs more (2026-12-08: 64 passed in the first 300 s)
#   d2q9     D2Q9 8192^2 float32, cupy + numba-cuda (issue 3), cost of splitting (issue 4)
#   timing   device-event timing breakdown, 2 slabs of 4096^2, overlap on/off (issue 4)
#   d3q19    D3Q19 512^3 float32: two-lattice, fp16 storage, in-place AA (issue 7)
#   bigcube  the largest in-place (AA) cubes: 1024^3 float32, 1280^3 fp16 (issue 7)
#   twostep  the two-step (temporally blocked) D3Q19 kernel: bitwise check and speed of each
#            column size at 512^3, float32 and fp16 (issue 7; TWOSTEP_ARGS), its DRAM bytes (ncu)
#   tune3d   D3Q19 launch variants at 512^3, float32 and fp16 storage (issue 7; TUNE3D_ARGS)
#   inst3d   D3Q19 instructions executed per cell (Nsight Compute; TUNE3D_ARGS)
#   d3q19tuned  D3Q19 512^3 bench with --autotune, float32 and fp16
#   ncu      Nsight Compute sections of the production D3Q19 kernel, fp16 and float32 (if ncu)
#   fp16acc  fp16 against float32 storage on the 128^3 cavity (issue 7)
#   storage25  16-bit formats (issue 25): fp16 and e4m11 D3Q19 512^3 MLUPS (one and two steps
#            per sweep), the two-step kernel's check and speed for both
#   acc25    issue 25 accuracy: 3D cavity Re 1000 128^3, float64 / float32 / fp16 / e4m11
#            storage against Albensoeder & Kuhlmann (2005) (scripts/fp16_study.py; minutes)
#   neq25    run.storage neq16 (issue 25): its GPU tests (cupy and numba-cuda == CPU, 1-3
#            slabs, D2Q9 and D3Q19), MLUPS at 512^3 and 8192^2 against float32 and float16
#            storage in the same run and numba-cuda's at 256^3, then the 3D cavity Re 1000
#            128^3 with f64 / f32 / neq16 (ACC25_STORAGES)
#   neq16s   run.storage neq16s (issue 25): its GPU tests (cupy and numba-cuda == CPU on 1-3
#            slabs: D3Q19 cavity and channel, D2Q9 cavity, channel and bodies, D3Q19 bodies),
#            MLUPS at 512^3 and 8192^2 against neq16 and float32 storage in the same run
#            (NEQ16S_TESTS=0 skips the tests, NEQ16S_BENCH=0 the MLUPS)
#   neqtile  run.storage neq16, the tiled candidates of the box kernels (kernels/*_neq_tile.cuh):
#            scripts/tune_neq16.py: bitwise check against production, MLUPS and %copy, D3Q19
#            at 512^3 and 256^3, D2Q9 at 8192^2 and 4096^2 (NEQTILE_ARGS)
#   fp16x2   D3Q19 fp16 storage, the two-cell pull kernel (d3q19_stream_collide_x2): its GPU
#            tests (== one cell, == CPU, 1-3 slabs) and 512^3 MLUPS against the one-cell kernel
#            alternating in one process (scripts/bench_fp16_x2.py; issue 25)
#   x2ab     the fp16 two-cell kernel: production against its split-path builds at X2AB_SHAPES
#            (and another tree's, X2AB_BASE: a folder of its kernel files), alternating
#            (scripts/ab_fp16_x2.py), then the solver's fp16 512^3 MLUPS X2AB_BENCH times (2)
#            (issue 25)
#   x2h200   issue 25 on an H200, in one call: ab_fp16_x2.py (production, split paths at 64x16
#            and 64x12, and a kernel folder with split paths and plain pair stores), the
#            solver at 512^3 with source.D3Q19_X2_SPLIT_PATHS off and on alternating, the
#            fp16 GPU tests with it on (source.py is put back as it was after)
#   h200open what issue 25 still asks of an H200, most wanted first (about 8 minutes): the
#            solver's fp16 512^3 rate at one and two steps per sweep, alternating twice; the
#            solver with source.D3Q19_X2_SPLIT_PATHS off and on, alternating twice (source.py
#            is put back after); ab_fp16_x2.py at 64x16 and 64x12; the fp16 tuner's
#            production rows. Best with REQUIRE_CARD=H200 (below)
#   neqtilebench  whole-run bench, production and the fastest candidate of the neqtile log
#            (or NEQTILE_3D / NEQTILE_2D): D3Q19 512^3, D2Q9 8192^2 (SIMSPLIT_NEQ16_TILE)
#   neqtiletests  GPU tests: each candidate == production on 1-3 slabs
#   md       MD atom-steps/s, 64k and 1M atoms (issue 5)
#   mdtypes  Kob-Andersen 80:20 against one type, as a crystal and as a liquid at the same T,
#            64k and 1M atoms, cupy + numba-cuda (issue 22)
#   mdsplit  MD on 1, 2 and 4 slabs of one GPU (one arena), 64k, 1M and 8M atoms (issue 20)
#   mpimd    MD under mpiexec, one slab per rank on the GPU(s), against one slab (issue 20)
#   split3d  D3Q19 512^3 on 1, 2 and 4 slabs of one GPU (scripts/bench_split_d3q19.py): pairs
#            copied into the neighbours' ghost planes, pairs through the transport ("buf", the
#            path of several GPUs or ranks), one step per sweep; fp16 and D2Q9 rows (issue 20)
#   mpi3d    D3Q19 512^3 under mpiexec, one slab per rank on the GPU(s): two steps per sweep
#            (halo planes through MPI, host-staged) and one, against one slab (issue 20;
#            MPI3D_ARGS), then the mpiexec and two-step GPU tests
#   open     what issues 20 and 25 still ask of an H200, in about 6 minutes: MD under mpiexec -n 2
#            (MPS, 1,000,188 atoms) three times against one slab, the fp16 two-cell kernel
#            (scripts/bench_fp16_x2.py --kernels), the fp16 tuner (production one and two steps
#            per sweep, the candidates, the two-step shape at two blocks without spill, the copy
#            bounds), the solver's fp16 512^3 rate at one and two steps per sweep, then
#            the cupy tests under mpiexec (tests/test_mpi.py -k cupy)
#   mpimd5   MD under mpiexec -n 2 (MPS, 1,000,188 atoms), five runs (MPIMD5_RUNS) against one
#            slab each, then one with rank 0's host profile (MPIMD5_PROFILE=0: none) (issue 20)
#   mpimdab  MD under mpiexec -n 2 (MPS, 1,000,188 atoms), A/B: the tree in MPIMDAB_BASE (a copy
#            of another commit, say `git archive REV simsplit kernels scripts | tar -x -C ab_base`)
#            against this one with SIMSPLIT_RAW_LAUNCH=1 (MPIMDAB_ARMS, default "base raw1"; raw0: =0), alternating, MPIMDAB_ROUNDS
#            rounds (default 2: with the tests, an estimated 9 minutes, inside one call), after the launch probe (scripts/probe_launch_overhead.py);
#            then this tree's GPU MD tests (mpiexec, and cupy in one process) (issue 20)
#   spans    slabs with bodies launched by column spans: GPU tests (bodies 3D, D3Q19 and D2Q9
#            storage; SPANS_TESTS=0 skips them, SPANS_K picks), then the kernels of 3D-1Z at D =
#            SPANS_D and of the 2D-1 cylinder against the box in SPANS_STORAGES, by spans and in
#            one launch a slab (issue 25)
#   neqsplit records (NEQSPLIT_STORAGES, default neq16s neq16) on 1, 2 and 4 slabs of one GPU,
#            simsplit bench at NEQSPLIT_GRID (default 512^3): the cost of splitting (issue 25)
#   halves   the records box kernel's index types (issue 25): the cupy GPU tests of records
#            (tests/test_d3q19_storage_gpu.py: each index type == CPU on 1-3 slabs), the
#            registers of each box kernel, neq16s and neq16 at 512^3 on 1 and 2 slabs (two halves
#            of 32-bit offsets), then with 64-bit offsets forced at HALVES_WIDE_SIZES (unset: 512)
#   neq2d    run.storage neq16 in 2D: its GPU tests (== CPU, 1-3 slabs; each tiled candidate ==
#            production), then 8192^2 solver MLUPS of strip128f (NEQ2D_TILE) against production
#            (issue 25)
#   bodyspeed  cylinders (2D-1 geometry 8800x1640 float32, 3D-1Z 250x41x41 float64) against the
#            plain box on the same grid: kernel-only and whole-run MLUPS, device vs host forces,
#            3D bodies kernel at several block sizes and the general bodies kernel (BODY_ONLY=2D
#            or 3D: that grid only; BODY_FULL=0 skips this part); then 3D-1Z kernels against the
#            box at larger D (BODY_D3, cells per diameter, default "20 40": 500x82x82,
#            1000x164x164) in BODY_PRECISION3D (default float64 float32), one process per D
#   mdprof   host profile of the 64k-atom MD run (where a step's host time goes)
#   mdkern   device time per MD kernel, host time per launch, force-loop unroll variants
#   monitor  60-second monitored cavity run (issue 10)
#   re100    Schäfer-Turek 2D-2 at D = 40, 80, 160 cells: Cd max, Cl max, Strouhal against the
#            resolution (issue 21; docs/bodies.md). RE100_D picks the grids, RE100_LEN the
#            channels (22, the benchmark's 2.2; 30: 3.0 long), RE100_OUTLET the outlet kinds
#            (domain.outlet.kind: convective, the case's, pressure, zero_gradient),
#            RE100_SCALING the inflow: diffusive (the default: U_max = 0.1 * 40 / D, tau 0.58 on
#            every grid, so the O(Ma^2) error falls with the grid's), acoustic (U_max = 0.1) or
#            both ("diffusive acoustic").
#            Each run takes 30 shedding periods (150 D / U steps), forces 100 times a period
#   bodies3d D3Q19 bodies (issue 21): GPU tests (tests/test_bodies3d_gpu.py), Schäfer-Turek
#            3D-1Z (cases/cylinder3d.yaml) on cupy, float64, D = 10 and 20 cells: Cd/Cl against
#            the reference intervals, MLUPS of the case against the plain box on its grid
# Logs go to $OUT (./gpu-out); the ones BENCHMARKS.md cites are copied to benchmarks/logs/.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # for the scripts; pytest sets its own
OUT=${OUT:-./gpu-out}
STAGES=${STAGES:-"tests d2q9 timing d3q19 fp16acc md monitor"}
# REQUIRE_CARD: a part of the GPU's name; on any other card nothing runs (a call that asked for
# an H200 may get an H100, and its device time is better kept for another try)
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [[ -n ${REQUIRE_CARD:-} && "$card" != *"$REQUIRE_CARD"* ]]; then
    echo "card: ${card:-none}; REQUIRE_CARD=$REQUIRE_CARD: nothing run"
    exit 0
fi
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
has() { [[ " $STAGES " == *" $1 "* ]]; }
fp16_512() {  # the solver's fp16 rate at 512^3 (its "cupy" line); arguments: the time limit
    # (s), then more bench options
    local limit=$1
    shift
    timeout "$limit" python3 -m simsplit bench --backend cupy --grid 512x512x512 --steps 50 \
        --repeats 3 --no-graph --storage float16 "$@" 2>&1 | quiet | grep -E "^cupy"
}
split_paths() {  # source.D3Q19_X2_SPLIT_PATHS = $1 (True or False) in this tree's source.py
    sed -i "s/^D3Q19_X2_SPLIT_PATHS = .*/D3Q19_X2_SPLIT_PATHS = $1/" \
        simsplit/backends/cuda_c/source.py
}
split_paths_ab() {  # fp16_512 with split paths off and on, alternating twice, appended to $1;
    # the rest of the arguments go to fp16_512. source.py is left with split paths on
    local log=$1 r v
    shift
    for r in 1 2; do
        for v in False True; do
            split_paths $v
            fp16_512 100 "$@" | sed "s/^/split paths $v: /" | tee -a "$log"
        done
    done
}
note "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if has tests; then
    note "GPU tests"
    timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest -o addopts=-ra -m gpu -q -rsfE -p no:cacheprovider \
        ${TESTS_K:+-k "$TESTS_K"} 2>&1 \
        | tee "$OUT/gpu-tests.log" | quiet | tail -25
fi
if has d2q9; then
    note "D2Q9 8192x8192 float32, 1 slab (issue 3)"
    timeout 90 python3 -m simsplit bench --backend cupy --backend numba-cuda --grid 8192x8192 \
        --steps 100 --repeats 5 --no-graph 2>&1 | tee "$OUT/bench-d2q9.log" | quiet | tail -5
    note "cost of splitting: 4096x8192 on 1 slab vs 2 slabs of 4096x4096 (issue 4)"
    for ov in on off; do
        for n in 1 2; do
            timeout 60 python3 -m simsplit bench --backend cupy --grid 4096x8192 --subdomains $n \
                --steps 100 --repeats 5 --overlap $ov --no-graph 2>&1 | quiet \
                | grep -E "^cupy" | sed "s/^/overlap $ov: /" | tee -a "$OUT/bench-split.log"
        done
    done
fi
if has timing; then
    for ov in true false; do
        note "timing breakdown, CUDA events: 2 slabs of 4096x4096, overlap $ov (issue 4)"
        timeout 60 python3 -m simsplit run cases/cavity.yaml --backend cupy \
            --set run.precision=float32 --set fluid.reynolds=1000 \
            --set domain.shape=[4096,8192] --set decomposition.subdomains=2 --steps 1000 \
            --set run.tolerance=0 --set run.timing=device --set run.overlap=$ov \
            --set output.dir=null --quiet 2>&1 | quiet | grep -E "throughput|timing|error"
    done
fi
if has d3q19; then
    note "D3Q19 512^3 float32 (issue 7)"
    for variant in "--storage float32" "--storage float16" \
            "--storage float32 --temporal-blocking off" "--storage float16 --temporal-blocking off" \
            "--streaming aa" "--storage float16 --streaming aa"; do
        echo "-- $variant"
        timeout 120 python3 -m simsplit bench --backend cupy --grid 512x512x512 --steps 50 \
            --repeats 3 --no-graph $variant 2>&1 | quiet | tail -4 | tee -a "$OUT/bench-d3q19.log"
    done
fi
if has bigcube; then
    note "in-place AA streaming: the largest cubes (issue 7)"
    for spec in "1024x1024x1024 --storage float32" "1280x1280x1280 --storage float16"; do
        set -- $spec
        echo "-- $*"
        timeout 150 python3 -m simsplit bench --backend cupy --grid $1 --steps 10 --repeats 2 \
            --no-graph --streaming aa $2 $3 2>&1 | quiet | tail -4 | tee -a "$OUT/bench-bigcube.log"
        nvidia-smi --query-gpu=memory.total --format=csv,noheader
    done
fi
if has twostep; then
    note "D3Q19 two steps per sweep, column variants at 512^3 (issue 7) ${TWOSTEP_ARGS:-}"
    timeout 300 python3 scripts/tune_d3q19_two_steps.py --n 512 ${TWOSTEP_ARGS:-} 2>&1 | quiet \
        | tee "$OUT/two-steps-d3q19.log"
    if command -v ncu >/dev/null; then
        note "DRAM bytes per cell update, one-step and two-step sweeps, 256^3 float32 (ncu)"
        timeout 120 ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
            -k regex:d3q19_stream_collide python3 scripts/tune_d3q19_two_steps.py --n 512 \
            --variants ${NCU_VARIANT:-0} --runs ${NCU_RUN:-128} --once 2>&1 | grep -E "d3q19_stream|dram__|duration" \
            | tee "$OUT/two-steps-ncu.log"
    fi
fi
if has tune3d; then
    note "D3Q19 launch variants, 512^3 (issue 7) ${TUNE3D_ARGS:-}"
    timeout 420 python3 scripts/tune_d3q19.py --n 512 --steps 20 ${TUNE3D_ARGS:-} 2>&1 | quiet \
        | tee "$OUT/tune-d3q19.log"
fi
if has inst3d; then
    # instructions executed per cell update, the measure the kernels are bound by (ncu showed
    # them issue-bound); TUNE3D_ARGS may name a --baseline folder and --variants
    note "D3Q19 instructions per cell, Nsight Compute, 256^3 (issue 7) ${TUNE3D_ARGS:-}"
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    for storage in float32 float16; do
        echo "-- $storage"
        timeout 200 "$NCU" --kernel-name regex:d3q19 --launch-count 40 \
            --metrics smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_global_ld.sum \
            python3 scripts/tune_d3q19.py --n 256 --steps 1 --storages $storage \
            ${TUNE3D_ARGS:-} 2>&1 | quiet | tee -a "$OUT/inst-d3q19.log" \
            | grep -E "^ *(float|best)|inst_executed.sum |regs" \
            | awk '/inst_executed.sum /{v = $NF; gsub(/,/, "", v); printf "%s  %.1f per cell\n", $0, v / 16777216; next} {print}'
    done
fi
if has d3q19tuned; then
    note "D3Q19 512^3 with the launch autotuner (issue 7)"
    for variant in "--storage float32" "--storage float16"; do
        echo "-- $variant --autotune"
        timeout 150 python3 -m simsplit bench --backend cupy --grid 512x512x512 --steps 50 \
            --repeats 3 --no-graph --autotune $variant 2>&1 | quiet | tail -12 \
            | tee -a "$OUT/bench-d3q19-tuned.log"
    done
fi
if has ncu; then
    note "Nsight Compute: D3Q19 256^3, production launch, fp16 and float32 (issue 7)"
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [[ -n "$NCU" ]]; then
        for storage in float16 float32; do
            for variant in 5 8; do  # one cell at 5 blocks (production), two cells at 1
                echo "-- $storage, variant $variant"
                timeout 120 "$NCU" --kernel-name regex:d3q19 --launch-skip 2 --launch-count 1 \
                    --section SpeedOfLight --section MemoryWorkloadAnalysis \
                    --section Occupancy --section WarpStateStats --section SchedulerStats \
                    python3 scripts/tune_d3q19.py --n 256 --steps 3 --storages $storage \
                    --variants $variant 2>&1 | quiet | tee -a "$OUT/ncu-d3q19.log" \
                    | grep -vE "^==PROF==|^\s*-+\s*$" | tail -60
            done
        done
    else
        echo "no ncu on this machine"; ls /usr/local/cuda/bin | head -30
    fi
fi
if has fp16acc; then
    note "fp16 against float32 storage: 3D cavity Re 100, 128^3, 60000 steps (issue 7)"
    timeout 150 python3 - <<'PYEOF' 2>&1 | quiet
import numpy as np
import simsplit

def centreline(storage):
    case = simsplit.load_case("cases/cavity3d.yaml", overrides={
        "domain.shape": [128, 128, 128], "run.backend": "cupy", "run.precision": "float32",
        "run.storage": storage, "run.tolerance": 0, "run.steps": 60000})
    sim = simsplit.Simulation(case)
    sim.run(output=False)
    u = sim.velocity()  # (nz, ny, nx, 3) in lid units
    mid = slice(63, 65)
    return u, u[:, mid, mid, 0].mean(axis=(1, 2))

u16, c16 = centreline("float16")
u32, c32 = centreline("float32")
print(f"max |u_x(fp16) - u_x(fp32)| on the vertical centreline: {np.abs(c16 - c32).max():.3e}")
print(f"max |u(fp16) - u(fp32)| over the field: {np.abs(u16 - u32).max():.3e}")
print(f"max |u_x| on the centreline (fp32): {np.abs(c32).max():.3f}")
PYEOF
fi
if has storage25; then
    note "16-bit storage formats, D3Q19 512^3 (issue 25)"
    for variant in "--storage float16" "--storage e4m11" "--storage float32"; do
        echo "-- $variant"
        timeout 120 python3 -m simsplit bench --backend cupy --grid 512x512x512 --steps 50 \
            --repeats 3 --no-graph $variant 2>&1 | quiet | tail -4 | tee -a "$OUT/bench-storage25.log"
    done
    timeout 300 python3 scripts/tune_d3q19_two_steps.py --n 512 --storages float16 e4m11 \
        ${TWOSTEP_ARGS:-} 2>&1 | quiet | tee "$OUT/two-steps-storage25.log"
fi
if has acc25; then
    note "storage formats on the 3D cavity Re 1000 128^3 against Albensoeder & Kuhlmann (issue 25)"
    timeout 590 python3 scripts/fp16_study.py --backend cupy --cases cavity3d_re1000_128 \
        --storages ${ACC25_STORAGES:-f64,f32,f32/float16,f32/e4m11} 2>&1 | quiet \
        | tee "$OUT/acc25.log"
fi
if has neq25; then
    note "run.storage neq16: GPU tests, speed, the Re 1000 cube (issue 25)"
    timeout 420 python3 -m pytest -o addopts=-ra -q -m gpu tests/test_d3q19_storage_gpu.py \
        tests/test_d2q9_storage_gpu.py tests/test_bodies3d_gpu.py -k neq16 2>&1 | quiet \
        | tail -8 | tee "$OUT/neq25-tests.log"
    for grid in 512x512x512 8192x8192; do
        for st in neq16 float16 float32; do
            echo "-- $grid $st"
            timeout 120 python3 -m simsplit bench --backend cupy --grid $grid --steps 50 \
                --repeats 3 --no-graph --precision float32 --storage $st 2>&1 | quiet | tail -3 \
                | tee -a "$OUT/bench-neq25.log"
        done
    done
    for st in neq16 float16; do  # numba-cuda's records kernels: a bit-level twin, not a speed path
        echo "-- numba-cuda 256x256x256 $st"
        timeout 150 python3 -m simsplit bench --backend numba-cuda --grid 256x256x256 --steps 20 \
            --repeats 3 --no-graph --precision float32 --storage $st 2>&1 | quiet | tail -3 \
            | tee -a "$OUT/bench-neq25.log"
    done
    timeout 590 python3 scripts/fp16_study.py --backend cupy --cases cavity3d_re1000_128 \
        --storages ${ACC25_STORAGES:-f64,f32,f32/neq16} 2>&1 | quiet | tee "$OUT/acc25-neq16.log"
    timeout 590 python3 scripts/fp16_study.py --backend cupy --cases cylinder2d_d20,cylinder2d_d40 \
        --storages f64,f32,f32/float16,f32/e4m11,f32/neq16 2>&1 | quiet \
        | tee "$OUT/acc25-cylinder.log"
fi
if has neq16s; then
    note "run.storage neq16s: GPU tests, speed against neq16 and float32 storage (issue 25)"
    [[ ${NEQ16S_TESTS:-1} = 1 ]] && timeout 360 python3 -m pytest -o addopts=-ra -q \
        -p no:cacheprovider -m gpu tests/test_d3q19_storage_gpu.py tests/test_d2q9_storage_gpu.py \
        tests/test_bodies3d_gpu.py -k neq16s 2>&1 | quiet | tail -8 | tee "$OUT/neq16s-tests.log"
    if [[ ${NEQ16S_BENCH:-1} = 1 ]]; then
        for grid in 512x512x512 8192x8192; do
            for st in neq16s neq16 float32; do
                timeout 100 python3 -m simsplit bench --backend cupy --grid $grid --steps 50 \
                    --repeats 3 --no-graph --precision float32 --storage $st 2>&1 | quiet \
                    | grep -E "^cupy|^copy" | tee -a "$OUT/bench-neq16s.log"
            done
        done
    fi
fi
if has spans; then
    note "slabs with bodies by column spans: GPU tests, cylinders' kernels against the box (issue 25)"
    [[ ${SPANS_TESTS:-1} = 1 ]] && timeout 420 python3 -m pytest -o addopts=-ra -q \
        -p no:cacheprovider -m gpu tests/test_bodies3d_gpu.py tests/test_d3q19_storage_gpu.py \
        tests/test_d2q9_storage_gpu.py -k "${SPANS_K:-neq16}" \
        2>&1 | quiet | tail -8 | tee "$OUT/spans-tests.log"
    timeout 300 python3 scripts/bench_bodies.py --only 3D --d3 ${SPANS_D:-20} --kernels-only \
        --precision3d float32 --storage3d ${SPANS_STORAGES:-neq16 neq16s float32} 2>&1 \
        | quiet | tee "$OUT/spans-bench.log"
    timeout 240 python3 scripts/bench_bodies.py --only 2D --kernels-only --steps 2000 \
        --storage2d ${SPANS_STORAGES:-neq16 neq16s float32} 2>&1 | quiet \
        | tee -a "$OUT/spans-bench.log"
fi
if has neqsplit; then
    note "records on 1, 2 and 4 slabs of one GPU: the cost of splitting (issue 25)"
    for st in ${NEQSPLIT_STORAGES:-neq16s neq16}; do
        for n in 1 2 4; do
            timeout 120 python3 -m simsplit bench --backend cupy --grid ${NEQSPLIT_GRID:-512x512x512} \
                --steps 50 --repeats 3 --precision float32 --storage $st --subdomains $n 2>&1 \
                | quiet | grep -E "^cupy" | sed "s/^/$st $n slabs: /" | tee -a "$OUT/neqsplit.log"
        done
    done
fi
if has halves; then
    note "records' index types: tests, registers, 512^3 on 1 and 2 slabs, 64-bit forced (issue 25)"
    timeout 300 python3 -m pytest -o addopts=-ra -q -p no:cacheprovider -m gpu \
        tests/test_d3q19_storage_gpu.py -k "neq16 and cupy" 2>&1 | tail -4 \
        | tee "$OUT/halves-tests.log"
    timeout 150 python3 - <<'PY' 2>&1 | quiet | tee "$OUT/halves-registers.log"
import cupy
from simsplit.backends.cuda_c import kernel_names, source
from simsplit.backends.cuda_c.d2q9 import compile_options
for stress in (False, True):
    names = [kernel_names.d3q19_neq_name(False, False, i, stress) for i in source.D3Q19_NEQ_INDEX]
    module = cupy.RawModule(code=source.kernel_source("d3q19.cu"), options=compile_options(0),
                            name_expressions=names)
    for n in names:
        print(n, module.get_function(n).num_regs, "registers")
PY
    for st in neq16s neq16; do
        for n in 1 2; do
            timeout 120 python3 -m simsplit bench --backend cupy --grid 512x512x512 --steps 50 \
                --repeats 3 --precision float32 --storage $st --subdomains $n 2>&1 | quiet \
                | grep -E "^cupy" | sed "s/^/$st $n slabs: /" | tee -a "$OUT/halves-bench.log"
        done
    done
    for g in ${HALVES_WIDE_SIZES-512}; do
        for st in neq16 neq16s; do
            timeout 100 python3 -c "
import sys
from simsplit.backends.cuda_c import source
source.FLAT_LIMIT = 0  # every array takes 64-bit offsets
from simsplit.cli.commands import entry
sys.argv = ['simsplit', 'bench', '--backend', 'cupy', '--grid', '${g}x${g}x${g}', '--steps',
            '50', '--repeats', '3', '--precision', 'float32', '--storage', '$st']
entry()" 2>&1 | quiet | grep -E "^cupy" | sed "s/^/$st 64-bit offsets: /" \
                | tee -a "$OUT/halves-bench.log"
        done
    done
fi
if has neqtile; then
    note "run.storage neq16: tiled box kernel candidates, D3Q19 and D2Q9 (tune_neq16)"
    timeout 480 python3 scripts/tune_neq16.py ${NEQTILE_ARGS:-} 2>&1 | quiet \
        | tee "$OUT/tune-neq16.log"
fi
if has fp16x2; then
    note "D3Q19 fp16: two x-cells per thread against one (issue 25)"
    timeout 200 python3 -m pytest -o addopts=-ra -q -m gpu tests/test_d3q19_storage_gpu.py \
        -k "fp16 or two_cell" 2>&1 | quiet | tail -6 | tee "$OUT/fp16x2-tests.log"
    timeout 150 python3 scripts/bench_fp16_x2.py --kernels 2>&1 | quiet | tee "$OUT/bench-fp16x2.log"
fi
if has x2ab; then
    note "issue 25: the fp16 two-cell kernel, production against split paths"
    timeout 300 python3 scripts/ab_fp16_x2.py ${X2AB_BASE:+--base "$X2AB_BASE"} \
        ${X2AB_SHAPES:+--shapes "$X2AB_SHAPES"} 2>&1 | quiet | tee "$OUT/x2ab.log"
    for r in $(seq "${X2AB_BENCH:-2}"); do
        fp16_512 60 | tee -a "$OUT/x2ab.log"
    done
fi
if has x2h200; then
    # needs an H200 (on an H100 DRAM bounds fp16 pairs: the question is moot there)
    note "issue 25 on an H200: split paths, weak pair stores, the solver with and without"
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
        || echo "not an H200: these timings do not answer issue 25's question"
    # a kernel folder: split paths built in, pair stores plain (weak) instead of st.global.wb
    wk=/tmp/x2h200-kernels
    rm -rf "$wk" && mkdir -p "$wk" && cp kernels/*.cu kernels/*.cuh "$wk"/
    sed -i 's|    __stwb(reinterpret_cast<pair_t<S>\*>(p), v);  // default write-back|    *reinterpret_cast<pair_t<S>*>(p) = v;|' "$wk/lbm_common.cuh"
    sed -i 's|^#include "simsplit_generated.cuh"$|#include "simsplit_generated.cuh"\n#undef SIMSPLIT_D3Q19_X2_SPLIT_PATHS\n#define SIMSPLIT_D3Q19_X2_SPLIT_PATHS 1|' "$wk/d3q19.cu"
    grep -q "reinterpret_cast<pair_t<S>\*>(p) = v;" "$wk/lbm_common.cuh" \
        && grep -q "define SIMSPLIT_D3Q19_X2_SPLIT_PATHS 1" "$wk/d3q19.cu" \
        || echo "the kernel folder's edits did not apply: its row is production's"
    timeout 150 python3 scripts/ab_fp16_x2.py --base "$wk" --shapes 64x16,64x12 --rounds 2 2>&1 \
        | quiet | tee "$OUT/x2h200.log"
    src=simsplit/backends/cuda_c/source.py
    saved=$(mktemp) && cp "$src" "$saved"  # this tree's source.py, put back after
    split_paths_ab "$OUT/x2h200.log"  # ends with split paths on, for the tests
    timeout 150 python3 -m pytest -o addopts=-ra -q -m gpu -p no:cacheprovider \
        tests/test_d3q19_storage_gpu.py -k "fp16 or two_cell" 2>&1 | tail -6 \
        | tee -a "$OUT/x2h200.log"
    cp "$saved" "$src" && rm -f "$saved"
fi
if has h200open; then
    note "issue 25 on an H200: fp16 512^3, one and two steps per sweep"
    for r in 1 2; do
        for tb in off on; do
            fp16_512 100 --temporal-blocking $tb | sed "s/^/temporal blocking $tb: /" \
                | tee -a "$OUT/h200open.log"
        done
    done
    note "issue 25 on an H200: the solver with the two-cell kernel's split paths off and on"
    src=simsplit/backends/cuda_c/source.py
    saved=$(mktemp) && cp "$src" "$saved"  # this tree's source.py, put back after
    split_paths_ab "$OUT/h200open.log" --temporal-blocking off
    cp "$saved" "$src" && rm -f "$saved"
    note "issue 25 on an H200: raw two-cell launches, production against split paths"
    timeout 150 python3 scripts/ab_fp16_x2.py --shapes 64x16,64x12 --rounds 2 2>&1 | quiet \
        | tee -a "$OUT/h200open.log"
    note "issue 25 on an H200: the fp16 tuner's production rows"
    timeout 200 python3 scripts/tune_d3q19_fp16.py --production 2>&1 | quiet \
        | tee -a "$OUT/h200open.log"
fi
if has neqtilebench; then
    # the fastest candidates of the neqtile stage's log (or NEQTILE_3D / NEQTILE_2D)
    log="$OUT/tune-neq16.log"
    best3=${NEQTILE_3D:-$(sed -n 's/^best D3Q19 at 512: //p' "$log" 2>/dev/null | head -1)}
    best2=${NEQTILE_2D:-$(sed -n 's/^best D2Q9 at 8192: //p' "$log" 2>/dev/null | head -1)}
    runs=("512x512x512 production")
    [[ -n ${best3/production/} ]] && runs+=("512x512x512 $best3")
    runs+=("8192x8192 production")
    [[ -n ${best2/production/} ]] && runs+=("8192x8192 $best2")
    for run in "${runs[@]}"; do
        read -r grid tile <<<"$run"
        note "bench $grid neq16 $tile"
        SIMSPLIT_NEQ16_TILE=$tile timeout 110 python3 -m simsplit bench --backend cupy \
            --grid "$grid" --steps 50 --repeats 3 --no-graph --precision float32 \
            --storage neq16 2>&1 | quiet | tail -3 | tee -a "$OUT/bench-neqtile.log"
    done
fi
if has neqtiletests; then
    note "run.storage neq16: each D3Q19 candidate == production on 1-3 slabs (GPU tests)"
    timeout 480 python3 -m pytest -o addopts=-ra -q -m gpu tests/test_d3q19_storage_gpu.py \
        tests/test_d2q9_storage_gpu.py -k tile 2>&1 | quiet | tail -8 \
        | tee "$OUT/neqtile-tests.log"
fi
if has md; then
    note "MD: 64k atoms (density 1.0) and 1M atoms (0.8442), cupy + numba-cuda (issue 5)"
    timeout 240 python3 scripts/bench_md_gpu.py 2>&1 | tee "$OUT/bench-md.log" | quiet | tail -15
fi
if has mdtypes; then
    note "MD two types: one-type crystal, one-type liquid, Kob-Andersen; 64k, 1M (issue 22)"
    timeout 200 python3 scripts/bench_md_gpu.py --backends cupy numba-cuda --seconds 3 \
        --systems one64k liq64k ka64k one1m liq1m ka1m 2>&1 | tee "$OUT/bench-md-types.log" \
        | quiet | tail -16
fi
if has mdsplit; then
    note "MD split on one GPU: 1, 2, 4 slabs in one arena, 64k / 1M / 8M atoms (issue 20)"
    timeout ${MDSPLIT_TIMEOUT:-420} python3 scripts/bench_split_md.py ${MDSPLIT_ARGS:-} 2>&1 \
        | tee "$OUT/bench-split-md.log" | quiet
fi
if has mpimd; then
    note "MD under mpiexec on the GPU, 1 slab per rank, against 1 slab in 1 process (issue 20)"
    timeout ${MPIMD_TIMEOUT:-300} python3 scripts/bench_mpi_md.py ${MPIMD_ARGS:-} 2>&1 \
        | tee "$OUT/bench-mpi-md.log" | quiet
fi
if has open; then
    note "issue 20: MD under mpiexec -n 2 on the GPU (MPS), three runs"
    for r in 1 2 3; do
        SIMSPLIT_NODE_NOTICES=1 timeout 120 python3 scripts/bench_mpi_md.py --ranks 2 --seconds 3 \
            --mps 2>&1 | quiet | tail -4 | tee -a "$OUT/open-mpi-md.log"
    done
    note "issue 25: fp16 two cells against one, fp16 one and two steps per sweep"
    timeout 150 python3 scripts/bench_fp16_x2.py --kernels --rounds 2 2>&1 | quiet \
        | tee "$OUT/open-fp16-x2.log" | tail -14
    timeout 200 python3 scripts/tune_d3q19_fp16.py 2>&1 | quiet \
        | tee "$OUT/open-fp16-tuner.log" | tail -45
    for tb in off on; do
        fp16_512 60 --temporal-blocking $tb | sed "s/^/temporal blocking $tb: /" \
            | tee -a "$OUT/open-fp16-bench.log"
    done
    note "GPU tests under mpiexec not yet run on a GPU (D2Q9 cupy ranks)"
    timeout 150 python3 -m pytest -o addopts=-ra -q -p no:cacheprovider -m "mpi or gpu" \
        tests/test_mpi.py -k cupy 2>&1 | tail -4 | tee "$OUT/open-tests.log"
fi
if has mpimd5; then
    note "issue 20: MD under mpiexec -n 2 on the GPU (MPS), five runs, then one profiled"
    for r in $(seq ${MPIMD5_RUNS:-5}); do
        SIMSPLIT_NODE_NOTICES=1 timeout 120 python3 scripts/bench_mpi_md.py --ranks 2 --seconds 4 \
            --mps 2>&1 | quiet | tail -4 | tee -a "$OUT/mpimd5.log"
    done
    [[ ${MPIMD5_PROFILE:-1} = 1 ]] && timeout 120 python3 scripts/bench_mpi_md.py --ranks 2 --seconds 4 --mps \
        --profile "$OUT/mpimd5-profile.txt" 2>&1 | quiet | tail -4 | tee -a "$OUT/mpimd5.log"
fi
if has mpimdab; then
    note "issue 20: MD under mpiexec, A/B against ${MPIMDAB_BASE:-ab_base}"
    python3 scripts/probe_launch_overhead.py 2>&1 | tee "$OUT/launch-probe.log"
    for r in $(seq ${MPIMDAB_ROUNDS:-2}); do
        for arm in ${MPIMDAB_ARMS:-base raw1}; do
            if [[ $arm = base ]]; then dir=${MPIMDAB_BASE:-ab_base}; raw=1; else dir=.; raw=${arm#raw}; fi
            (cd "$dir" && PYTHONPATH=/tmp/site SIMSPLIT_RAW_LAUNCH=$raw SIMSPLIT_NODE_NOTICES=1 \
                timeout 120 python3 scripts/bench_mpi_md.py --ranks 2 --seconds 4 --mps 2>&1 \
                | quiet | tail -3 | sed "s/^/$arm: /" | tee -a "$OUT/mpimdab.log")
        done
    done
    note "this tree's GPU MD tests: mpiexec, then cupy in one process"
    timeout 240 python3 -m pytest -o addopts=-ra -q -p no:cacheprovider -m gpu \
        tests/test_md_multi_gpu.py -k "mpiexec and (bitwise or overflow)" 2>&1 | tail -4 \
        | tee "$OUT/mpimdab-tests.log"
    timeout ${MPIMDAB_TESTS_S:-120} python3 -m pytest -o addopts=-ra -q -p no:cacheprovider -m gpu \
        -x tests/test_md_gpu.py -k cupy 2>&1 | tail -4 | tee -a "$OUT/mpimdab-tests.log"
fi
if has neq2d; then
    note "issue 25: neq16 in 2D, the tiled candidates against production"
    timeout 240 python3 -m pytest -o addopts=-ra -q -p no:cacheprovider -m gpu \
        tests/test_d2q9_storage_gpu.py -k neq16 2>&1 | tail -4 | tee "$OUT/neq2d-tests.log"
    for r in 1 2; do
        for tile in ${NEQ2D_TILE:-strip128f} production; do
            SIMSPLIT_NEQ16_TILE=$tile timeout 60 \
                python3 -m simsplit bench --backend cupy --grid 8192x8192 --precision float32 \
                --storage neq16 --steps 100 --repeats 3 2>&1 | quiet | grep -E "^cupy" \
                | sed "s/^/neq16 $tile: /" | tee -a "$OUT/neq2d-bench.log"
        done
    done
fi
if has split3d; then
    note "D3Q19 512^3 on 1, 2, 4 slabs of one GPU: pairs by copies, pairs through the transport, one step (issue 20)"
    timeout ${SPLIT3D_TIMEOUT:-420} python3 scripts/bench_split_d3q19.py 2>&1 | quiet \
        | tee "$OUT/bench-split-d3q19.log"
fi
if has mpi3d; then
    note "D3Q19 512^3 under mpiexec on the GPU, pairs through MPI vs one step per sweep (issue 20)"
    timeout ${MPI3D_TIMEOUT:-300} python3 scripts/bench_mpi_d3q19.py ${MPI3D_ARGS:---ranks 2 4} 2>&1 \
        | tee "$OUT/bench-mpi-d3q19.log" | quiet
    timeout 300 python3 -m pytest -o addopts=-ra -q -m "mpi or gpu" tests/test_mpi.py \
        tests/test_d3q19_two_steps_gpu.py 2>&1 | tail -5 | tee "$OUT/tests-mpi3d.log"
fi
if has bodyspeed; then
    note "flows around bodies against the plain box, same grids: kernels, whole runs, forces (issue 21)"
    if [[ "${BODY_FULL:-1}" != 0 ]]; then
        timeout 480 python3 scripts/bench_bodies.py --backend cupy --steps ${BODY_STEPS:-10000} \
            ${BODY_ONLY:+--only $BODY_ONLY} 2>&1 \
            | quiet | tee "$OUT/bench-bodies.log"
    fi
    for d in ${BODY_D3-20 40}; do  # set-up of a 1000x164x164 cylinder takes a minute on the host
        timeout ${BODY_D3_TIMEOUT:-300} python3 scripts/bench_bodies.py --backend cupy \
            --steps ${BODY_STEPS:-10000} --only 3D --kernels-only --d3 $d \
            --precision3d ${BODY_PRECISION3D:-float64 float32} 2>&1 \
            | quiet | tee -a "$OUT/bench-bodies.log"
    done
    if [[ -n "${BODY_PROFILE:-}" ]]; then
        echo "-- host profile of the cylinder run"
        timeout 120 python3 -m cProfile -s tottime -m simsplit run cases/cylinder2d.yaml \
            --backend cupy --set run.precision=float32 --set domain.shape=[8800,1640] \
            --set decomposition.subdomains=1 --steps ${BODY_STEPS:-3000} --set run.tolerance=0 \
            --set output.dir=null --quiet 2>&1 | quiet | head -40 | tee "$OUT/prof-bodies.log"
    fi
fi
if has re100; then
    note "Schäfer-Turek 2D-2 (Re 100) on cupy, float64: D = ${RE100_D:-40 80 160} cells (issue 21)"
    for scaling in ${RE100_SCALING:-diffusive}; do
    for kind in ${RE100_OUTLET:-convective}; do
    for d in ${RE100_D:-40 80 160}; do
        for len in ${RE100_LEN:-22}; do
            ny=$((41 * d / 10)); nx=$((ny * len * 10 / 41))
            if [[ $scaling == acoustic ]]; then u=0.1; else u=$(awk "BEGIN {print 4 / $d}"); fi
            steps=$(awk "BEGIN {printf \"%d\", 150 * $d / $u}")
            every=$(awk "BEGIN {e = int($d / (20 * $u)); print (e < 1 ? 1 : e)}")
            echo "-- D $d, channel ${len:0:1}.${len:1} x 0.41 ($nx x $ny), $scaling scaling: U_max $u, $steps steps, outlet $kind"
            timeout 450 python3 -m simsplit run cases/cylinder2d_re100.yaml --backend cupy \
                --set domain.shape=[$nx,$ny] --set domain.size=[${len:0:1}.${len:1},0.41] \
                --set domain.inlet.velocity=$u --steps $steps --set output.forces_every=$every \
                --set domain.outlet.kind=$kind \
                --set output.animation=0 --set output.dir=null --quiet 2>&1 \
                | quiet | grep -E "shedding|throughput|lattice|error" | tee -a "$OUT/cylinder2d-re100-cupy.log"
        done
    done
    done
    done
fi
if has mdprof; then
    note "host profile: 64k atoms, cupy (issue 5)"
    timeout 120 python3 -m cProfile -s tottime scripts/bench_md_gpu.py --backends cupy \
        --systems hoomd --seconds 3 2>&1 | quiet | head -45 | tee "$OUT/mdprof.log"
fi
if has mdkern; then
    note "MD kernels: device time, launch cost, force unroll variants (issue 5)"
    timeout 180 python3 scripts/prof_md_kernels.py 2>&1 | quiet | tee "$OUT/mdkern.log"
fi
if has monitor; then
    note "60-second monitored cavity run: Re 1000, 4096^2 float32, 2 slabs (issue 10)"
    timeout 150 python3 -m simsplit run cases/cavity.yaml --backend cupy \
        --set run.precision=float32 --set fluid.reynolds=1000 --set domain.shape=[4096,4096] \
        --steps 150000 --set run.tolerance=0 --set run.check_every=5000 --monitor 1 \
        --output "$OUT/monitor60" --quiet 2>&1 | quiet | tail -16
    rm -rf "$OUT/monitor60/fields.h5" "$OUT/monitor60/checkpoints"
fi
if has bodies3d; then
    note "D3Q19 bodies: GPU tests (issue 21)"
    timeout 240 python3 -m pytest -o addopts=-ra -m gpu -q -rsfE -s -p no:cacheprovider \
        tests/test_bodies3d_gpu.py 2>&1 | tee "$OUT/gpu-tests-bodies3d.log" \
        | grep -E "bodies3d|passed|failed|error" | tail -20
    note "Schäfer-Turek 3D-1Z on cupy, float64, D = 10 and 20 cells (issue 21)"
    timeout 330 python3 scripts/cylinder_convergence.py --benchmark 3D-1Z --ny 41 82 \
        --backend cupy --precision float64 --mlups 2000 \
        --set run.tolerance=1e-7 run.steps=80000 output.forces_every=5000 2>&1 \
        | tee "$OUT/cylinder3d-cupy.log" | quiet
fi
note "done"
