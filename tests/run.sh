#!/usr/bin/env bash
# Runs every test suite and prints the total as its last line: "N passed, N failed".
#   tests/run.sh               unit tests (build/), the same under ASan (build-asan/),
#                              every script suite (tests/scripts/*.sh but lib.sh and
#                              *_lib.sh, which the suites source), brief fuzzing (build-fuzz/)
#   tests/run.sh --unit-only   only the unit tests of $PLAIT_TEST_BUILD (default build)
# Each suite prints "NAME: N passed, N failed"; a suite that crashes, hangs past
# its timeout or prints no summary counts as one failure.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PLAIT_DATA=${PLAIT_DATA:-$ROOT/data}
export PLAIT=${PLAIT:-$ROOT/build/plait}
export PLAIT_REF_CACHE=${PLAIT_REF_CACHE:-$PLAIT_DATA/ref-cache}  # reference tokenizers fetched by suites
unit_only=0
[ "${1:-}" = "--unit-only" ] && unit_only=1
total_pass=0
total_fail=0
failed_suites=()

run_suite() { # name timeout_s command...
    local name=$1 limit=$2; shift 2
    local tmp; tmp=$(mktemp -d /tmp/plait-test.XXXXXX)
    local log=$tmp/log
    local t0=$SECONDS
    PLAIT_TEST_TMP=$tmp timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    local rc=$?
    local summary; summary=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    local p=0 f=0
    if [ -n "$summary" ]; then
        p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$summary")
        f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$summary")
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1  # crashed, timed out or failed without saying which test
        [ "$rc" -eq 124 ] && echo "TIMEOUT after ${limit}s" >>"$log"
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    printf '%-34s %4d passed, %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
    if [ "$f" -ne 0 ]; then
        failed_suites+=("$name")
        grep -vE '^ok ' "$log" | tail -n 40 | sed 's/^/    | /'
    fi
    rm -rf "$tmp"
}

build=${PLAIT_TEST_BUILD:-build}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    run_suite "$build/$(basename "$t")" 600 "$ROOT/$t"
done

if [ "$unit_only" -eq 0 ]; then
    if [ -d build-asan/tests ]; then
        for t in build-asan/tests/test_*; do
            [ -x "$t" ] || continue
            run_suite "asan/$(basename "$t")" 900 "$ROOT/$t"
        done
    fi
    for s in tests/scripts/*.sh; do
        case $(basename "$s") in lib.sh | *_lib.sh) continue ;; esac # sourced by the suites
        run_suite "$(basename "$s" .sh)" 900 bash "$ROOT/$s"
    done
    if [ -d build-fuzz ]; then
        run_suite "fuzz (brief)" 600 scripts/fuzz.sh "${FUZZ_BRIEF_SECONDS:-10}"
    fi
fi

echo
[ ${#failed_suites[@]} -gt 0 ] && echo "failing suites: ${failed_suites[*]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
