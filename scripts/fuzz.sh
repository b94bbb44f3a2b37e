#!/usr/bin/env bash
# Runs each libFuzzer target in build-fuzz/ for SECONDS (default 300), seeded
# from fuzz/seeds/<target>/ when present, FUZZ_JOBS targets at a time (default: one per
# core; each target is one single-threaded process, so each still gets a core for its
# SECONDS). Prints each target's result in name order, then "fuzz: N passed, N failed".
# -timeout=60: on this shared 2-core machine a niced target was seen stalled for 17 s in
# open() (docs/reliability.md, "Fuzzing"); 10 s reported that as a finding.
set -u
cd "$(dirname "$0")/.."
secs=${1:-300}
jobs=${FUZZ_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
fuzz_one() { # BIN: runs one target; its exit status in build-fuzz/NAME.rc
    local bin=$1 name; name=$(basename "$1")
    local corpus=build-fuzz/corpus-$name seeds=()
    mkdir -p "$corpus"
    [ -d "fuzz/seeds/$name" ] && seeds=("fuzz/seeds/$name")
    "$bin" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -print_final_stats=0 \
        -artifact_prefix=build-fuzz/"$name"- "$corpus" "${seeds[@]}" >build-fuzz/"$name".log 2>&1
    echo $? >build-fuzz/"$name".rc
}
bins=()
for bin in build-fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    bins+=("$bin")
    rm -f build-fuzz/"$(basename "$bin")".rc
done
running=0
for bin in ${bins[@]+"${bins[@]}"}; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    fuzz_one "$bin" &
    running=$((running + 1))
done
wait
pass=0 fail=0
for bin in ${bins[@]+"${bins[@]}"}; do
    name=$(basename "$bin")
    if [ "$(cat build-fuzz/"$name".rc 2>/dev/null)" = 0 ]; then
        echo "ok $name ($(grep -oE '#[0-9]+' build-fuzz/"$name".log | tail -n 1 | tr -d '#') runs)"
        pass=$((pass + 1))
    else
        echo "not ok $name"; tail -n 30 build-fuzz/"$name".log
        fail=$((fail + 1))
    fi
    rm -f build-fuzz/"$name".rc
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
