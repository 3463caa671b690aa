#!/usr/bin/env bash
# pip install with its progress visible and unbuffered (make install): tools/pip_install.sh PYTHON PIP-ARGS...
#
# On a terminal, pip's own output and download progress bars are shown as they are. Elsewhere (CI, `| tee`), only
# the lines that say what is happening are kept: pip indents its "Downloading" lines, so the filter allows leading
# blanks, and every stage of the pipe is line-buffered (grep --line-buffered, sed -u) so that a line appears when
# pip prints it. Warnings about pip index folders configured on some machines but absent, and pip's retry notices
# for an unreachable index, are dropped everywhere.
set -euo pipefail
python=$1
shift
noise='/is ignored: it is neither a file nor a directory/d; /Retrying (Retry(total=/d'

# pip prints nothing while it unpacks and installs ("Installing collected packages: ..." and then minutes of
# silence the first time): every 30 s, say how many packages the environment holds so far.
site_packages=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
heartbeat() {  # one-second sleeps, away from the pipe: killed, it leaves nothing behind that holds make's output
    local start=$SECONDS count
    while true; do
        for _ in $(seq 30); do sleep 1 < /dev/null > /dev/null 2>&1; done
        count=$(find "$site_packages" -maxdepth 1 -name '*.dist-info' 2> /dev/null | wc -l)
        echo "  ... pip is still working ($((SECONDS - start)) s): $count packages installed so far"
    done
}
heartbeat &
beat=$!
trap 'kill $beat 2> /dev/null || true' EXIT
if [ -t 1 ]; then
    "$python" -m pip install --disable-pip-version-check --progress-bar on "$@" 2> >(sed -u "$noise" >&2)
else
    "$python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
        | sed -u "$noise" \
        | { grep --line-buffered -E '^\s*(Collecting|Downloading|Processing|Installing|Successfully|ERROR|error)' || true; } \
        | sed -u -E 's/^\s+/  /; s/^(.{160}).+/\1.../'
fi
