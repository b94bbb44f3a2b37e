#!/usr/bin/env bash
# Beam search of plait seq2seq (model/beam.h: Hugging Face's generate(num_beams,
# length_penalty, early_stopping), one KV cache per beam) on tiny T5 and BART
# checkpoints trained here (t5_train.sh's and bart_train.sh's flags, smaller): every
# hypothesis (tokens and score) equals an independent beam search over t5_parity.py's
# float64 PyTorch forward (beam_oracle.py: the whole prefix recomputed each step) for
# widths 1 to 6, length penalties -1 to 3 in both forms, with and without early
# stopping; width 1 gives greedy decoding's output; no allocation per source or step; TP 2 (2 ranks, the world size
# checked by seq2seq against the checkpoint's TP) gives TP 1's hypotheses; bad values
# and combinations are refused by flag and value. --batch-size 2 and 3 (sources searched
# together, their beams the rows of one step) write --batch-size 1's bytes, on TP 1 and
# TP 2, allocating nothing per batch. plait generate --beam-size on a tiny
# GPT and Llama: the same oracle (torch_parity.py's forwards), greedy at width 1, and
# for GPT TP 2 = TP 1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
export OMP_NUM_THREADS=1
"$ROOT/build/testtools/bert_samples" make "$PLAIT_DATA/bert/vocab.txt" "$PLAIT_DATA/kjv.txt" \
    "$TMP/kjv_sent" 3000 >/dev/null
TINY=(--data-path "$TMP/kjv_sent" --vocab-file "$PLAIT_DATA/bert/vocab.txt" --split 90,10,0
      --hidden-size 32 --num-attention-heads 4 --micro-batch-size 4 --global-batch-size 8
      --lr 3e-3 --train-iters 20 --seed 7 --log-interval 10 --init-method-std 0.3)
check "beam: a tiny T5 trains" bash -c "'$PLAIT' train --model t5 ${TINY[*]} --vocab-extra-ids 100 \
    --encoder-num-layers 2 --decoder-num-layers 2 --encoder-seq-length 24 \
    --decoder-seq-length 12 --save '$TMP/t5' > '$TMP/t5.log' 2>&1"
check "beam: a tiny BART trains" bash -c "'$PLAIT' train --model bart ${TINY[*]} --num-layers 2 \
    --seq-length 16 --save '$TMP/bart' > '$TMP/bart.log' 2>&1"
# sources as token ids (--ids): WordPiece ids of the KJV vocabulary's words
printf '2023 2003 1996 2338 1997 1996\n1998 2643 2056 2292 2045 2022 2422\n1999 1996 2927\n' \
    >"$TMP/src.ids"

# RUNS: NAME W A FORM EARLY; each decoded with --num-return W (every hypothesis, scored)
RUNS=("w1 1 1.0 hf 0" "w3 3 2.0 hf 0" "w4 4 1.0 hf 0" "w5 5 -1.0 gnmt 0" "w4e 4 0.5 hf 1"
      "w6 6 3.0 gnmt 1")
decode() { # MODEL NAME W A FORM EARLY
    local es=; [ "$6" = 1 ] && es=--early-stopping
    "$PLAIT" seq2seq --load "$TMP/$1" --input "$TMP/src.ids" --ids --max-new-tokens 8 \
        --beam-size "$3" --num-return "$3" --length-penalty "$4" --length-penalty-form "$5" \
        $es >"$TMP/$1_$2.txt"
}
for model in t5 bart; do
    args=()
    for r in "${RUNS[@]}"; do
        set -- $r
        check "beam: $model --beam-size $2 --length-penalty $3 ($4, early $5) decodes" \
            decode "$model" "$@"
        args+=("$TMP/${model}_$1.txt:$2:$3:$4:$5:8")
    done
    $PY "$ROOT/tests/scripts/beam_oracle.py" "$TMP/$model/iter_0000020" "$TMP/src.ids" \
        "${args[@]}" >"$TMP/oracle_$model.out" 2>&1
    grep -v '^ok' "$TMP/oracle_$model.out"
    read -r p f < <(sed -nE 's/^beam_oracle: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' \
        "$TMP/oracle_$model.out")
    echo "beam: $model against the PyTorch beam search: ${p:-0} hypotheses equal, ${f:-?} differ"
    check "beam: $model: every hypothesis equals the PyTorch beam search's (${p:-0} compared)" \
        test "${p:-0}" -ge 50 -a "${f:-1}" = 0
    # the search is exercised: beams that branch (and below, hypotheses closed by [EOS])
    check "beam: $model: the hypotheses differ in content" \
        test "$(cut -f1 "$TMP/${model}_w3.txt" "$TMP/${model}_w6.txt" | sort -u | wc -l)" -ge 10
    check "beam: $model: --beam-size 1 gives greedy decoding's text" bash -c "
        '$PLAIT' seq2seq --load '$TMP/$model' --input '$TMP/src.ids' --ids > '$TMP/g.txt' &&
        '$PLAIT' seq2seq --load '$TMP/$model' --input '$TMP/src.ids' --ids --beam-size 1 |
        cmp - '$TMP/g.txt' && [ -s '$TMP/g.txt' ]"
done
# --batch-size: sources searched together (their beams the rows of one decoder step) write
# the same bytes as one source at a time (the runs above, which the oracle checked)
for model in t5 bart; do
    check "beam: $model: --batch-size 3 and 2 give --batch-size 1's hypotheses and scores, byte for byte" \
        bash -c "for r in 'w4 4 1.0 hf 0' 'w6 6 3.0 gnmt 1' 'w1 1 1.0 hf 0'; do set -- \$r
            es=; [ \$5 = 1 ] && es=--early-stopping
            for bs in 3 2; do '$PLAIT' seq2seq --load '$TMP/$model' --input '$TMP/src.ids' --ids \
                --max-new-tokens 8 --beam-size \$2 --num-return \$2 --length-penalty \$3 \
                --length-penalty-form \$4 \$es --batch-size \$bs | cmp - '$TMP/${model}_'\$1.txt || exit 1
            done; done"
done
check "beam: T5's hypotheses have several lengths ([EOS] closes some)" \
    test "$(cut -f1 "$TMP"/t5_w*.txt | awk '{ print NF }' | sort -u | wc -l)" -ge 4
printf 'in the beginning god created the heaven\nand the earth was without form\n' >"$TMP/src.txt"
check "beam: --beam-size 1 gives greedy's text from text sources too (T5)" bash -c "
    '$PLAIT' seq2seq --load '$TMP/t5' --input '$TMP/src.txt' > '$TMP/g.txt' &&
    '$PLAIT' seq2seq --load '$TMP/t5' --input '$TMP/src.txt' --beam-size 1 | cmp - '$TMP/g.txt'"

# nothing allocated per source or step: the allocation hook's calls (PLAIT_ALLOC_REPORT)
# are the same for one source as for the same source three times over, 8 steps x 4 beams
head -n 1 "$TMP/src.ids" >"$TMP/one.ids"
cat "$TMP/one.ids" "$TMP/one.ids" "$TMP/one.ids" >"$TMP/three.ids"
allocs() { PLAIT_ALLOC_REPORT=1 "$PLAIT" seq2seq --load "$TMP/t5" --input "$TMP/$1.ids" --ids \
    --beam-size 4 --max-new-tokens 8 2>&1 >/dev/null | sed -n 's/^plait: allocations: //p'; }
a1=$(allocs one) a3=$(allocs three)
echo "beam: allocation calls, one source: $a1; three: $a3"
check "beam: no allocation per source or per step, every block freed" \
    bash -c "[ -n '$a1' ] && [ '$a1' = '$a3' ] && [[ '$a1' == *' 0 blocks live at exit' ]]"
allocs2() { PLAIT_ALLOC_REPORT=1 "$PLAIT" seq2seq --load "$TMP/t5" --input "$TMP/$1.ids" --ids \
    --beam-size 4 --max-new-tokens 8 --batch-size 2 2>&1 >/dev/null | sed -n 's/^plait: allocations: //p'; }
cat "$TMP/three.ids" "$TMP/one.ids" >"$TMP/four.ids"
head -n 2 "$TMP/three.ids" >"$TMP/two.ids"
b2=$(allocs2 two) b4=$(allocs2 four)
echo "beam: --batch-size 2 allocation calls, two sources: $b2; four: $b4"
check "beam: --batch-size 2: no allocation per batch or per step, every block freed" \
    bash -c "[ -n '$b2' ] && [ '$b2' = '$b4' ] && [[ '$b2' == *' 0 blocks live at exit' ]]"

# TP 2: the resharded checkpoint on 2 ranks (seq2seq refuses any other rank count)
"$PLAIT" ckpt reshard "$TMP/t5" --out "$TMP/t5_tp2" --tensor-model-parallel-size 2 \
    --weights-only >/dev/null 2>&1
check "beam: TP 2 decodes on 2 ranks" bash -c "timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' \
    seq2seq --load '$TMP/t5_tp2' --input '$TMP/src.ids' --ids --max-new-tokens 8 \
    --beam-size 5 --num-return 5 --length-penalty -1 --length-penalty-form gnmt > '$TMP/tp2.txt'"
check "beam: TP 2 with --batch-size 3 gives TP 2's hypotheses byte for byte" bash -c "
    timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' seq2seq --load '$TMP/t5_tp2' --input '$TMP/src.ids' \
    --ids --max-new-tokens 8 --beam-size 5 --num-return 5 --length-penalty -1 \
    --length-penalty-form gnmt --batch-size 3 | cmp - '$TMP/tp2.txt'"
check_fails "beam: the TP 2 checkpoint on 1 rank is refused" "run seq2seq on 2 ranks, not 1" \
    "$PLAIT" seq2seq --load "$TMP/t5_tp2" --input "$TMP/src.ids" --ids --beam-size 2
check "beam: TP 2's hypotheses are TP 1's (tokens equal, scores within 1e-5 relative)" bash -c "
    diff <(cut -f1 '$TMP/tp2.txt') <(cut -f1 '$TMP/t5_w5.txt') &&
    paste '$TMP/tp2.txt' '$TMP/t5_w5.txt' | awk -F'\t' '{ d = \$2 - \$4; if (d < 0) d = -d;
        if (d > 1e-5 * (\$4 < 0 ? -\$4 : \$4)) bad++ } END { exit !(NR == 15 && !bad) }'"

# plait generate --beam-size: a tiny GPT (mock data, weights of std 0.3) continues 3
# prompts; the prompt counts in each hypothesis' length (Hugging Face's input_ids)
check "beam: a tiny GPT trains" bash -c "'$PLAIT' train --mock-data --vocab-size 50257 \
    --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 \
    --global-batch-size 4 --train-iters 5 --lr 1e-3 --init-method-std 0.3 --save '$TMP/gpt' \
    > '$TMP/gpt.log' 2>&1"
printf '5 17 300\n50256\n464 3726 286 262\n' >"$TMP/prompts.ids"
GEN=("$PLAIT" generate --load "$TMP/gpt" "${GPT2[@]}" --ids --max-new-tokens 8)
gen_all() { # OUT FLAGS...: every prompt, one after the other
    local out=$1; shift
    : >"$out"
    while read -r p; do "${GEN[@]}" --prompt "$p" "$@" >>"$out" || return 1; done <"$TMP/prompts.ids"
}
args=()
for r in "g1 1 1.0 hf 0" "g4 4 1.0 hf 0" "g3 3 2.0 gnmt 1"; do
    set -- $r
    es=; [ "$5" = 1 ] && es=--early-stopping
    check "beam: gpt --beam-size $2 --length-penalty $3 ($4, early $5) generates" \
        gen_all "$TMP/gpt_$1.txt" --beam-size "$2" --num-return "$2" --length-penalty "$3" \
        --length-penalty-form "$4" $es
    args+=("$TMP/gpt_$1.txt:$2:$3:$4:$5:8")
done
$PY "$ROOT/tests/scripts/beam_oracle.py" "$TMP/gpt/iter_0000005" "$TMP/prompts.ids" "${args[@]}" \
    >"$TMP/oracle_gpt.out" 2>&1
grep -v '^ok' "$TMP/oracle_gpt.out"
read -r p f < <(sed -nE 's/^beam_oracle: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' \
    "$TMP/oracle_gpt.out")
check "beam: gpt: every hypothesis equals the PyTorch beam search's (${p:-0} compared)" \
    test "${p:-0}" -ge 24 -a "${f:-1}" = 0
check "beam: gpt: --beam-size 1 gives greedy's (--temperature 0) continuation" bash -c "
    $(printf '%q ' "${GEN[@]}") --prompt '464 3726 286 262' --temperature 0 > '$TMP/gg.txt' &&
    $(printf '%q ' "${GEN[@]}") --prompt '464 3726 286 262' --beam-size 1 | cmp - '$TMP/gg.txt' &&
    [ \$(wc -w < '$TMP/gg.txt') = 8 ]"
# Llama (grouped-query attention, RoPE, untied output layer): the same, width 4
check "beam: a tiny Llama trains" bash -c "'$PLAIT' train --model llama --group-query-attention \
    --num-query-groups 2 --mock-data --vocab-size 50257 --num-layers 2 --hidden-size 32 \
    --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 --global-batch-size 4 \
    --train-iters 5 --lr 1e-3 --init-method-std 0.3 --save '$TMP/llama' > '$TMP/llama.log' 2>&1"
GEN[3]=$TMP/llama
check "beam: llama --beam-size 4 generates" gen_all "$TMP/llama_g4.txt" --beam-size 4 --num-return 4
$PY "$ROOT/tests/scripts/beam_oracle.py" "$TMP/llama/iter_0000005" "$TMP/prompts.ids" \
    "$TMP/llama_g4.txt:4:1.0:hf:0:8" >"$TMP/oracle_llama.out" 2>&1
grep -v '^ok' "$TMP/oracle_llama.out"
check "beam: llama: every hypothesis equals the PyTorch beam search's" \
    grep -q '^beam_oracle: 12 passed, 0 failed$' "$TMP/oracle_llama.out"
check "beam: llama: --beam-size 1 gives greedy's continuation" bash -c "
    $(printf '%q ' "${GEN[@]}") --prompt '5 17 300' --temperature 0 > '$TMP/lg.txt' &&
    $(printf '%q ' "${GEN[@]}") --prompt '5 17 300' --beam-size 1 | cmp - '$TMP/lg.txt'"
GEN[3]=$TMP/gpt
"$PLAIT" ckpt reshard "$TMP/gpt" --out "$TMP/gpt_tp2" --tensor-model-parallel-size 2 \
    --weights-only >/dev/null 2>&1
check "beam: gpt: TP 2 on 2 ranks gives TP 1's hypotheses" bash -c "
    timeout -k 5 60 mpirun.openmpi -n 2 '$PLAIT' generate --load '$TMP/gpt_tp2' ${GPT2[*]} --ids \
    --max-new-tokens 8 --prompt '464 3726 286 262' --beam-size 4 --num-return 4 |
    cut -f1 | diff - <(tail -n 4 '$TMP/gpt_g4.txt' | cut -f1)"
check_fails "beam: gpt: --beam-size with --temperature 0.5 is refused" \
    "--beam-size 2 with --temperature 0.5" "${GEN[@]}" --prompt 5 --beam-size 2 --temperature 0.5

S2S=("$PLAIT" seq2seq --load "$TMP/t5" --input "$TMP/src.ids" --ids)
check_fails "beam: --beam-size 0 is refused" "--beam-size 0: need at least 1" "${S2S[@]}" --beam-size 0
check_fails "beam: a width above the vocabulary is refused" \
    "--beam-size 40000: need 1 to the vocabulary's 30624" "${S2S[@]}" --beam-size 40000
check_fails "beam: --beam-size with --temperature > 0 is refused, naming both" \
    "--beam-size 2 with --temperature 0.7" "${S2S[@]}" --beam-size 2 --temperature 0.7
check_fails "beam: --num-return above --beam-size is refused" \
    "--num-return 5: need 1 to --beam-size \(4\)" "${S2S[@]}" --beam-size 4 --num-return 5
check_fails "beam: --length-penalty without --beam-size is refused" \
    "give --beam-size too" "${S2S[@]}" --length-penalty 2
check_fails "beam: --batch-size 0 is refused" "--batch-size 0: need at least 1" \
    "${S2S[@]}" --beam-size 2 --batch-size 0
check_fails "beam: --batch-size without --beam-size is refused" "give --beam-size too" \
    "${S2S[@]}" --batch-size 2
check_fails "beam: a bad --ids source is named by file and line" "src_bad.ids:2: --ids" \
    bash -c "printf '1 2\n1 x\n' > '$TMP/src_bad.ids' &&
             '$PLAIT' seq2seq --load '$TMP/t5' --input '$TMP/src_bad.ids' --ids --beam-size 2"
summary beam
