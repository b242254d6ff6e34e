#!/usr/bin/env bash
# Every GPU benchmark that issues 30 (FLIP) and 31 (vortex particles) name, in one run on a lent GPU machine,
# the most wanted first, each under a time limit so that the run fits the device tool's ten minutes a
# command (docs/PERFORMANCE.md: build with `../shared/tools/gpu-prep`, carry `.gl` and the binary).
#
#   scripts/gpu-benches.sh OUT [EDDIES]      # OUT: a folder for the results; EDDIES: the binary to run
#
# Each benchmark writes OUT/NAME.json (one JSON object a line, as `eddies bench --json` prints them) and
# OUT/NAME.err; OUT/log records each one's exit status and seconds, or why it was skipped. The whole run
# stops starting benchmarks once EDDIES_BENCH_BUDGET seconds (default 540) have passed;
# EDDIES_BENCH_ARGS (e.g. `--quick`) is added to every command.
set -u
out=${1:?usage: scripts/gpu-benches.sh OUT [EDDIES]}
bin=${2:-target/portable/release/eddies}
budget=${EDDIES_BENCH_BUDGET:-540}
read -r -a extra <<< "${EDDIES_BENCH_ARGS:-}"
mkdir -p "$out"
[ -x "$bin" ] || { echo "no executable at $bin" >&2; exit 2; }
start=$SECONDS

# NAME LIMIT [ENV=VALUE...]: one benchmark, stopped after LIMIT seconds or at the end of the budget.
bench() {
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    if ((left < 15)); then
        echo "$name skipped: the budget of ${budget}s is spent" >> "$out/log"
        return
    fi
    ((limit > left)) && limit=$left
    local t=$SECONDS
    env "$@" timeout "$limit" "$bin" bench "$name" --backend gpu --json "${extra[@]}" \
        > "$out/$name$tag.json" 2> "$out/$name$tag.err"
    echo "$name$tag rc=$? $((SECONDS - t))s (limit ${limit}s)" >> "$out/log"
}

tag=""
# Issue 31's figures: 10⁶ vortons with the Poisson technique (≤ 30 ms a step), the boundary values'
# treecode against the GPU's direct sum, dye-drop (≤ 1 ms a step), the direct sum's pairs per second.
bench vpm-gpu-poisson-million 120
bench vpm-gpu-boundary 60
bench vpm-gpu-scenes 60
bench vpm-gpu-direct-sum 60
# Issue 30's figures: FLIP's dam break at 64³–256³ and the pressure solvers' table (MGPCG at 256³).
bench flip-gpu-dam-break 150
bench flip-gpu-pressure-tank 90
# The same table with the solver's fused passes apart (docs/gpu.md), against the run above.
tag=-separate
bench flip-gpu-pressure-tank 90 EDDIES_GPU_SEPARATE_PASSES=1
tag=""
# The stages moved to the device since the last hardware run, each against the CPU.
bench flip-gpu-pressure-bodies 90
bench vpm-gpu-splat 30
bench vpm-gpu-gaussian-splat 30
bench vpm-gpu-sampling 30
bench vpm-gpu-baroclinic 30
bench vpm-gpu-exchange 30
bench vpm-gpu-vector-solve 30
bench vpm-gpu-poisson-scenes 45
bench vpm-gpu-max-vortons-30 45
# Where the device's time goes, kernel by kernel, where there is time left.
tag=-profile
bench vpm-gpu-poisson-million 60 EDDIES_GPU_PROFILE=1
echo "done in $((SECONDS - start))s" >> "$out/log"
