# shellcheck shell=bash
# What the benchmark (bench.sh) and the chaos suite (chaos.sh) share: building the binaries
# their drivers start, a private PostgreSQL cluster that is removed on exit, and running the
# driver against it. The drivers themselves (crates/bench) create the database, migrate it,
# create the owner and start the server.
#
# Source this file (it sources postgres.sh), then:
#   stack_trap_exit                        stop and remove the cluster on exit, Ctrl-C, SIGTERM
#   stack_build PROFILE                    cargo build (debug or release) of what the drivers run
#   stack_has_statements                   whether pg_stat_statements is installed (then the
#                                          OPTIONS below may preload it: STACK_STATEMENTS)
#   stack_start_cluster NAME PORT OPTIONS  start a cluster in a fresh temporary directory: sets
#                                          STACK_CLUSTER (the directory) and DATABASE_URL
#   stack_run_driver PROFILE BIN NAME ARGS run target/PROFILE/BIN against the cluster, writing
#                                          target/NAME/results.json and using target/NAME/work
#
# Every function expects `set -euo pipefail` in the caller and stops the script on failure.

# shellcheck source-path=SCRIPTDIR source=postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

# Server options of a cluster whose figures are durable ones: every commit waits for its WAL
# flush. The benchmark and the latency A/B start theirs with these.
# shellcheck disable=SC2034 # used by the scripts that source this file
readonly STACK_DURABLE="-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=200"

# The server option that preloads pg_stat_statements (see stack_has_statements).
# shellcheck disable=SC2034 # used by the scripts that source this file
readonly STACK_STATEMENTS="-c shared_preload_libraries=pg_stat_statements"

# Whether this PostgreSQL has pg_stat_statements, which a cluster must preload to use.
stack_has_statements() {
    [[ -f "$(pg_find_bindir)/../lib/pg_stat_statements.so" ]]
}

# The cluster directory, once stack_start_cluster made it ("" before).
STACK_CLUSTER=""

# Prints a section heading.
section() {
    printf '\n==> %s\n' "$*"
}

# shellcheck disable=SC2317 # only called by the EXIT trap
stack_cleanup() {
    local status=$?
    # Finish the cleanup whatever happens: a second Ctrl-C or a closed stdout must not cut it
    # short.
    set +e
    trap '' INT TERM PIPE
    if [[ -n $STACK_CLUSTER ]]; then
        pg_stop_cluster "$STACK_CLUSTER"
        rm -rf "$STACK_CLUSTER"
    fi
    exit "$status"
}

# Stops and removes the cluster whenever the script ends; signals become ordinary exits so that
# the EXIT trap always runs.
stack_trap_exit() {
    trap stack_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# stack_build PROFILE: builds the server, the runner, the fixture and the drivers.
stack_build() {
    local profile=$1
    section "Build ($profile)"
    local build=(cargo build --locked -p switchyard-server -p switchyard-mcp-runner
        -p switchyard-fixture -p switchyard-bench)
    [[ $profile == release ]] && build+=(--release)
    "${build[@]}"
}

# stack_start_cluster NAME PORT OPTIONS: starts a cluster in a new directory
# $TMPDIR/switchyard-NAME-pg.XXXXXX on PORT (or the next free one) with the server OPTIONS,
# and sets STACK_CLUSTER and DATABASE_URL.
stack_start_cluster() {
    local name=$1 port=$2 options=$3
    STACK_CLUSTER=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-$name-pg.XXXXXX")
    DATABASE_URL=$(PG_CLUSTER_OPTIONS=$options pg_start_cluster "$STACK_CLUSTER" "$port")
    echo "cluster in $STACK_CLUSTER ($(stat -f -c %T "$STACK_CLUSTER")), $DATABASE_URL"
}

# stack_run_driver PROFILE BIN NAME [ARGS…]: runs the driver BIN of the PROFILE build against
# the cluster, with the binaries of the same build, its results in target/NAME/results.json
# and its scratch files in target/NAME/work.
stack_run_driver() {
    local profile=$1 bin=$2 name=$3
    shift 3
    "target/$profile/$bin" --database-url "$DATABASE_URL" --bin-dir "target/$profile" \
        --out "target/$name/results.json" --work-dir "target/$name/work" "$@"
}
