# shellcheck shell=bash
# What the test command needs from the machine, and installing it where it may: as root on a
# Debian-like system (CI, a fresh development machine) a missing package is installed with
# apt-get; anywhere else the script stops and says which command installs it.
#
#   need_packages PACKAGE:COMMAND ...   # COMMAND on PATH, or the package installed, or install

prereqs_apt_updated=false

# Whether PACKAGE is installed (dpkg) or COMMAND is on PATH. The command check lets a tool that
# came another way (a vendor's Node.js, say) count as present; the package check covers
# packages whose programs are not on PATH (Debian keeps initdb under /usr/lib/postgresql/N/bin).
prereqs_present() {
    local package=$1 command=$2
    command -v "$command" >/dev/null 2>&1 ||
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed'
}

need_packages() {
    local missing=() entry package command
    for entry in "$@"; do
        package=${entry%%:*}
        command=${entry#*:}
        prereqs_present "$package" "$command" || missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return 0
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "error: missing ${missing[*]}; install them (as root: apt-get install ${missing[*]})" >&2
        return 1
    fi
    echo "Installing ${missing[*]}"
    if ! $prereqs_apt_updated; then
        apt-get update -qq
        prereqs_apt_updated=true
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
