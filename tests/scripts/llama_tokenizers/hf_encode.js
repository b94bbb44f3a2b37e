// Reference for the HuggingFaceTokenizer: Hugging Face tokenizers (the Rust crate,
// 0.22.2) through the prebuilt Node binding of npm
// @anush008/tokenizers-linux-x64-gnu@0.6.0, on a tokenizer.json as it is.
//   node hf_encode.js BINDING.node TOKENIZER.json lines|roundtrip|info TEXTS.jsonl
// lines: the ids of each text (add_special_tokens = true, as transformers'
// tokenizer(text) and so Megatron), space-separated, a line each.
// roundtrip: decode(encode(text)) as JSON strings, a line each (skip_special_tokens
// = false, as Megatron's detokenize).
// info: vocab size with added tokens (len(tokenizer)).
'use strict';
const fs = require('fs');
const [binding, tokPath, mode, textsPath] = process.argv.slice(2);
const nb = require(binding);
const tk = nb.Tokenizer.fromFile(tokPath);
(async () => {
  if (mode === 'info') {
    process.stdout.write(`vocab_size ${tk.getVocabSize(true)}\n`);
    return;
  }
  const texts = fs.readFileSync(textsPath, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  const out = [];
  for (const t of texts) {
    const e = await tk.encode(t, null, { addSpecialTokens: true });
    if (mode === 'roundtrip') out.push(JSON.stringify(await tk.decode(e.getIds(), false)));
    else out.push(e.getIds().join(' '));
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
