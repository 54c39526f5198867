# shellcheck shell=bash
# Private, throwaway PostgreSQL clusters for the test command and the dev stack.
#
# Every function checks its own steps and returns non-zero on failure, because callers run
# them inside $(...) or `if`, where `set -e` does not apply. Source this file, then:
#   DATABASE_URL=$(pg_start_cluster DIR PORT)   # initdb if needed, start, print the URL
#   pg_stop_cluster DIR                         # stop it again (no-op if not running)
#
# PG_CLUSTER_OPTIONS, when set, is added to the server's command line (e.g.
# "-c fsync=on -c synchronous_commit=on" for the benchmark's durable cluster).
#
# A cluster listens on 127.0.0.1 only, trusts every local connection for the superuser `app`,
# and keeps its Unix socket in a private directory under /tmp. Progress goes to stderr; the
# only thing printed on stdout is the DATABASE_URL, so command substitution works.
#
# initdb and pg_ctl refuse to run as root. When this runs as root, they run as the `postgres`
# user (runuser), and the cluster directory is handed to that user.

# The superuser that initdb creates: also the user in the printed DATABASE_URL.
readonly PG_CLUSTER_USER=app

# Prints the directory holding initdb and pg_ctl: PATH first, then Debian's versioned
# directories (newest major version first), then the source-install default. Exits with the
# package to install when there is none.
pg_find_bindir() {
    local candidates=() dir
    # Resolve symlinks (a /usr/local/bin/initdb pointing into /usr/lib/postgresql/N/bin) so
    # that pg_isready, when used, comes from the same installation.
    if command -v initdb >/dev/null 2>&1; then
        candidates+=("$(dirname "$(realpath "$(command -v initdb)")")")
    fi
    # `sort -V -r` puts /usr/lib/postgresql/17/bin before .../15/bin.
    while IFS= read -r dir; do
        candidates+=("$dir")
    done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
    candidates+=(/usr/local/pgsql/bin)

    for dir in "${candidates[@]}"; do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
            printf '%s\n' "$dir"
            return 0
        fi
    done
    {
        echo "error: PostgreSQL server binaries (initdb, pg_ctl) not found."
        echo "Install them with: apt-get install postgresql"
        echo "(or point DATABASE_URL at an existing server whose role may CREATE DATABASE)"
    } >&2
    exit 1
}

# Runs a command as the cluster's owner: `postgres` when we are root, ourselves otherwise.
pg_as_owner() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Succeeds when something accepts TCP connections on 127.0.0.1:PORT. Uses bash's /dev/tcp so
# that no extra tool is needed.
pg_port_taken() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints the first port from PORT upwards (100 tries) that nobody listens on.
pg_free_port() {
    local port=$1
    local last=$((port + 100))
    while ((port < last)); do
        if ! pg_port_taken "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
        port=$((port + 1))
    done
    echo "error: no free TCP port in $1..$((last - 1)) on 127.0.0.1" >&2
    return 1
}

# pg_start_cluster DIR PORT: creates the cluster in DIR unless it already holds one, starts it
# on PORT (or the next free port when PORT is taken), waits until it accepts connections on its
# own socket, and prints its DATABASE_URL on stdout. Callers prefer ports below 32768: Linux
# hands out 32768-60999 as the ephemeral source ports of outgoing connections, so a port there
# can be taken between the free-port check and the start.
pg_start_cluster() {
    local dir=$1 preferred_port=$2
    local bindir port sockdir
    bindir=$(pg_find_bindir) || return 1

    if [[ $EUID -eq 0 ]] && ! id -u postgres >/dev/null 2>&1; then
        echo "error: as root, PostgreSQL must run as the 'postgres' user, which does not exist" \
            "(apt-get install postgresql creates it)" >&2
        return 1
    fi

    mkdir -p "$dir" || return 1
    dir=$(cd "$dir" && pwd) || return 1
    if [[ $EUID -eq 0 ]]; then
        chown postgres: "$dir" || return 1
        # Fail early and clearly if a parent directory (e.g. a 0700 one owned by root) keeps
        # the postgres user out: initdb's own message would not say which one.
        if ! runuser -u postgres -- test -w "$dir"; then
            echo "error: the postgres user cannot reach $dir; make its parent directories" \
                "traversable (chmod o+x)" >&2
            return 1
        fi
    fi
    chmod 0700 "$dir" || return 1

    # A server still running on this directory (say, from a run that was killed with
    # SIGKILL) is not ours to take over or to stop: say how to stop it.
    if [[ -f "$dir/postmaster.pid" ]] && pg_as_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        echo "error: a PostgreSQL server is already running on $dir; stop it with:" >&2
        if [[ $EUID -eq 0 ]]; then
            echo "  runuser -u postgres -- $bindir/pg_ctl -D $dir stop" >&2
        else
            echo "  $bindir/pg_ctl -D $dir stop" >&2
        fi
        return 1
    fi

    if [[ ! -f "$dir/PG_VERSION" ]]; then
        echo "Creating a PostgreSQL cluster in $dir" >&2
        local initdb_output
        if ! initdb_output=$(pg_as_owner "$bindir/initdb" -D "$dir" -U "$PG_CLUSTER_USER" \
            --auth=trust -E UTF8 --no-locale --no-sync 2>&1); then
            printf '%s\n' "$initdb_output" >&2
            echo "error: initdb failed in $dir" >&2
            return 1
        fi
    fi

    port=$(pg_free_port "$preferred_port") || return 1
    if [[ $port != "$preferred_port" ]]; then
        echo "Port $preferred_port is taken; using $port" >&2
    fi

    # The socket goes to a short private directory: Unix socket paths are limited to ~100
    # bytes, which a deep checkout could exceed.
    sockdir=$(mktemp -d /tmp/switchyard-pg.XXXXXX) || return 1
    if [[ $EUID -eq 0 ]]; then
        chown postgres: "$sockdir" || return 1
    fi

    # -l is required, not cosmetic: without it the server inherits our stdout, and a caller's
    # $(pg_start_cluster ...) would wait for the server to exit.
    echo "Starting PostgreSQL on 127.0.0.1:$port (log: $dir/server.log)" >&2
    if ! pg_as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $sockdir -c listen_addresses=127.0.0.1 ${PG_CLUSTER_OPTIONS:-}" start >/dev/null; then
        tail -n 20 "$dir/server.log" >&2 || true
        rm -rf "$sockdir"
        echo "error: PostgreSQL did not start in $dir" >&2
        return 1
    fi

    # Ask *our* socket: on TCP another server could answer for this port.
    local isready=pg_isready deadline=$((SECONDS + 30))
    [[ -x "$bindir/pg_isready" ]] && isready="$bindir/pg_isready"
    until "$isready" -q -h "$sockdir" -p "$port" -U "$PG_CLUSTER_USER"; do
        if ((SECONDS >= deadline)); then
            echo "error: PostgreSQL in $dir started but does not accept connections" >&2
            pg_stop_cluster "$dir"
            return 1
        fi
        sleep 0.2
    done

    printf 'postgres://%s@127.0.0.1:%s/postgres\n' "$PG_CLUSTER_USER" "$port"
}

# pg_stop_cluster DIR: stops the cluster in DIR if it runs, and removes its socket directory.
pg_stop_cluster() {
    local dir=$1
    local bindir sockdir
    [[ -f "$dir/postmaster.pid" ]] || return 0
    bindir=$(pg_find_bindir) || return 1
    # Line 5 of postmaster.pid is the socket directory the server was started with.
    sockdir=$(sed -n 5p "$dir/postmaster.pid")
    echo "Stopping PostgreSQL in $dir" >&2
    pg_as_owner "$bindir/pg_ctl" -D "$dir" -m fast -w stop >/dev/null || return 1
    # Only ever remove a socket directory that pg_start_cluster made.
    if [[ $sockdir == /tmp/switchyard-pg.* ]]; then
        rm -rf "$sockdir"
    fi
}
