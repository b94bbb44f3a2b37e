#!/usr/bin/python3
"""Writes the BERT reference test sets, each as NAME.jsonl (one JSON string a
line, for the reference) and NAME.hex (the same texts as hex UTF-8, for plait):

    gen_sentences.py KJV_TXT OUTDIR
      main.*    for both lower and cased
      sigma.*   Greek capital sigma in many contexts; sigma.jsonl holds the
                texts already lowered by Python's str.lower(), see below

Hand-written cases (accents, CJK, emoji, control characters, long words,
punctuation runs, mixed case, Greek final sigma, ...), every verse of the King
James Bible (31,102), and 1500 random strings from a fixed seed.

The reference (Hugging Face tokenizers) knowingly differs from Megatron's
Python BertTokenizer on a few code points, which are left out here and
covered by plait's unit tests instead: private-use (Co), unassigned (Cn) and
surrogate code points, which HF deletes as "other" and Megatron keeps; and
U+2B820..U+2B91F, which Megatron counts as CJK and HF (a typo: 0x2B920) not.

HF also lowercases one code point at a time, so it never produces the final
sigma that Python's str.lower() (which Megatron calls) gives for a word-final
capital sigma. U+03A3 is therefore kept out of main.*, and sigma.* checks it
with Python's own str.lower() as the reference for that step: its texts hold
only letters, digits, ASCII punctuation, spaces and case-ignorable marks, on
which Megatron's clean-up and CJK steps do nothing, so lowering the whole text
first and then running HF (whose lower case is then a no-op) gives exactly
Megatron's pipeline.
Random strings draw only from blocks assigned by Unicode 6, so that the
Unicode versions of the two implementations agree on every category."""
import json
import random
import sys
import unicodedata

kjv_path, out = sys.argv[1], sys.argv[2]

HAND = [
    "i like strawberries",
    "Hello, World! This is BERT.",
    "Héllo Wörld Ångström naïve café",
    "HÉLLO WÖRLD ÅNGSTRÖM NAÏVE CAFÉ résumé façade jalapeño über coöperate",
    "e\u0301 a\u0308\u0301 o\u0302\u0323 n\u0303 combining marks",
    "\u1e9e Straße STRASSE ß",
    "İstanbul Iıİi DİYARBAKIR",
    "ΟΔΟ ΑΘΗΝΑ. Ω aΩb ὈΔΥΣΣΕΎ σς",
    "Москва ПРИВЕТ мир Ёлка",
    "日本語のテキスト。東京タワー",
    "中文分词测试：你好，世界！",
    "我爱北京天安门 豈 更 車 兀",
    "한국어 텍스트 안녕하세요",
    "emoji 🤗😀👍🏽 👨‍👩‍👧 ❤️ ✨",
    "control\x00chars\x07here\x1b[0m\x7fdel\x85nel",
    "zero\u200bwidth\ufeffbom soft\u00adhyphen rtl\u200fmark",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic\u2028line\u2029para",
    "replacement \ufffd char and nul \x00",
    "!!!???...,,,;;;:::---___***&&&^^^%%%$$$###@@@",
    "a.b,c;d:e!f?g'h\"i(j)k[l]m{n}o<p>q/r\\s|t~u`v",
    "«guillemets» „quotes“ ‘single’ “double” — em–en dash … ellipsis",
    "¿Qué? ¡Sí! ¶ § • · ※",
    "HeLLo WoRLD MiXeD CaSe iPhone eBay McDONALD'S",
    "don't can't won't I'm you're it's we've they'll",
    "3.14159 1,000,000 2023-11-22 12:30pm $100 €50 £20 ¥1000 ₹500",
    "email@example.com https://www.example.org/path?q=1&r=2#frag",
    "[CLS] [SEP] [MASK] [PAD] [UNK] [BOS] [EOS] <extra_id_0>",
    "##ing ##s un##aff##able",
    "a" * 199,
    "a" * 200,
    "a" * 201,
    "b" * 250 + " short",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis " * 3,
    "ﬁ ﬂ ﬀ ligatures Ⅻ ⅻ ① Ⓐ ⓐ ＡＢＣ ａｂｃ １２３ ％＆",
    "ª º ordinals and Ⅲ Roman Σ",
    "مرحبا بالعالم עִבְרִית שָׁלוֹם",
    "नमस्ते दुनिया हिन्दी",
    "สวัสดีชาวโลก",
    "Ελληνικά: Καλημέρα κόσμε",
    "math ∑∏∫√∞≠≤≥ ± × ÷ → ← ↔ ⇒ ∀∃",
    "",
    "   ",
    "\t\n\r",
    ".",
    "x",
]


def assigned(cp):
    c = chr(cp)
    cat = unicodedata.category(c)
    return cat not in ("Cn", "Co", "Cs") and cp != 0x3A3


# Blocks assigned by Unicode 6.0 (code points unassigned in them are skipped).
BLOCKS = [
    (0x00, 0x7F), (0x80, 0xFF), (0x100, 0x24F), (0x250, 0x2FF), (0x300, 0x36F),
    (0x370, 0x37E), (0x384, 0x3FF), (0x400, 0x4FF), (0x591, 0x5F4), (0x600, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x1E00, 0x1FFF), (0x2000, 0x2064), (0x2070, 0x209C),
    (0x20A0, 0x20B5), (0x2100, 0x214F), (0x2150, 0x2188), (0x2190, 0x21FF), (0x2200, 0x22FF),
    (0x2460, 0x24FF), (0x2500, 0x257F), (0x3000, 0x303F), (0x3041, 0x30FF), (0x4E00, 0x9FCB),
    (0xAC00, 0xD7A3), (0xF900, 0xFA2D), (0xFF01, 0xFFEE), (0x1F600, 0x1F640), (0x20000, 0x2A6D6),
]
POOL = []
for a, b in BLOCKS:
    POOL.extend(cp for cp in range(a, b + 1) if assigned(cp))
ASCII_WORDS = ["the", "quick", "brown", "Fox", "JUMPS", "over", "lazy", "dog", "naïve",
               "Ωmega", "straw", "berries", "un", "aff", "able", "x" * 30]

rng = random.Random(20261122)
texts = list(HAND)
with open(kjv_path, encoding="utf-8") as f:
    for line in f:
        texts.append(line.rstrip("\n"))
for _ in range(1500):
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(ASCII_WORDS))
        elif r < 0.9:
            parts.append("".join(chr(rng.choice(POOL)) for _ in range(rng.randint(1, 8))))
        else:
            parts.append(rng.choice([" ", "  ", "\t", "\n", "\u3000", "\u00a0", "", "-", "..."]))
        parts.append(rng.choice([" ", " ", " ", "", "\t"]))
    texts.append("".join(parts))

SIGMA_HAND = ["ΟΔΟΣ ΣΑΣ. Σ aΣb ΑΣ\u0301 ὈΔΥΣΣΕΎΣ ΣΊΣΥΦΟΣ", "ΣΑΣ'Σ ΑΣ.Β ΑΣ:Β ΑΣ·Β ΑΣ’Β",
              "ªΣ ⅢΣ ʰΣ AΣʰ AΣ1 1Σ Σ- -Σ ΣΣ ΣΣΣ", "ΜΕΓΑΛΟΣ ΚΑΙ ΣΟΦΟΣ, ΣΕ ΣΕΝΑ!"]
SIGMA_CHARS = (["Σ"] * 6 + list("ΑΒΓΟΩαβγοω") + list("abcXYZ19") +
               ["'", ".", ":", "\u00b7", "\u2019", "\u0301", "\u02b0", "\u00aa", "\u2162", "-", ",", "!"])
sigma = list(SIGMA_HAND)
for _ in range(400):
    words = ["".join(rng.choice(SIGMA_CHARS) for _ in range(rng.randint(1, 6)))
             for _ in range(rng.randint(1, 5))]
    sigma.append(" ".join(words))


def write(name, texts, ref_texts):
    with open(f"{out}/{name}.jsonl", "w", encoding="utf-8") as fj, \
            open(f"{out}/{name}.hex", "w") as fh:
        for t, r in zip(texts, ref_texts):
            fj.write(json.dumps(r, ensure_ascii=True) + "\n")
            fh.write(t.encode("utf-8").hex() + "\n")


write("main", texts, texts)
write("sigma", sigma, [t.lower() for t in sigma])
print(len(texts), len(sigma))
