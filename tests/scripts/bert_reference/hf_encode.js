// Reference BERT WordPiece encoder: Hugging Face tokenizers (the Rust crate,
// 0.22.2) through the prebuilt Node binding of npm
// @anush008/tokenizers-linux-x64-gnu@0.6.0.
//   node hf_encode.js BINDING.node VOCAB.txt lower|cased TEXTS.jsonl
// Builds the standard BERT pipeline from vocab.txt (BertNormalizer,
// BertPreTokenizer, WordPiece with "##" and [UNK]); max_input_chars_per_word
// is set to Megatron's 200 (HF's default is 100). No special tokens are added.
// Prints the ids of each text, space-separated, one line per text.
'use strict';
const fs = require('fs');
const [binding, vocabPath, mode, textsPath] = process.argv.slice(2);
const nb = require(binding);
const lines = fs.readFileSync(vocabPath, 'utf8').split(/\r\n|\r|\n/);
if (lines[lines.length - 1] === '') lines.pop();
const vocab = {};
lines.forEach((t, i) => { vocab[t.trim()] = i; });
const lower = mode === 'lower';
const cfg = {
  version: '1.0', truncation: null, padding: null, added_tokens: [],
  normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true,
                strip_accents: lower, lowercase: lower },
  pre_tokenizer: { type: 'BertPreTokenizer' }, post_processor: null, decoder: null,
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
           max_input_chars_per_word: 200, vocab },
};
const tk = nb.Tokenizer.fromString(JSON.stringify(cfg));
const texts = fs.readFileSync(textsPath, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
(async () => {
  const out = [];
  for (const t of texts) {
    const e = await tk.encode(t, null, { addSpecialTokens: false });
    out.push(e.getIds().join(' '));
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
