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
# shellcheck source-path=SCRIPTDIR source=lib/postgres.sh
source "$repo_root/scripts/lib/postgres.sh"

readonly PG_PREFERRED_PORT=55532

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

section() {
    printf '\n==> %s\n' "$*"
}

cluster=""
# shellcheck disable=SC2317 # only called by the EXIT trap
cleanup() {
    local status=$?
    set +e
    trap '' INT TERM PIPE
    if [[ -n $cluster ]]; then
        pg_stop_cluster "$cluster"
        rm -rf "$cluster"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "Build ($profile)"
build=(cargo build --locked -p switchyard-server -p switchyard-mcp-runner -p switchyard-fixture -p switchyard-bench)
[[ $profile == release ]] && build+=(--release)
"${build[@]}"

section "PostgreSQL (private)"
cluster=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-chaos-pg.XXXXXX")
DATABASE_URL=$(PG_CLUSTER_OPTIONS="-c max_connections=200" pg_start_cluster "$cluster" "$PG_PREFERRED_PORT")
echo "cluster in $cluster, $DATABASE_URL"

section "Chaos"
"target/$profile/switchyard-chaos" --database-url "$DATABASE_URL" \
    --pg-data "$cluster" --pg-bin "$(pg_find_bindir)" \
    --bin-dir "target/$profile" --out target/chaos/results.json --work-dir target/chaos/work \
    "${driver_args[@]}"
