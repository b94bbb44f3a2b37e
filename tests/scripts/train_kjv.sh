#!/usr/bin/env bash
# Training on the King James Bible lowers the validation loss below what
# unigram statistics alone can reach.
#
# Threshold: the unigram entropy of KJV in GPT-2 tokens is 6.04 nats (computed
# below from the .bin with numpy, not assumed). A model with validation loss
# under it predicts better than any context-free distribution, so it has
# learned from context. A uniform guess over the padded vocabulary is
# ln(50304) = 10.83 nats, where training starts.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/train_lib.sh"
kjv_dataset 31102 "$TMP/kjv"
entropy=$(/usr/bin/python3 -c "
import numpy as np
t = np.fromfile('$TMP/kjv_text_document.bin', dtype=np.uint16)
c = np.bincount(t); p = c[c > 0] / len(t)
print(float(-(p * np.log(p)).sum()))")
echo "# unigram entropy of the corpus: $entropy nats"
check "train 2 layers x 128 hidden for 80 iterations" timeout 600 "$PLAIT" train \
    --num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 64 \
    --micro-batch-size 16 --global-batch-size 16 --train-iters 80 --lr 2e-3 --min-lr 2e-4 \
    --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --adam-beta2 0.95 \
    --eval-interval 40 --eval-iters 4 --log-interval 20 --split 98,2,0 \
    --data-path "$TMP/kjv_text_document" "${GPT2[@]}" --metrics-file "$TMP/m.jsonl"
valid() { grep valid_lm_loss "$TMP/m.jsonl" | sed -n "$1p" | sed -E 's/.*"valid_lm_loss": ([^,]*),.*/\1/'; }
first=$(valid 1); last=$(valid 2)
echo "# validation loss: $first at iteration 40, $last at iteration 80"
check "validation loss falls from iteration 40 to 80" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
check "final validation loss is below the unigram entropy" \
    awk -v a="$last" -v h="$entropy" 'BEGIN { exit !(a < h) }'

# The LM head three ways: fused (the default; 1024 rows a micro-batch, so two blocks of
# 512 rows of GPT-2's 50,304), logits recomputed in chunks of 2,048 vocabulary rows, and
# all logits kept: the same model, but the GEMMs are split differently and dx and dW
# sum their parts in another order, so fp32 rounding may differ; 10 iterations agree to
# 1e-5 relative.
short=(--num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 64
       --micro-batch-size 16 --global-batch-size 16 --train-iters 10 --lr 2e-3 --log-interval 1
       --eval-interval 10 --eval-iters 2 --split 98,2,0 --data-path "$TMP/kjv_text_document" "${GPT2[@]}")
for mode in fused recompute keep; do
    check "10 iterations with --lm-head-logits $mode" timeout 300 "$PLAIT" train "${short[@]}" \
        --lm-head-logits $mode --metrics-file "$TMP/lm_$mode.jsonl"
done
for mode in fused keep; do
    check "--lm-head-logits $mode: losses equal the recomputed run's within 1e-5" /usr/bin/python3 -c "
import json, sys
def ls(p): return [json.loads(l).get('lm_loss') or json.loads(l)['valid_lm_loss'] for l in open(p)
                   if '\"lm_loss\"' in l or '\"valid_lm_loss\"' in l]
a, b = ls('$TMP/lm_recompute.jsonl'), ls('$TMP/lm_$mode.jsonl')
print(a, b)
sys.exit(not (len(a) == len(b) == 11 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))))"
done
check_fails "an unknown --lm-head-logits value is refused" "--lm-head-logits must be one of .fused.recompute.keep." \
    "$PLAIT" train "${short[@]}" --lm-head-logits store
check "scripts/plot.py draws the loss curves as a PNG" bash -c \
    "/usr/bin/python3 '$ROOT/scripts/plot.py' loss '$TMP/m.jsonl' '$TMP/lm_keep.jsonl' -o '$TMP/loss.png' &&
     head -c 8 '$TMP/loss.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
check_fails "scripts/plot.py names a metrics file without losses" "has no lm_loss" \
    /usr/bin/python3 "$ROOT/scripts/plot.py" loss /dev/null -o "$TMP/none.png"
summary train_kjv
