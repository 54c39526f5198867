#!/usr/bin/env bash
# The benchmark: builds in release mode, starts a private PostgreSQL cluster with durable
# settings (fsync=on, synchronous_commit=on) on a free port, and runs switchyard-bench, which
# starts the server, pairs a device, starts switchyard-mcp-runner and the fixture MCP server,
# measures every figure beside its baseline, prints a table and writes
# target/bench/results.json. See docs/BENCHMARKS.md.
#
#   scripts/bench.sh                 the full run (about 15 minutes: a 10-minute soak)
#   scripts/bench.sh --soak-hour     the full run with a one-hour soak
#   scripts/bench.sh --quick         a reduced run, under two minutes once built
#   scripts/bench.sh --smoke         a few seconds, debug build: checks that it runs
#
# Extra arguments after `--` go to switchyard-bench (e.g. `-- --soak-seconds 120`).
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/stack.sh
source "$repo_root/scripts/lib/stack.sh"

readonly PG_PREFERRED_PORT=25432

mode=()
profile=release
driver_args=()
while (($#)); do
    case $1 in
        --quick) mode=(--quick) ;;
        --smoke) mode=(--smoke); profile=debug ;;
        --soak-hour) driver_args+=(--soak-seconds 3600) ;;
        --release) profile=release ;;
        --) shift; driver_args+=("$@"); break ;;
        -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

stack_trap_exit
stack_build "$profile"

section "PostgreSQL (private, durable)"
# Durable commits are the point: every figure is measured with them.
options=$STACK_DURABLE
# pg_stat_statements, when installed, lets the driver say which statements a call costs.
if stack_has_statements; then
    options+=" $STACK_STATEMENTS"
fi
stack_start_cluster bench "$PG_PREFERRED_PORT" "$options"
fs_type=$(stat -f -c %T "$STACK_CLUSTER")
if [[ $fs_type == tmpfs || $fs_type == ramfs ]]; then
    echo "warning: $STACK_CLUSTER is on $fs_type: fsync costs nothing there, so commit figures" \
        "are flattering; set TMPDIR to a directory on a disk" >&2
fi

section "Benchmark"
# Thousands of idle long-polls need as many file descriptors (the driver raises its soft
# limit to the hard one; the server it starts inherits it).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "open files: $(ulimit -n)"
stack_run_driver "$profile" switchyard-bench bench --create-database switchyard_bench \
    "${mode[@]}" "${driver_args[@]}"
