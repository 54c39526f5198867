#!/usr/bin/env bash
# The chaos suite: builds the binaries, starts a private PostgreSQL cluster (never the shared
# one: the suite restarts it and kills its backends), and runs switchyard-chaos, which injects
# real faults at random moments and checks the invariants after every round. Prints a summary
# table, writes target/chaos/results.json, and exits non-zero if any invariant broke.
# Loopback only; every loop is bounded. See docs/RELIABILITY.md.
#
#   scripts/chaos.sh                          every case, 5 rounds each
#   scripts/chaos.sh --rounds 20              more repetitions
#   scripts/chaos.sh --case runner-kill       one case (repeat --case for several)
#   scripts/chaos.sh --seed 42                repeat a run's random timing
#
# Cases: runner-kill pg-backend-kill proxy-cut proxy-stall replica-restart disk-full pg-restart.
# disk-full mounts a small tmpfs for the runner's outbox and needs root (it is skipped
# otherwise). Other arguments (--calls N, --rate R) go to switchyard-chaos; --release builds
# in release mode.
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/stack.sh
source "$repo_root/scripts/lib/stack.sh"

readonly PG_PREFERRED_PORT=25532

profile=debug
driver_args=()
while (($#)); do
    case $1 in
        --release) profile=release ;;
        --rounds | --case | --seed | --calls | --rate)
            (($# >= 2)) || { echo "error: $1 needs a value" >&2; exit 2; }
            driver_args+=("$1" "$2")
            shift
            ;;
        -h | --help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

stack_trap_exit
stack_build "$profile"

section "PostgreSQL (private)"
stack_start_cluster chaos "$PG_PREFERRED_PORT" "-c max_connections=200"

section "Chaos"
stack_run_driver "$profile" switchyard-chaos chaos \
    --pg-data "$STACK_CLUSTER" --pg-bin "$(pg_find_bindir)" "${driver_args[@]}"
