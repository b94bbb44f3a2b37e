# Helpers for shell test suites (source it). A suite calls check/check_eq and
# ends with `summary NAME`, printing "NAME: N passed, N failed".
# $PLAIT is the tool under test, $PLAIT_DATA the fetched data, $PLAIT_TEST_TMP scratch space.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PLAIT=${PLAIT:-$ROOT/build/plait}
PLAIT_DATA=${PLAIT_DATA:-$ROOT/data}
TMP=${PLAIT_TEST_TMP:-$(mktemp -d)}
_pass=0
_fail=0
# check NAME COMMAND...: passes if the command exits 0.
check() {
    local name=$1; shift
    if "$@" >"$TMP/check.out" 2>&1; then
        _pass=$((_pass + 1)); echo "ok $name"
    else
        _fail=$((_fail + 1)); echo "not ok $name"; tail -n 20 "$TMP/check.out" | sed 's/^/    /'
    fi
}
# check_fails NAME PATTERN COMMAND...: passes if the command fails and its output matches PATTERN.
check_fails() {
    local name=$1 pat=$2; shift 2
    if "$@" >"$TMP/check.out" 2>&1; then
        _fail=$((_fail + 1)); echo "not ok $name (succeeded, expected failure)"
    elif grep -qE -- "$pat" "$TMP/check.out"; then
        _pass=$((_pass + 1)); echo "ok $name"
    else
        _fail=$((_fail + 1)); echo "not ok $name (message did not match '$pat')"; sed 's/^/    /' "$TMP/check.out" | tail -n 10
    fi
}
summary() { echo "$1: $_pass passed, $_fail failed"; [ "$_fail" -eq 0 ]; }
