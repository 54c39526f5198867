#!/usr/bin/env bash
# What the outbox's disk sync costs next to PostgreSQL's commits on the same disk, and what it
# costs them: starts a private durable cluster, runs `pgbench` (two clients, one durable
# one-row insert per transaction) and beside it a writer that overwrites 4 KiB of a file in
# the cluster's directory and syncs it every 5 ms, as the device runner's outbox commits. Each
# round runs the writer once with fsync and once with fdatasync, then pgbench alone. Prints
# each sync's p50/p90/p99 and pgbench's latency; first used in docs/bench-log/2026-12-01.md
# ("latest: the outbox's disk syncs").
#
#   scripts/sync-beside-postgres.sh [ROUNDS]   (default 3 rounds, about 10 s each)
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/stack.sh
source "$repo_root/scripts/lib/stack.sh"

rounds=${1:-3}
readonly SECONDS_EACH=3
stack_trap_exit
stack_start_cluster sync 28432 "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
bindir=$(pg_find_bindir)
psql=("$bindir/psql" -X -q "$DATABASE_URL")
"${psql[@]}" -c 'CREATE TABLE sync_probe (n int)'
script="$STACK_CLUSTER/insert.sql"
echo 'INSERT INTO sync_probe VALUES (1);' >"$script"
target="$STACK_CLUSTER/outbox-like.dat"

# pgbench [WRITER_SYNC]: pgbench's average latency, with the writer beside it when asked.
pgbench_beside() {
    local sync=${1:-} writer=""
    if [[ -n $sync ]]; then
        python3 - "$sync" "$target" "$SECONDS_EACH" <<'PY' &
import os, sys, time
sync, path, seconds = getattr(os, sys.argv[1]), sys.argv[2], float(sys.argv[3])
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(fd, b"\0" * 4096 * 64, 0)
os.fsync(fd)
samples, end, i = [], time.monotonic() + seconds, 0
while time.monotonic() < end:
    os.pwrite(fd, b"x" * 4096, (i % 64) * 4096)
    started = time.perf_counter()
    sync(fd)
    samples.append((time.perf_counter() - started) * 1000)
    i += 1
    time.sleep(0.005)
samples.sort()
at = lambda q: samples[min(len(samples) - 1, int(len(samples) * q))]
print(f"  {sys.argv[1]:9} n={len(samples):4}  p50 {at(0.5):.3f}  p90 {at(0.9):.3f}  p99 {at(0.99):.3f} ms")
PY
        writer=$!
    fi
    local latency
    latency=$("$bindir/pgbench" -n -c 2 -T "$SECONDS_EACH" -f "$script" "$DATABASE_URL" 2>/dev/null |
        sed -n 's/^latency average = //p')
    [[ -n $writer ]] && wait "$writer"
    echo "  pgbench beside ${sync:-nothing}: $latency per insert"
}

for round in $(seq 1 "$rounds"); do
    section "Round $round"
    pgbench_beside fsync
    pgbench_beside fdatasync
    pgbench_beside
done
