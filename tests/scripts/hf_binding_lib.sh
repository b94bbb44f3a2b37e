# The Hugging Face tokenizers reference (source it after lib.sh): the prebuilt Node
# binding of npm @anush008/tokenizers-linux-x64-gnu@0.6.0 (the Rust crate 0.22.2),
# fetched with `npm pack` into $PLAIT_REF_CACHE (default: a cache dir under the
# suite's temp dir) unless already there, pinned by sha256. Sets HF_BINDING and
# defines fetch_hf_binding (returns non-zero with a message when it cannot).
HF_PKG=@anush008/tokenizers-linux-x64-gnu@0.6.0
HF_TGZ_SHA=f8db409cd5b52a2fac2fd963eacf5c33b3d5841c2520ca168c447b2f5cb4a281
HF_NODE_SHA=c7f1e1604d60cb8e6f7309a777c3334ffbc7960a1e5b486a79fa693ec2c20b0c
HF_CACHE=${PLAIT_REF_CACHE:-$TMP/ref-cache}
HF_BINDING=$HF_CACHE/anush008-tokenizers-linux-x64-gnu-0.6.0/tokenizers.linux-x64-gnu.node

hf_sha() { sha256sum "$1" | cut -d' ' -f1; }

fetch_hf_binding() {
    if [ -f "$HF_BINDING" ] && [ "$(hf_sha "$HF_BINDING")" = "$HF_NODE_SHA" ]; then return 0; fi
    command -v npm >/dev/null || { echo "cannot fetch $HF_PKG: npm not found (apt-get install npm)"; return 1; }
    mkdir -p "$HF_CACHE" || return 1
    local tgz=$HF_CACHE/anush008-tokenizers-linux-x64-gnu-0.6.0.tgz
    if [ ! -f "$tgz" ]; then
        (cd "$HF_CACHE" && npm pack --silent "$HF_PKG" >/dev/null 2>"$HF_CACHE/npm.err") || {
            echo "cannot fetch $HF_PKG with npm pack:"; tail -n 5 "$HF_CACHE/npm.err"; return 1; }
    fi
    [ "$(hf_sha "$tgz")" = "$HF_TGZ_SHA" ] || { echo "$tgz: sha256 $(hf_sha "$tgz"), expected $HF_TGZ_SHA"; return 1; }
    mkdir -p "$(dirname "$HF_BINDING")" &&
        tar xzf "$tgz" -C "$(dirname "$HF_BINDING")" --strip-components=1 package/tokenizers.linux-x64-gnu.node || return 1
    [ "$(hf_sha "$HF_BINDING")" = "$HF_NODE_SHA" ] || { echo "$HF_BINDING: sha256 mismatch"; return 1; }
}
