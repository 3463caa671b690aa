#!/usr/bin/env bash
# Mutation testing of the core modules (setup.cfg) with mutmut (pinned below), in a temporary copy of the repository:
# the working tree is never mutated. Usage: tools/mutation/run.sh [PYTHON] [WORKDIR] [MUTANT-GLOB...]
# One child process (the course machines are shared); about 20 minutes for all mutants on one core.
set -euo pipefail
MUTMUT_VERSION=3.8.1
here="$(cd "$(dirname "$0")/../.." && pwd)"
python="${1:-$here/.venv/bin/python}"
# absolute (without resolving the venv's symlink): the run happens in $work, and mutmut sits beside this python
case "$python" in /*) ;; *) python="$PWD/$python" ;; esac
work="${2:-$(mktemp -d -t course_pe_mutation.XXXXXX)}"
shift $(( $# > 2 ? 2 : $# ))
"$python" -m pip show mutmut 2>/dev/null | grep -qx "Version: $MUTMUT_VERSION" \
    || "$python" -m pip install --quiet --disable-pip-version-check "mutmut==$MUTMUT_VERSION"
mkdir -p "$work"
cp -r "$here/course_pe" "$here/tests" "$here/pyproject.toml" "$work/"
cp "$here/tools/mutation/setup.cfg" "$work/setup.cfg"
cd "$work"
echo "==> mutmut $MUTMUT_VERSION in $work"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 COURSE_PE_THREADS=1 PYTHONHASHSEED=0
mutmut="$(dirname "$python")/mutmut"
"$mutmut" run --max-children 1 "$@" > run.log 2>&1 || { tail -c 2000 run.log; exit 1; }
"$mutmut" results --all true > results.txt
echo "==> results (all mutants) in $work/results.txt; survivors:"
grep -c ': survived' results.txt || true
grep ': survived' results.txt || true
