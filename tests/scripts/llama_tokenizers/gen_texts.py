#!/usr/bin/python3
"""Writes the Llama tokenizer test sets as NAME.jsonl (one JSON string a line, for
the references) and NAME.hex (the same texts as hex UTF-8, for plait):

    gen_texts.py KJV_TXT OUTDIR
      kjv.*      every verse of the King James Bible (31,102 lines)
      stress.*   hand-written cases and 3,000 random strings from a fixed seed:
                 CJK, emoji (ZWJ sequences, flags, skin tones), combining marks,
                 right-to-left scripts, control characters, long digit runs, runs
                 of spaces, tabs and newlines, text that spells special tokens
                 (<s>, </s>, <|begin_of_text|>, <0x41>, ...), contractions in any
                 case, and the code points where Unicode's White_Space and
                 JavaScript's \\s differ (U+0085, U+FEFF)
    and whole.txt: all of kjv followed by the stress texts, for one-call encoding.
Random strings draw from blocks assigned by Unicode 6, so that the Unicode
versions of plait (utf8proc), Oniguruma and SentencePiece agree on categories."""
import json
import random
import sys

kjv_path, out = sys.argv[1], sys.argv[2]

HAND = [
    "Hello world", "Hello, world!", " Hello", "  two leading spaces", "trailing spaces   ",
    "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "a\tb\t\tc", "line1\nline2\r\nline3\rline4",
    "   \n\n   x", "x  \t \n  y", "tabs\t\t\tand  spaces    mixed \t\n end",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure it's 'quoted' and they'll say we've done what you'd DO. I'M SURE IT'S, THEY'LL WE'VE",
    "'s 'S 'ſ 'Re 'rE 'LL 'Ll 'VE 'd 'D 'm 'M 't 'T '",
    "1234567890 12 345 6789 00000000000000000000000000000000000000000000 3.14159 1,000,000",
    "½ ¾ ² ³ ⅔ Ⅻ ٣٤٥ ४५६ ๑๒๓ 一二三",
    "日本語のテキスト。東京タワー", "中文分词测试：你好，世界！", "한국어 텍스트 안녕하세요",
    "Ελληνικά κείμενα ΟΔΟΣ", "Москва ПРИВЕТ мир Ёлка",
    "עברית: שלום עולם", "العربية: مرحبا بالعالم ١٢٣", "فارسی: سلام دنیا",
    "e\u0301 a\u0308\u0301 o\u0302\u0323 n\u0303 combining marks Z\u0351\u0352\u0353",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✈︎ 🤗🦙",
    "control \x00 \x01 \x07 \x1b[31m \x7f \u0085 \u200b \u200d \ufeff \u2028 \u2029 end",
    "nbsp\u00a0thin\u2009ideo\u3000ogham\u1680 spaces",
    "NFKC: ＡＢＣ１２３ ｶﾀｶﾅ ﬁ ﬂ ① ㎏ ™ ｟ Å Ω ẛ̣ ḱ ＜ｓ＞ \u00ad soft hyphen \u200c\u2060",
    "<s> </s> <unk> <s>text</s> a<s>b  <s>  x</s>y",
    "<|begin_of_text|>Hello<|end_of_text|> <|reserved_special_token_5|> <|eot_id|>",
    "<|begin_of <|end_of_text| <|endoftext|> <0x41> <0xFF> ▁ ▁▁ ▁a ▁▁b",
    "<s><s></s></s><|begin_of_text|><|begin_of_text|>",
    "mixed <s>\n\t<s> \u00a0</s>",
    "URL https://example.com/path?q=1&b=2#frag email a.b@c.de",
    "code: def f(x):\n    return x**2  # comment\n\tif (a && b) { c++; }",
    "!!!??? ... --- *** ((( ))) [[ ]] {{ }} ~~~ @@@ ### $$$ %%% ^^^ &&& ___ +++ === ||| ;;; :::",
    "ALLCAPS WORDS And Mixed CaseS camelCaseWord snake_case_word kebab-case-word",
    "a" * 300, "ab" * 200 + " " + "xyz" * 120, "\u00e9" * 100, "日" * 150, "😀" * 40,
    "word " * 100, " " * 50 + "x", "\n" * 30 + "y", "\t " * 40,
]

RANGES = [
    (0x20, 0x7E), (0x20, 0x7E), (0x20, 0x7E), (0x30, 0x39), (0xA0, 0xFF), (0x100, 0x17F),
    (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
    (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x2000, 0x206F), (0x2150, 0x218F),
]
WS = [" ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u0085", "\ufeff"]
SPECIAL = ["<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<0x0A>", "▁",
           "'s", "'LL", "123456", "<|reserved_special_token_0|>"]


def assigned(c):
    import unicodedata
    return unicodedata.category(c) not in ("Cn", "Cs", "Co")


def random_text(rng):
    parts = []
    for _ in range(rng.randint(1, 25)):
        r = rng.random()
        if r < 0.2:
            parts.append(rng.choice(WS))
        elif r < 0.27:
            parts.append(rng.choice(SPECIAL))
        else:
            lo, hi = rng.choice(RANGES)
            word = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))
            parts.append("".join(c for c in word if assigned(c)))
    return "".join(parts)


def write(name, texts):
    with open(f"{out}/{name}.jsonl", "w", encoding="utf-8") as j, open(f"{out}/{name}.hex", "w") as h:
        for t in texts:
            j.write(json.dumps(t) + "\n")
            h.write(t.encode("utf-8").hex() + "\n")


kjv = open(kjv_path, encoding="utf-8").read().split("\n")
if kjv and kjv[-1] == "":
    kjv.pop()
rng = random.Random(20260224)
stress = HAND + [random_text(rng) for _ in range(3000)]
write("kjv", kjv)
write("stress", stress)
with open(f"{out}/whole.txt", "w", encoding="utf-8", newline="") as f:
    f.write("\n".join(kjv) + "\n" + "\n".join(stress))
print(f"kjv: {len(kjv)} texts, stress: {len(stress)} texts")
