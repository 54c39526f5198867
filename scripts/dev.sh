#!/usr/bin/env bash
# The local stack: builds the workspace, starts PostgreSQL (unless DATABASE_URL is set) and
# switchyard-server, and on the first run creates an owner and a demo workspace that can call
# the fixture MCP server's `echo` tool. Everything it keeps lives in .data/ (gitignored):
#   .data/postgres       the private PostgreSQL cluster
#   .data/owner-token    the owner's API token (0600)
#   .data/bootstrapped   present once the demo objects exist
#   .data/server.log     this run's server output
#   .data/installation.key  the installation key sealing central credential values (0600,
#                        made by the server on its first start)
#   .data/device/        the paired local runner's identity (config dir; credential file 0600)
#   .data/runner/        the local runner's outbox (0700)
#   .data/runner.log     this run's local runner output
# Ctrl-C stops the runner, the server and the cluster this script started, nothing else.
# Delete .data/ (after stopping) to start from scratch.
set -euo pipefail
shopt -s inherit_errexit

invocation_dir=$PWD
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/postgres.sh
source "$repo_root/scripts/lib/postgres.sh"

readonly DATA_DIR="$repo_root/.data"
readonly CLUSTER_DIR="$DATA_DIR/postgres"
readonly TOKEN_FILE="$DATA_DIR/owner-token"
readonly BOOTSTRAPPED_FILE="$DATA_DIR/bootstrapped"
readonly SERVER_LOG="$DATA_DIR/server.log"
readonly INSTALLATION_KEY_FILE="$DATA_DIR/installation.key"
readonly DEVICE_CONFIG_DIR="$DATA_DIR/device"
readonly DEVICE_PROFILE=local
readonly DEVICE_BOOTSTRAPPED_FILE="$DATA_DIR/device-bootstrapped"
readonly RUNNER_DIR="$DATA_DIR/runner"
readonly RUNNER_LOG="$DATA_DIR/runner.log"
readonly PG_PREFERRED_PORT=25329
readonly READY_TIMEOUT_SECONDS=60

# Cargo puts binaries under CARGO_TARGET_DIR when that is set.
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
readonly SERVER_BIN="$target_dir/debug/switchyard-server"
readonly CLI_BIN="$target_dir/debug/switchyard"
readonly FIXTURE_BIN="$target_dir/debug/switchyard-fixture"

section() {
    printf '\n==> %s\n' "$*"
}

# Only what this run started is stopped on exit.
server_pid=""
runner_pid=""
cluster_started=false
cleanup() {
    local status=$?
    # Finish the cleanup whatever happens: a second Ctrl-C, a failing step, or a closed
    # stdout (`dev.sh | tee log`, where Ctrl-C kills tee first) must not cut it short.
    set +e
    trap '' INT TERM PIPE
    if [[ -n $runner_pid ]]; then
        # SIGTERM: the runner stops leasing, lets active calls finish and releases its lease.
        echo "Stopping the local runner (pid $runner_pid)" >&2
        kill -s TERM "$runner_pid" 2>/dev/null
        wait_for_exit "$runner_pid" 15 || kill -s KILL "$runner_pid" 2>/dev/null
        wait "$runner_pid" 2>/dev/null
    fi
    if [[ -n $server_pid ]]; then
        stop_server
    fi
    if $cluster_started; then
        pg_stop_cluster "$CLUSTER_DIR"
    fi
    exit "$status"
}
trap cleanup EXIT
# Turn signals into an ordinary exit so that the EXIT trap always runs.
trap 'exit 130' INT
trap 'exit 143' TERM

# Asks the server to shut down gracefully (SIGINT, as Ctrl-C would), then insists (SIGTERM,
# SIGKILL). A script's background job starts with SIGINT ignored, so the terminal's Ctrl-C may
# never reach the server: hence the explicit signal, and the escalation if it does not exit.
stop_server() {
    local signal
    echo "Stopping switchyard-server (pid $server_pid)" >&2
    for signal in INT TERM KILL; do
        kill -s "$signal" "$server_pid" 2>/dev/null || break
        if wait_for_exit "$server_pid" 10; then
            break
        fi
    done
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# wait_for_exit PID SECONDS: succeeds once PID is gone, fails when SECONDS pass first.
wait_for_exit() {
    local deadline=$((SECONDS + $2))
    while kill -0 "$1" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# cli_step DESCRIPTION ARGS...: runs the CLI as the owner and treats `already_exists` as done,
# so that an interrupted bootstrap can simply be run again.
cli_step() {
    local description=$1 output
    shift
    printf '  %s ... ' "$description"
    if output=$("$CLI_BIN" "$@" 2>&1); then
        echo "done"
    elif grep -q 'error\[already_exists\]' <<<"$output"; then
        echo "already there"
    else
        echo "failed"
        printf '%s\n' "$output" >&2
        return 1
    fi
}

section "Build"
cargo build --workspace

section "Database"
# .data holds the owner token: private to us. As root the cluster runs as `postgres`, which
# must be able to pass through .data to reach .data/postgres: only the traverse bit is given,
# so others still cannot list .data or read the (0600) token.
mkdir -p "$DATA_DIR"
if [[ $EUID -eq 0 && -z ${DATABASE_URL:-} ]]; then
    chmod 0711 "$DATA_DIR"
else
    chmod 0700 "$DATA_DIR"
fi
if [[ -n ${DATABASE_URL:-} ]]; then
    echo "Using DATABASE_URL from the environment"
else
    DATABASE_URL=$(pg_start_cluster "$CLUSTER_DIR" "$PG_PREFERRED_PORT")
    cluster_started=true
    echo "PostgreSQL: $DATABASE_URL (data in $CLUSTER_DIR)"
fi
export DATABASE_URL

section "Migrations"
"$SERVER_BIN" migrate

if [[ ! -s $TOKEN_FILE ]]; then
    section "Owner"
    owner_token=$("$SERVER_BIN" admin create-owner --name owner)
    # Write under a private umask and rename, so the token is never readable by others, not
    # even for a moment, and a half-written file is never taken for a token.
    (umask 077 && printf '%s\n' "$owner_token" >"$TOKEN_FILE.tmp")
    mv "$TOKEN_FILE.tmp" "$TOKEN_FILE"
    echo "Created the installation owner 'owner'; token saved in ${TOKEN_FILE#"$repo_root"/}"
fi
owner_token=$(<"$TOKEN_FILE")

section "Server"
# HTTP connectors may point at fixtures on this machine (the loopback interface), which an
# installation refuses unless allowed (docs/GOVERNANCE.md#endpoints).
SWITCHYARD_LISTEN=${SWITCHYARD_LISTEN:-127.0.0.1:8787} \
    SWITCHYARD_ALLOW_ENDPOINTS=${SWITCHYARD_ALLOW_ENDPOINTS:-127.0.0.0/8,::1} \
    SWITCHYARD_INSTALLATION_KEY_FILE=${SWITCHYARD_INSTALLATION_KEY_FILE:-$INSTALLATION_KEY_FILE} \
    "$SERVER_BIN" serve >"$SERVER_LOG" 2>&1 &
server_pid=$!
echo "Started switchyard-server (pid $server_pid, log: ${SERVER_LOG#"$repo_root"/})"
# First wait for *our* server to say where it listens (another server could answer /readyz
# on the same address while ours failed to bind), then for it to be ready.
url=""
deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
until [[ -n $url ]] && curl -fsS -o /dev/null --max-time 2 "$url/readyz" 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "error: switchyard-server exited; last lines of its log:" >&2
        tail -n 20 "$SERVER_LOG" >&2
        exit 1
    fi
    if ((SECONDS >= deadline)); then
        echo "error: switchyard-server was not ready within ${READY_TIMEOUT_SECONDS}s;" \
            "last lines of its log:" >&2
        tail -n 20 "$SERVER_LOG" >&2
        exit 1
    fi
    if [[ -z $url ]]; then
        url=$(sed -n 's|^listening on \(http://[^[:space:]]*\).*|\1|p' "$SERVER_LOG" | head -n 1)
    fi
    sleep 0.2
done
echo "Ready."

export SWITCHYARD_URL=$url SWITCHYARD_TOKEN=$owner_token
if [[ ! -f $BOOTSTRAPPED_FILE ]]; then
    section "Demo bootstrap"
    cli_step "workspace demo" workspace create demo
    cli_step "connector fixture" connector add fixture --stdio -- "$FIXTURE_BIN" stdio
    cli_step "approve connector fixture" connector approve fixture
    cli_step "connection fixture in demo" connection create demo fixture --connector fixture
    cli_step "discover the fixture's tools" connection discover demo fixture
    # Only classified tools can be called: the fixture's two counting tools change state,
    # the rest only read (low risk, so the default approval policy runs them all).
    for tool in count count_then_crash; do
        cli_step "classify $tool (side effect, low)" tool classify demo fixture "$tool" \
            --side-effect --risk low
    done
    for tool in echo noop slow fail crash lookup big noisy env read_file cwd; do
        cli_step "classify $tool (read-only, low)" tool classify demo fixture "$tool" \
            --read-only --risk low
    done
    cli_step "profile demo" profile create demo demo --connection fixture
    cli_step "grant owner Use on profile demo" profile grant demo demo --user owner --use
    touch "$BOOTSTRAPPED_FILE"
fi

# The paired local runner: this machine pairs itself as a device of the demo workspace (the
# same `switchyard pair` / `device approve` a user would run), gets a connection placed on it,
# and runs `switchyard mcp-runner`. The credential is kept in a 0600 file under .data/device.
export SWITCHYARD_CONFIG_DIR=$DEVICE_CONFIG_DIR SWITCHYARD_DEVICE_KEYRING=off
if [[ ! -f $DEVICE_CONFIG_DIR/devices/$DEVICE_PROFILE.json ]]; then
    section "Pairing the local runner"
    pair_out=$(mktemp "$DATA_DIR/pair.XXXXXX")
    "$CLI_BIN" pair --server "$url" --profile "$DEVICE_PROFILE" --name "$(hostname)-dev" --json \
        >"$pair_out" 2>&1 &
    pair_pid=$!
    code=""
    deadline=$((SECONDS + 30))
    until [[ -n $code ]]; do
        code=$(sed -n 's/.*"code":"\([^"]*\)".*/\1/p' "$pair_out" | head -n 1)
        if [[ -z $code ]] && { ! kill -0 "$pair_pid" 2>/dev/null || ((SECONDS >= deadline)); }; then
            echo "error: pairing did not start:" >&2
            cat "$pair_out" >&2
            exit 1
        fi
        sleep 0.1
    done
    cli_step "approve pairing code $code" device approve demo "$code" --profile demo
    wait "$pair_pid"
    rm -f "$pair_out" "$DEVICE_BOOTSTRAPPED_FILE"
fi
device_id=$(sed -n 's/.*"device_id"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
    "$DEVICE_CONFIG_DIR/devices/$DEVICE_PROFILE.json" | head -n 1)
if [[ ! -f $DEVICE_BOOTSTRAPPED_FILE ]]; then
    section "Local placement"
    cli_step "connection fixture-local on device $device_id" \
        connection create demo fixture-local --connector fixture --runner "device:$device_id"
    cli_step "profile local" profile create demo local --connection fixture-local
    cli_step "grant owner Use on profile local" profile grant demo local --user owner --use
    touch "$DEVICE_BOOTSTRAPPED_FILE"
fi

section "Local runner"
"$CLI_BIN" mcp-runner "$RUNNER_DIR" --profile "$DEVICE_PROFILE" >"$RUNNER_LOG" 2>&1 &
runner_pid=$!
deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
until grep -q 'lease epoch' "$RUNNER_LOG" 2>/dev/null; do
    if ! kill -0 "$runner_pid" 2>/dev/null || ((SECONDS >= deadline)); then
        echo "error: the local runner did not start; last lines of its log:" >&2
        tail -n 20 "$RUNNER_LOG" >&2
        exit 1
    fi
    sleep 0.2
done
echo "Started the local runner for device $device_id (pid $runner_pid, log: ${RUNNER_LOG#"$repo_root"/})"
# The owner (who approved this device) accepts the placement; the runner then lists its tools.
cli_step "accept fixture-local on this device" device accept demo "$device_id" fixture-local
cli_step "discover fixture-local's tools on this device" connection discover demo fixture-local
for tool in count count_then_crash; do
    cli_step "classify fixture-local $tool (side effect, low)" tool classify demo fixture-local \
        "$tool" --side-effect --risk low
done
for tool in echo noop slow fail crash lookup big noisy env read_file cwd; do
    cli_step "classify fixture-local $tool (read-only, low)" tool classify demo fixture-local \
        "$tool" --read-only --risk low
done

# A request_id is the call's idempotency key: a fresh one per printed example.
request_id=$(cat /proc/sys/kernel/random/uuid)
# Show the CLI as the user can type it from where they started this script.
cli_shown=$CLI_BIN
if [[ $invocation_dir == "$repo_root" ]]; then
    cli_shown=${CLI_BIN#"$repo_root"/}
fi
local_request_id=$(cat /proc/sys/kernel/random/uuid)
cat <<MESSAGE

Switchyard is running at $url — open it in a browser (the call inspector) and sign in
with the owner token:

  $owner_token

Call the fixture's echo tool on the central runner:

SWITCHYARD_URL=$url SWITCHYARD_TOKEN=$owner_token $cli_shown mcp call demo - --wait <<'EOF'
{
  "request_id": "$request_id",
  "profile_id": "demo",
  "connection_id": "fixture",
  "tool_name": "echo",
  "arguments": {"text": "hello from switchyard"}
}
EOF

The same tool on this machine's paired runner (local placement):

SWITCHYARD_URL=$url SWITCHYARD_TOKEN=$owner_token $cli_shown mcp call demo - --wait <<'EOF'
{
  "request_id": "$local_request_id",
  "profile_id": "local",
  "connection_id": "fixture-local",
  "tool_name": "echo",
  "arguments": {"text": "hello from this device"}
}
EOF

The request_id is an idempotency key: sending it again returns the same call. Change it
for a new call (cat /proc/sys/kernel/random/uuid prints a fresh one).

Press Ctrl-C to stop the runner, the server and the database this script started.
MESSAGE

# Stay in the foreground until the server exits or we are interrupted.
wait "$server_pid"
