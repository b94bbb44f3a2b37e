#!/usr/bin/env bash
# make install: plait lands in $(DESTDIR)$(PREFIX)/bin (PREFIX default /usr/local),
# runs from there by name on the PATH, and make uninstall removes it again.
source "$(dirname "$0")/lib.sh"
BUILD_DIR=$(dirname "$PLAIT")
DEST=$TMP/stage
check "make install DESTDIR=... PREFIX=/opt/plait" \
    make -s -C "$ROOT" BUILD="$BUILD_DIR" install DESTDIR="$DEST" PREFIX=/opt/plait
check "the binary is at DESTDIR/PREFIX/bin/plait, executable" test -x "$DEST/opt/plait/bin/plait"
check "it is the built plait, byte for byte" cmp "$PLAIT" "$DEST/opt/plait/bin/plait"
check "on the PATH, 'plait --version' runs the installed one" \
    sh -c "PATH='$DEST/opt/plait/bin':/usr/bin:/bin; [ \"\$(command -v plait)\" = '$DEST/opt/plait/bin/plait' ] && plait --version | grep -q '^plait [0-9]'"
check "the installed plait launch starts itself on every rank" \
    sh -c "PATH='$DEST/opt/plait/bin':/usr/bin:/bin plait launch --dry-run --nproc_per_node 2 train | grep -qF ' $DEST/opt/plait/bin/plait train'"
check "the installed plait runs a command (preprocess of 20 verses)" \
    sh -c "head -n 20 '$PLAIT_DATA/kjv.txt' > '$TMP/v.txt' && PATH='$DEST/opt/plait/bin':/usr/bin:/bin plait preprocess --input '$TMP/v.txt' --output-prefix '$TMP/v' --tokenizer-type GPT2BPETokenizer --vocab-file '$PLAIT_DATA/gpt2/encoder.json' --merge-file '$PLAIT_DATA/gpt2/vocab.bpe' && test -s '$TMP/v_text_document.bin'"
check "PREFIX defaults to /usr/local" \
    sh -c "make -s -n -C '$ROOT' BUILD='$BUILD_DIR' install DESTDIR='$DEST' | grep -qF '$DEST/usr/local/bin/plait'"
check "make install with the default PREFIX under DESTDIR" \
    make -s -C "$ROOT" BUILD="$BUILD_DIR" install DESTDIR="$DEST"
check "  lands in DESTDIR/usr/local/bin" test -x "$DEST/usr/local/bin/plait"
check "make uninstall removes it" \
    sh -c "make -s -C '$ROOT' BUILD='$BUILD_DIR' uninstall DESTDIR='$DEST' && ! test -e '$DEST/usr/local/bin/plait'"
summary install
