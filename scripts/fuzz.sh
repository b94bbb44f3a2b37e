#!/usr/bin/env bash
# Runs each libFuzzer target in build-fuzz/ for SECONDS (default 300), seeded
# from fuzz/seeds/<target>/ when present. Prints "fuzz: N passed, N failed".
# -timeout=60: on this shared 2-core machine a niced target was seen stalled for 17 s in
# open() (docs/reliability.md, "Fuzzing"); 10 s reported that as a finding.
set -u
cd "$(dirname "$0")/.."
secs=${1:-300}
pass=0 fail=0
for bin in build-fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    corpus=build-fuzz/corpus-$name
    mkdir -p "$corpus"
    seeds=()
    [ -d "fuzz/seeds/$name" ] && seeds=("fuzz/seeds/$name")
    if "$bin" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -print_final_stats=0 \
        -artifact_prefix=build-fuzz/"$name"- "$corpus" "${seeds[@]}" >build-fuzz/"$name".log 2>&1; then
        echo "ok $name ($(grep -oE '#[0-9]+' build-fuzz/"$name".log | tail -n 1 | tr -d '#') runs)"
        pass=$((pass + 1))
    else
        echo "not ok $name"; tail -n 30 build-fuzz/"$name".log
        fail=$((fail + 1))
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
