# Helpers for shell test suites (source it). A suite calls check/check_eq and
# ends with `summary NAME`, printing "NAME: N passed, N failed".
# $PLAIT is the tool under test, $PLAIT_DATA the fetched data, $PLAIT_TEST_TMP scratch space.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PLAIT=${PLAIT:-$ROOT/build/plait}
PLAIT_DATA=${PLAIT_DATA:-$ROOT/data}
_pass=0
_fail=0
# Scratch: tests/run.sh's (it removes it), or our own, removed at exit unless a
# check failed (then kept for a look, and named). Suites add their own exit
# work with on_exit, not trap.
_exit_cmds=()
on_exit() { _exit_cmds+=("$1"); }
_on_exit() {
    local c; for c in "${_exit_cmds[@]}"; do eval "$c"; done
    if [ -z "${PLAIT_TEST_TMP:-}" ]; then
        if [ "$_fail" -eq 0 ]; then rm -rf "$TMP"; else echo "scratch kept in $TMP"; fi
    fi
}
trap _on_exit EXIT
TMP=${PLAIT_TEST_TMP:-$(mktemp -d)}
# MFU's cached GEMM peak (src/train/peak.c) stays in the scratch, not the home directory
export PLAIT_PEAK_CACHE=${PLAIT_PEAK_CACHE:-$TMP/gemm_peak.json}
# ... and each start takes this peak (FLOP/s) instead of timing 1024^3 GEMMs for >= 0.3 s
# per rank (over a second with 8 ranks on the 2 cores): most of a tiny run's start, and
# the suites start plait hundreds of times. MFU is not what they check; progress.sh and
# alloc_faults.sh, which check the measurement and its allocations, unset it.
export PLAIT_TEST_GEMM_PEAK=${PLAIT_TEST_GEMM_PEAK-1e12}
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
