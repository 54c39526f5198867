#!/usr/bin/env bash
# The test command: checks formatting, builds the workspace, runs clippy and rustdoc with
# warnings as errors, and runs every test against a real PostgreSQL, the published MCP
# reference server and clients (the Python SDK, the Inspector's CLI) and headless Chromium.
# What it needs from the machine it installs when it runs as root with apt-get, else it says
# what to install. Extra arguments go to `cargo test` (e.g. a test-name filter).
#
# Database, first that applies:
#   1. DATABASE_URL, when set;
#   2. a server on 127.0.0.1:5432 that lets `postgres` in without a password;
#   3. a throwaway cluster in a temporary directory, removed on exit.
# Tests use #[sqlx::test], which creates a database per test: the role needs CREATEDB.
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
# shellcheck source-path=SCRIPTDIR source=lib/postgres.sh
source "$repo_root/scripts/lib/postgres.sh"
# shellcheck source-path=SCRIPTDIR source=lib/prereqs.sh
source "$repo_root/scripts/lib/prereqs.sh"

# The MCP reference server used by the interop tests, pinned so that a new release cannot
# change test results unannounced. Bump deliberately: `npm view <package> version`.
readonly EVERYTHING_PACKAGE=@modelcontextprotocol/server-everything
readonly EVERYTHING_VERSION=2026.8.31
# MCP clients nobody here wrote, for the interop tests of `/mcp` (and of the fixture's HTTP
# mode), pinned likewise: the official Python SDK's client (`mcp` on PyPI; `pip index versions
# mcp`) and the MCP Inspector's CLI (`npm view <package> version`). Both speak both protocol
# eras: the 2025-11-25 initialize handshake and the stateless 2026-07-28 one.
readonly PYTHON_MCP_VERSION=2.3.0
readonly INSPECTOR_PACKAGE=@modelcontextprotocol/inspector
readonly INSPECTOR_VERSION=2.12.0
# The OAuth 2.1 authorization server of the OAuth tests (fixtures/oauth-server/server.mjs).
readonly OIDC_PROVIDER_VERSION=9.13.3
# Kept outside the repository so that `cargo` and git never see node_modules or the venv.
readonly NPM_PREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/switchyard/npm"
readonly PYTHON_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/switchyard/python-mcp"
readonly PG_PREFERRED_PORT=25320

section() {
    printf '\n==> %s\n' "$*"
}

# A database URL with any password masked, for printing.
redact_url() {
    sed -E 's#^([a-z]+://[^:/@]*):[^@]*@#\1:***@#' <<<"$1"
}

throwaway_cluster=""
# shellcheck disable=SC2317 # only called by the EXIT trap, which shellcheck 0.9 cannot see
cleanup() {
    local status=$?
    # Finish the cleanup whatever happens: a second Ctrl-C, a failing step, or a closed
    # stdout (`test.sh | tee log`, where Ctrl-C kills tee first) must not cut it short.
    set +e
    trap '' INT TERM PIPE
    if [[ -n $throwaway_cluster ]]; then
        pg_stop_cluster "$throwaway_cluster"
        rm -rf "$throwaway_cluster"
    fi
    exit "$status"
}
trap cleanup EXIT
# Turn signals into an ordinary exit so that the EXIT trap always runs.
trap 'exit 130' INT
trap 'exit 143' TERM

section "Prerequisites"
# psql and pg_isready find a running server; initdb makes a throwaway cluster when none runs;
# Node.js and npm run the MCP reference server and the Inspector of the interop tests, python3
# the Python SDK's client; headless Chromium and its WebDriver drive the web UI's end-to-end
# tests.
packages=(nodejs:node npm:npm python3:python3 chromium:chromium chromium-driver:chromedriver)
[[ -n ${DATABASE_URL:-} ]] || packages+=(postgresql-client:psql postgresql:initdb)
need_packages "${packages[@]}"
# The Python SDK goes into a virtual environment; Debian's python3 makes one only with its
# python3-venv package (a python3 from elsewhere usually brings venv and ensurepip along).
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    need_packages python3-venv:
fi
echo "All present."

section "Database"
if [[ -n ${DATABASE_URL:-} ]]; then
    echo "Using DATABASE_URL from the environment"
elif pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null &&
    PGCONNECT_TIMEOUT=5 psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atqc 'select 1' \
        >/dev/null 2>&1; then
    echo "Using the PostgreSQL server on 127.0.0.1:5432"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
else
    echo "No database given and none on 127.0.0.1:5432: starting a throwaway cluster"
    throwaway_cluster=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-test-pg.XXXXXX")
    DATABASE_URL=$(pg_start_cluster "$throwaway_cluster" "$PG_PREFERRED_PORT")
fi
export DATABASE_URL
echo "DATABASE_URL=$(redact_url "$DATABASE_URL")"

# Installs npm PACKAGE at VERSION into $NPM_PREFIX unless that version is there, and prints the
# path of its FILE (relative to the package), failing if the file is missing after the install.
# Node.js 20 runs them all, though some ask for 22: npm only warns about the engine, and the
# tests that use each package are the check.
npm_pinned() {
    local package=$1 version=$2 file=$3
    local dir="$NPM_PREFIX/node_modules/$package" installed
    installed=$(node -p 'require(process.argv[1]).version' "$dir/package.json" 2>/dev/null || true)
    if [[ $installed == "$version" ]]; then
        echo "$package@$version already installed in $NPM_PREFIX" >&2
    else
        echo "Installing $package@$version into $NPM_PREFIX" >&2
        mkdir -p "$NPM_PREFIX"
        npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error \
            "$package@$version" >&2
    fi
    if [[ ! -f $dir/$file ]]; then
        echo "error: $dir/$file is missing after the install" >&2
        return 1
    fi
    echo "$dir/$file"
}

section "MCP reference server ($EVERYTHING_PACKAGE@$EVERYTHING_VERSION)"
SWITCHYARD_TEST_EVERYTHING=$(npm_pinned "$EVERYTHING_PACKAGE" "$EVERYTHING_VERSION" dist/index.js)
export SWITCHYARD_TEST_EVERYTHING
echo "SWITCHYARD_TEST_EVERYTHING=$SWITCHYARD_TEST_EVERYTHING"

section "MCP clients (Python mcp $PYTHON_MCP_VERSION, $INSPECTOR_PACKAGE@$INSPECTOR_VERSION)"
SWITCHYARD_TEST_PYTHON_MCP="$PYTHON_VENV/bin/python"
installed_version=$("$SWITCHYARD_TEST_PYTHON_MCP" -c \
    'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)
if [[ $installed_version == "$PYTHON_MCP_VERSION" ]]; then
    echo "Python mcp already installed in $PYTHON_VENV"
else
    echo "Installing Python mcp into $PYTHON_VENV"
    python3 -m venv --clear "$PYTHON_VENV"
    "$SWITCHYARD_TEST_PYTHON_MCP" -m pip install --quiet --disable-pip-version-check \
        "mcp==$PYTHON_MCP_VERSION"
fi
if [[ ! -f $SWITCHYARD_TEST_PYTHON_MCP ]]; then
    echo "error: $SWITCHYARD_TEST_PYTHON_MCP is missing after the install" >&2
    exit 1
fi
# The Inspector CLI's own entry point (the package's `inspector --cli` launcher runs the same
# code).
SWITCHYARD_TEST_INSPECTOR=$(npm_pinned "$INSPECTOR_PACKAGE" "$INSPECTOR_VERSION" \
    clients/cli/build/index.js)
export SWITCHYARD_TEST_PYTHON_MCP SWITCHYARD_TEST_INSPECTOR
echo "SWITCHYARD_TEST_PYTHON_MCP=$SWITCHYARD_TEST_PYTHON_MCP"
echo "SWITCHYARD_TEST_INSPECTOR=$SWITCHYARD_TEST_INSPECTOR"

section "OAuth authorization server (oidc-provider@$OIDC_PROVIDER_VERSION)"
SWITCHYARD_TEST_OIDC_PROVIDER=$(npm_pinned oidc-provider "$OIDC_PROVIDER_VERSION" lib/index.js)
export SWITCHYARD_TEST_OIDC_PROVIDER
echo "SWITCHYARD_TEST_OIDC_PROVIDER=$SWITCHYARD_TEST_OIDC_PROVIDER"

section "Format (cargo fmt --check)"
cargo fmt --all --check

section "Build"
# Every binary first: `cargo test` builds only each package's own binaries, and the end-to-end
# tests (crates/e2e) start those of the other packages.
cargo build --workspace --locked

section "Lints (clippy, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

section "Docs (cargo doc, -D warnings)"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked

section "Test"
status=0
cargo test --workspace --locked "$@" || status=$?

section "Result"
if ((status == 0)); then
    echo "All tests passed."
else
    echo "Tests failed (cargo test exited with $status)."
fi
exit "$status"
