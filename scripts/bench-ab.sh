#!/usr/bin/env bash
# An interleaved A/B of two builds on one private durable PostgreSQL cluster: runs
# switchyard-bench from build A, then from build B, and so on, each driving its own build's
# server, runner and fixture, with a fresh database each run. Alternating spreads the
# machine's drift over both builds; the A runs among themselves give the A/A spread a gain
# must beat twice over (docs/BENCHMARKS.md, "Method").
#
#   scripts/bench-ab.sh [--rounds N] A_DIR B_DIR -- DRIVER_ARGS…
#
# A_DIR and B_DIR hold release builds (switchyard-bench and the binaries it starts), e.g.
# target/release of two checkouts. DRIVER_ARGS pick the measure: --throughput-only,
# --latency-only, --soak-only --soak-seconds 30, --idle-only 10000. Each run's JSON is written
# to target/bench-ab/{a,b}-N.json; the last lines print them side by side.
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/stack.sh
source "$repo_root/scripts/lib/stack.sh"

rounds=3
while [[ ${1:-} == --* && $1 != -- ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if (($# < 3)) || [[ $3 != -- ]]; then
    echo "usage: scripts/bench-ab.sh [--rounds N] A_DIR B_DIR -- DRIVER_ARGS…" >&2
    exit 2
fi
declare -A dirs=([a]=$(realpath "$1") [b]=$(realpath "$2"))
shift 3
for build in a b; do
    if [[ ! -x ${dirs[$build]}/switchyard-bench ]]; then
        echo "error: no switchyard-bench in ${dirs[$build]} (build it with --release)" >&2
        exit 2
    fi
done

stack_trap_exit
section "PostgreSQL (private, durable)"
stack_start_cluster bench-ab 25433 "$STACK_DURABLE"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
out=target/bench-ab
mkdir -p "$out"
for ((round = 1; round <= rounds; round++)); do
    for build in a b; do
        section "Round $round/$rounds: $build (${dirs[$build]})"
        "${dirs[$build]}/switchyard-bench" --database-url "$DATABASE_URL" \
            --create-database "switchyard_ab" --bin-dir "${dirs[$build]}" \
            --out "$out/$build-$round.results.json" --work-dir "$out/work" "$@" \
            | tee "$out/$build-$round.json"
    done
done
