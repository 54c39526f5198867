#!/usr/bin/env bash
# An A/B of the added latency: interleaved `switchyard-bench --latency-only` rounds of two (or
# more) builds on one private durable PostgreSQL cluster, every other round in the reverse
# order, then the server's own steps per placement (medians from each round's database), how
# many updates of `calls` were HOT, and the start acks' and completions' mean execution
# (pg_stat_statements).
#
#   scripts/latency-ab.sh ROUNDS LABEL=BIN_DIR [LABEL=BIN_DIR ...]
#   scripts/latency-ab.sh 6 before=/tmp/before after=target/release
#
# Each BIN_DIR holds the release binaries switchyard-bench, switchyard-server,
# switchyard-mcp-runner and switchyard-fixture, all built the same way (`scripts/bench.sh`
# builds them; copy them aside before changing the code: a build of one package alone
# unifies dependency features differently and confounds the comparison). Results go to
# target/latency-ab/LABEL-ROUND.json. The steps are read from the calls' own timestamps, each
# the start of its transaction: insert → lease (0 for a call handed to its lease), lease →
# start ack, start ack → completion, and completion → the next call's insert (the completion's
# commit, the caller's answer and its next submission).
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/stack.sh
source "$repo_root/scripts/lib/stack.sh"

readonly PG_PREFERRED_PORT=25500
readonly OUT=target/latency-ab

if (($# < 2)) || [[ ! $1 =~ ^[0-9]+$ ]]; then
    sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
fi
rounds=$1
shift
labels=()
declare -A bin_dirs
for variant in "$@"; do
    label=${variant%%=*}
    dir=${variant#*=}
    if [[ $label == "$variant" || ! $label =~ ^[a-z0-9_]+$ || ! -x $dir/switchyard-bench ]]; then
        echo "error: $variant is not LABEL=BIN_DIR (label: a-z, 0-9, _) with switchyard-bench in it" >&2
        exit 2
    fi
    labels+=("$label")
    bin_dirs[$label]=$(cd "$dir" && pwd)
done

stack_trap_exit
section "PostgreSQL (private, durable)"
options=$STACK_DURABLE
# pg_stat_statements, when installed, gives each state change's execution time.
statements=false
if stack_has_statements; then
    options+=" $STACK_STATEMENTS"
    statements=true
fi
stack_start_cluster latency-ab "$PG_PREFERRED_PORT" "$options"
mkdir -p "$OUT"

section "Rounds"
for ((round = 1; round <= rounds; round++)); do
    order=("${labels[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((i = ${#labels[@]} - 1; i >= 0; i--)); do order+=("${labels[$i]}"); done
    fi
    for label in "${order[@]}"; do
        dir=${bin_dirs[$label]}
        result="$OUT/$label-$round.json"
        "$dir/switchyard-bench" --database-url "$DATABASE_URL" --bin-dir "$dir" --out "$result" \
            --work-dir "$OUT/work-$label" --create-database "ab_${label}_$round" --latency-only \
            >"$result" 2>"$OUT/$label-$round.log"
        python3 - "$result" "$label" "$round" <<'EOF'
import json, sys
path, label, round_ = sys.argv[1:]
data = json.load(open(path))
added = data["added_latency_ms"]
print(f"round {round_} {label}: added p50/p99 central {added['central']['p50']:.2f}/"
      f"{added['central']['p99']:.2f} ms, device {added['device']['p50']:.2f}/"
      f"{added['device']['p99']:.2f} ms; direct p50 {data['baseline_direct_ms']['p50']:.3f} ms, "
      f"durable floor p50 {data['floor_ms']['p50']:.2f} ms (a commit "
      f"{data['floor_parts_ms']['postgres_commit']['p50']:.3f}, an outbox sync "
      f"{data['floor_parts_ms']['outbox_sync']['p50']:.3f})")
EOF
    done
done

section "The server's steps (medians, ms): insert→lease, lease→start, start→finish, finish→next insert"
for ((round = 1; round <= rounds; round++)); do
    for label in "${labels[@]}"; do
        psql "${DATABASE_URL%/*}/ab_${label}_$round" -AtF ' ' -c "
            WITH c AS (
                SELECT runner_ref LIKE 'device:%' AS device, created_at, leased_at, started_at,
                    finished_at,
                    lead(created_at) OVER (PARTITION BY runner_ref LIKE 'device:%'
                                           ORDER BY created_at) AS next_created
                FROM calls WHERE state = 'succeeded' AND tool_name = 'noop')
            SELECT 'round $round $label', CASE WHEN device THEN 'device ' ELSE 'central' END,
                round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM leased_at - created_at)) * 1000)::numeric, 3),
                round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - leased_at)) * 1000)::numeric, 3),
                round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) * 1000)::numeric, 3),
                round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM next_created - finished_at)) * 1000)::numeric, 3)
            FROM c GROUP BY device ORDER BY device"
    done
done

section "The state changes of calls: updates that were HOT (no new index entries), and the starts' and completions' execution (mean ms)"
for ((round = 1; round <= rounds; round++)); do
    for label in "${labels[@]}"; do
        round_url="${DATABASE_URL%/*}/ab_${label}_$round"
        psql "$round_url" -AtF ' ' -c "
            SELECT 'round $round $label: HOT', n_tup_hot_upd, 'of', n_tup_upd
            FROM pg_stat_user_tables WHERE relname = 'calls'"
        if $statements; then
            psql "$round_url" -qAt -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
            psql "$round_url" -AtF ' ' -c "
                SELECT 'round $round $label:',
                    CASE WHEN query LIKE '%started_at = COALESCE%' THEN 'start' ELSE 'completion' END,
                    calls, round(mean_exec_time::numeric, 3),
                    left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
                FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND (query LIKE '%started_at = COALESCE%' OR query LIKE '%finished_at = now()%')
                  AND calls > 100
                ORDER BY query"
        fi
    done
done
