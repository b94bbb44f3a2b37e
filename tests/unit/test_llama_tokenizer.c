/* Llama-family tokenizers: the protobuf reader and the tokenizer.json loader on small
 * files written here (valid ones with hand-checkable ids, malformed ones with the error
 * each must give), the BPE merge order, allocation failures, forks, and a few ids of
 * the real files (data/llama2, data/llama3, data/mistral) that are published or
 * checked elsewhere. Whole-corpus comparisons with Hugging Face tokenizers and
 * python3-sentencepiece are tests/scripts/llama_tokenizers.sh. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "data/tokenizer/bpe.h"
#include "data/tokenizer/sp_internal.h"
#include "data/tokenizer/tokenizer.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>

/* --- a protobuf writer for test models ---------------------------------------------------- */

static void put_varint(pl_bytes *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v)
            c |= 0x80;
        pl_bytes_append(b, &c, 1);
    } while (v);
}

static void put_key(pl_bytes *b, uint32_t field, int wt) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wt); }

static void put_bytes(pl_bytes *b, uint32_t field, const void *p, size_t n)
{
    put_key(b, field, 2);
    put_varint(b, n);
    pl_bytes_append(b, p, n);
}

static void put_int(pl_bytes *b, uint32_t field, int64_t v)
{
    put_key(b, field, 0);
    put_varint(b, (uint64_t)v);
}

static void put_piece(pl_bytes *model, const char *piece, float score, int type)
{
    pl_bytes p = {0};
    uint32_t bits;
    put_bytes(&p, 1, piece, strlen(piece));
    put_key(&p, 2, 5);
    memcpy(&bits, &score, 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
    pl_bytes_append(&p, le, 4);
    if (type != PL_SP_NORMAL)
        put_int(&p, 3, type);
    put_bytes(model, 1, p.data, p.n);
    pl_bytes_free(&p);
}

#define SP "\xE2\x96\x81" /* U+2581 */

/* <unk> <s> </s>, then NORMAL pieces ▁ a b ab ▁a ▁ab. As BPE the scores make "ab" merge
 * before "▁a"; as unigram they make ▁ + ab the best path of "▁ab" (-2 - 4 = -6 against
 * -7 for ▁ab and ▁a + b). model_type, charsmap and extra pieces vary per test. */
static void small_model(pl_bytes *m, int model_type, int charsmap, int unused_piece)
{
    static const struct {
        const char *p;
        float bpe, uni;
        int type;
    } pieces[] = {
        {"<unk>", 0, 0, PL_SP_UNKNOWN}, {"<s>", 0, 0, PL_SP_CONTROL}, {"</s>", 0, 0, PL_SP_CONTROL},
        {SP, -1, -2, 1}, {"a", -1, -3, 1}, {"b", -1, -3, 1}, {"ab", -2, -4, 1}, {SP "a", -3, -4, 1},
        {SP "ab", -4, -7, 1},
    };
    m->n = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        put_piece(m, pieces[i].p, model_type == PL_SP_UNIGRAM ? pieces[i].uni : pieces[i].bpe,
                  pieces[i].type);
    if (unused_piece)
        put_piece(m, "zz", -9, PL_SP_UNUSED);
    pl_bytes t = {0}, n = {0};
    put_int(&t, 3, model_type);
    put_int(&t, 99, 12345); /* an unknown field, skipped */
    put_bytes(m, 2, t.data, t.n);
    put_bytes(&n, 1, "identity", 8);
    if (charsmap)
        put_bytes(&n, 2, "\x01\x02\x03\x04", 4);
    put_int(&n, 4, 0); /* remove_extra_whitespaces: false */
    put_bytes(m, 3, n.data, n.n);
    put_key(m, 7, 5); /* an unknown fixed32 field */
    pl_bytes_append(m, "\0\0\0\0", 4);
    pl_bytes_free(&t);
    pl_bytes_free(&n);
}

static pl_status parse(const pl_bytes *m, pl_sp_model **out)
{
    return pl_sp_model_parse(out, (const uint8_t *)m->data, m->n, "test.model");
}

static int msg_has(const char *needle)
{
    return strstr(pl_error_msg(), needle) != NULL;
}

static const char *tmp_path(const char *name)
{
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 4096, "%s/%s", test_tmpdir(), name);
    return p;
}

static const char *write_file(const char *name, const void *data, size_t n)
{
    const char *p = tmp_path(name);
    pl_status st = pl_file_write_atomic(p, data, n);
    CHECK(st == PL_OK, "writing %s: %s", p, pl_error_msg());
    return p;
}

static void encode_is(pl_tokenizer *t, const char *text, const int32_t *want, int64_t n)
{
    pl_ids ids = {0};
    CHECK_OK(pl_tokenizer_encode(t, text, strlen(text), &ids));
    int same = ids.n == n && (n == 0 || memcmp(ids.data, want, (size_t)n * sizeof *want) == 0);
    CHECK(same, "ids of \"%s\" differ", text);
    if (!same) {
        fprintf(stderr, "    got:");
        for (int64_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %d", ids.data[i]);
        fprintf(stderr, "\n");
    }
    pl_ids_free(&ids);
}

static void decode_is(pl_tokenizer *t, const int32_t *ids, int64_t n, const char *want)
{
    pl_bytes b = {0};
    CHECK_OK(pl_tokenizer_decode(t, ids, n, &b));
    CHECK(b.data && b.n == strlen(want) && memcmp(b.data, want, b.n) == 0, "decoded \"%.*s\", want \"%s\"",
          (int)b.n, b.data ? b.data : "", want);
    pl_bytes_free(&b);
}

/* --- the protobuf reader ---------------------------------------------------------------------- */

TEST(protobuf_reader_reads_pieces_specs_and_skips_unknown_fields)
{
    pl_bytes m = {0};
    pl_sp_model *sp = NULL;
    small_model(&m, PL_SP_BPE, 0, 0);
    CHECK_OK(parse(&m, &sp));
    if (sp) {
        CHECK(sp->pieces.n == 9, "%d pieces", sp->pieces.n);
        CHECK(sp->unk_id == 0 && sp->bos_id == 1 && sp->eos_id == 2 && sp->pad_id == -1,
              "unk %d bos %d eos %d pad %d", sp->unk_id, sp->bos_id, sp->eos_id, sp->pad_id);
        CHECK(sp->score[6] == -2.0f && sp->type[1] == PL_SP_CONTROL, "score/type");
        CHECK(sp->add_dummy_prefix == 1 && sp->remove_extra_whitespaces == 0 && sp->escape_whitespaces == 1,
              "normalizer defaults and fields");
        CHECK(sp->model_type == PL_SP_BPE && !sp->byte_fallback, "trainer fields");
    }
    pl_sp_model_release(sp);
    pl_bytes_free(&m);
}

TEST(protobuf_reader_names_the_byte_offset_of_malformed_input)
{
    pl_bytes m = {0};
    pl_sp_model *sp = NULL;
    small_model(&m, PL_SP_BPE, 0, 0);
    /* No truncation crashes; a cut inside a field is a format error naming the offset (a
     * cut between top-level fields can leave a valid, or an unsupported, model). */
    int offsets = 0;
    for (size_t cut = 1; cut < m.n; cut++) {
        pl_status st = pl_sp_model_parse(&sp, (const uint8_t *)m.data, cut, "test.model");
        CHECK(st == PL_OK || st == PL_ERR_FORMAT || st == PL_ERR_UNSUPPORTED, "cut %zu: %s", cut,
              pl_error_msg());
        offsets += st == PL_ERR_FORMAT && msg_has("byte offset");
        pl_sp_model_release(sp);
        sp = NULL;
    }
    CHECK(offsets > (int)m.n / 2, "%d of %zu cuts named a byte offset", offsets, m.n);
    pl_status st = pl_sp_model_parse(&sp, (const uint8_t *)m.data, 20, "test.model");
    CHECK(st == PL_ERR_FORMAT && msg_has("test.model: length") && msg_has("byte offset"), "%s",
          pl_error_msg());
    static const uint8_t bad_varint[] = {0x0A, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                         0x80, 0x80, 0x80, 0x01};
    st = pl_sp_model_parse(&sp, bad_varint, sizeof bad_varint, "v.model");
    CHECK(st == PL_ERR_FORMAT && msg_has("bad varint at byte offset 1"), "%s", pl_error_msg());
    static const uint8_t wrong_wire[] = {0x08, 0x05}; /* field 1 as a varint */
    st = pl_sp_model_parse(&sp, wrong_wire, sizeof wrong_wire, "w.model");
    CHECK(st == PL_ERR_FORMAT && msg_has("field 1 has wire type varint, expected length-delimited") &&
              msg_has("byte offset 0"), "%s", pl_error_msg());
    static const uint8_t group[] = {0x0A, 0x02, 0x0B, 0x0C}; /* a start-group inside a piece */
    st = pl_sp_model_parse(&sp, group, sizeof group, "g.model");
    CHECK(st == PL_ERR_FORMAT && msg_has("unsupported wire type 3") && msg_has("byte offset 2"), "%s",
          pl_error_msg());
    st = pl_sp_model_parse(&sp, (const uint8_t *)"", 0, "empty.model");
    CHECK(st == PL_ERR_FORMAT && msg_has("not a SentencePiece model"), "%s", pl_error_msg());
    pl_bytes_free(&m);
}

TEST(protobuf_reader_refuses_what_plait_does_not_implement)
{
    pl_bytes m = {0};
    pl_sp_model *sp = NULL;
    small_model(&m, PL_SP_WORD, 0, 0);
    CHECK(parse(&m, &sp) == PL_ERR_UNSUPPORTED && msg_has("model_type WORD is not supported"), "%s",
          pl_error_msg());
    small_model(&m, PL_SP_BPE, 1, 0);
    CHECK(parse(&m, &sp) == PL_ERR_FORMAT && msg_has("precompiled_charsmap of 4 bytes is too short"), "%s",
          pl_error_msg());
    small_model(&m, PL_SP_BPE, 0, 0);
    pl_bytes d = {0};
    put_bytes(&d, 2, "\x01\x02\x03\x04\x05", 5);
    put_bytes(&m, 5, d.data, d.n); /* a denormalizer_spec with a charsmap */
    pl_bytes_free(&d);
    CHECK(parse(&m, &sp) == PL_ERR_UNSUPPORTED && msg_has("denormalizer has a precompiled charsmap"), "%s",
          pl_error_msg());
    small_model(&m, PL_SP_BPE, 0, 1);
    CHECK(parse(&m, &sp) == PL_ERR_UNSUPPORTED && msg_has("UNUSED"), "%s", pl_error_msg());
    m.n = 0; /* no UNKNOWN piece */
    put_piece(&m, "a", 0, PL_SP_NORMAL);
    CHECK(parse(&m, &sp) == PL_ERR_FORMAT && msg_has("unk is not defined"), "%s", pl_error_msg());
    put_piece(&m, "a", 0, PL_SP_NORMAL);
    CHECK(parse(&m, &sp) == PL_ERR_FORMAT && msg_has("piece 1 'a' is already defined"), "%s",
          pl_error_msg());
    m.n = 0;
    put_piece(&m, "<unk>", 0, PL_SP_UNKNOWN);
    put_piece(&m, "<0x41>", 0, PL_SP_BYTE);
    CHECK(parse(&m, &sp) == PL_ERR_FORMAT && msg_has("byte_fallback is false"), "%s", pl_error_msg());
    pl_bytes t = {0};
    put_int(&t, 35, 1); /* byte_fallback */
    put_bytes(&m, 2, t.data, t.n);
    pl_bytes_free(&t);
    put_piece(&m, "<0x-8>", 0, PL_SP_BYTE); /* found by fuzz_sp_model: sscanf took "-8" */
    CHECK(parse(&m, &sp) == PL_ERR_FORMAT && msg_has("byte piece <0x-8> is invalid"), "%s", pl_error_msg());
    pl_bytes_free(&m);
}

/* --- SentencePiece BPE on the small model ---------------------------------------------------- */

TEST(sentencepiece_bpe_merges_the_best_scored_pair_first)
{
    pl_bytes m = {0};
    small_model(&m, PL_SP_BPE, 0, 0);
    const char *path = write_file("small.model", m.data, m.n);
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "Llama2Tokenizer", .tokenizer_model = path}));
    if (t) {
        /* "▁ab": ab (-2) before ▁a (-3), then ▁ab (-4) */
        encode_is(t, "ab", (const int32_t[]){8}, 1);
        /* "▁ba": no piece joins b and a, nor ▁ and b */
        encode_is(t, "ba", (const int32_t[]){3, 5, 4}, 3);
        /* c is no piece and there is no byte fallback: unk */
        encode_is(t, "a c", (const int32_t[]){7, 3, 0}, 3);
        encode_is(t, "", NULL, 0);
        CHECK(t->vocab_size == 9 && t->eod == 2, "vocab_size %lld eod %d", (long long)t->vocab_size,
              t->eod);
        decode_is(t, (const int32_t[]){1, 8, 3, 5, 0, 2}, 6, "ab b \xE2\x81\x87 ");
    }
    pl_tokenizer_free(t);
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "Llama2Tokenizer", .tokenizer_model = path,
                                                        .legacy = 1}));
    if (t)
        encode_is(t, "ab", (const int32_t[]){1, 8}, 2); /* the legacy class prepends <s> */
    pl_tokenizer_free(t);
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SentencePieceTokenizer",
                                                        .tokenizer_model = path, .legacy = 1,
                                                        .vocab_extra_ids = 2}));
    if (t) {
        /* <CLS> 9 <SEP> 10 <EOD> 11 <MASK> 12 <PAD> 13, <s> 1, </s> 2, <extra_id_0..1> 14..15 */
        CHECK(t->vocab_size == 16 && t->eod == 11, "vocab_size %lld eod %d", (long long)t->vocab_size,
              t->eod);
        encode_is(t, "a<EOD>b</s><extra_id_1>", (const int32_t[]){7, 11, 3, 5, 2, 15}, 6);
    }
    pl_tokenizer_free(t);
    pl_bytes_free(&m);
}

TEST(sentencepiece_unigram_takes_the_best_path)
{
    pl_bytes m = {0};
    small_model(&m, PL_SP_UNIGRAM, 0, 0);
    const char *path = write_file("uni.model", m.data, m.n);
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "SentencePieceTokenizer",
                                                        .tokenizer_model = path}));
    if (t) {
        encode_is(t, "ab", (const int32_t[]){3, 6}, 2); /* ▁ + ab: -6 */
        /* c is unknown: min score (-7) - 10; a run of unknowns is one <unk> */
        encode_is(t, "ac", (const int32_t[]){7, 0}, 2);
        encode_is(t, "acc", (const int32_t[]){7, 0}, 2);
        encode_is(t, "acc b", (const int32_t[]){7, 0, 3, 5}, 4);
    }
    pl_tokenizer_free(t);
    pl_bytes_free(&m);
}

TEST(bpe_merge_is_one_merge_at_a_time_by_rank_then_position)
{
    /* ids 0..3 = x y z w; pairs: (x,y)->4 rank 1, (y,z)->5 rank 0, (4,z)->6 rank 2,
     * (z,w)->7 rank 3. y z goes first (rank 0) -> x 5 w; the queued (x,y) and (z,w) are
     * stale and no pair joins x 5 or 5 w: x 5 w. */
    pl_bpe_table t;
    pl_bpe_scratch s = {0};
    CHECK_OK(pl_bpe_table_init(&t, 4));
    CHECK_OK(pl_bpe_table_put(&t, 0, 1, 1, 4, 0));
    CHECK_OK(pl_bpe_table_put(&t, 1, 2, 0, 5, 0));
    CHECK_OK(pl_bpe_table_put(&t, 4, 2, 2, 6, 0));
    CHECK_OK(pl_bpe_table_put(&t, 2, 3, 3, 7, 0));
    int32_t a[] = {0, 1, 2, 3};
    int64_t n = 4;
    CHECK_OK(pl_bpe_merge(&t, a, &n, &s));
    CHECK(n == 3 && a[0] == 0 && a[1] == 5 && a[2] == 3, "n=%lld %d %d %d", (long long)n, a[0], a[1], a[2]);
    /* A merge that makes a pair ranked below the current one: (a,a)->A rank 1, (A,a)->B
     * rank 0, on a a a a. One merge at a time (tokenizers, SentencePiece): A a a, then
     * A a (rank 0) -> B a. GPT-2's bpe() would merge both a a pairs first: A A. */
    pl_bpe_table u;
    CHECK_OK(pl_bpe_table_init(&u, 2));
    CHECK_OK(pl_bpe_table_put(&u, 0, 0, 1, 1, 0));
    CHECK_OK(pl_bpe_table_put(&u, 1, 0, 0, 2, 0));
    int32_t b[] = {0, 0, 0, 0};
    n = 4;
    CHECK_OK(pl_bpe_merge(&u, b, &n, &s));
    /* a a a a: (0,1)->A a a; A a (rank 0) -> B a; B a has no merge; result B a */
    CHECK(n == 2 && b[0] == 2 && b[1] == 0, "n=%lld %d %d", (long long)n, b[0], b[1]);
    /* a later duplicate takes the later rank; keep_lower keeps the lower */
    CHECK_OK(pl_bpe_table_put(&u, 0, 0, 7, 1, 1));
    CHECK(pl_bpe_table_find(&u, 0, 0)->rank == 1, "keep_lower");
    CHECK_OK(pl_bpe_table_put(&u, 0, 0, 7, 1, 0));
    CHECK(pl_bpe_table_find(&u, 0, 0)->rank == 7, "last wins");
    CHECK(pl_bpe_table_find(&u, -1, 0) == NULL, "negative ids never merge");
    pl_bpe_table_free(&t);
    pl_bpe_table_free(&u);
    pl_bpe_scratch_free(&s);
}

/* --- tokenizer.json ---------------------------------------------------------------------------- */

/* A tokenizer.json in the Llama 2 form with a tiny vocabulary: ▁ a b ab ▁a ▁ab <unk> <s>
 * </s> and byte pieces <0x63> (c) only. `extra` is spliced in as further top-level keys
 * (they override the defaults: cJSON takes the first duplicate, so extra comes first). */
static const char *write_json(const char *name, const char *extra)
{
    char buf[8192];
    snprintf(buf, sizeof buf,
             "{%s\"version\": \"1.0\", \"truncation\": null, \"padding\": null,"
             "\"added_tokens\": ["
             "{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": false},"
             "{\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false},"
             "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false},"
             "{\"id\": 10, \"content\": \"[X]\", \"special\": false, \"normalized\": false,"
             " \"lstrip\": true, \"rstrip\": true},"
             "{\"id\": 11, \"content\": \"[W]\", \"special\": false, \"normalized\": false,"
             " \"single_word\": true}],"
             "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": ["
             "{\"type\": \"Prepend\", \"prepend\": \"" SP "\"},"
             "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP "\"}]},"
             "\"pre_tokenizer\": null,"
             "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
             "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
             "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [],"
             "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},"
             "\"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
             "{\"type\": \"Replace\", \"pattern\": {\"String\": \"" SP "\"}, \"content\": \" \"},"
             "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
             "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
             "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\","
             " \"fuse_unk\": true, \"byte_fallback\": true,"
             " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"" SP "\": 3, \"a\": 4, \"b\": 5,"
             " \"ab\": 6, \"" SP "a\": 7, \"" SP "ab\": 8, \"<0x63>\": 9},"
             " \"merges\": [\"a b\", [\"" SP "\", \"ab\"], \"" SP " a\"]}}",
             extra);
    return write_file(name, buf, strlen(buf));
}

static pl_tokenizer *open_hf(const char *path)
{
    pl_tokenizer *t = NULL;
    pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "HuggingFaceTokenizer",
                                                              .tokenizer_model = path});
    CHECK(st == PL_OK, "open %s: %s", path, pl_error_msg());
    return t;
}

TEST(tokenizer_json_pipeline_on_a_tiny_vocabulary)
{
    pl_tokenizer *t = open_hf(write_json("tiny.json", ""));
    if (!t)
        return;
    /* "ab" -> "▁ab"; merges by rank: a b (0), ▁ ab (1) -> ▁ab */
    encode_is(t, "ab", (const int32_t[]){1, 8}, 2);
    /* c has a byte piece; d has none: unk, and unk runs fuse (fuse_unk) */
    encode_is(t, "acdd", (const int32_t[]){1, 7, 9, 0}, 4);
    /* <s> in the text is the special token (normalized false), cut before normalizing:
     * "a<s>b" -> "▁a", <s>, "▁b" (each segment gets its own ▁) */
    encode_is(t, "a<s>b", (const int32_t[]){1, 7, 1, 3, 5}, 5);
    /* [X] takes the spaces around it (lstrip, rstrip); [W] only as a single word */
    encode_is(t, "a  [X]  b", (const int32_t[]){1, 7, 10, 3, 5}, 5);
    /* "a " -> "▁a▁", " b" -> "▁▁b": Prepend then Replace, per segment */
    encode_is(t, "a [W] b", (const int32_t[]){1, 7, 3, 11, 3, 3, 5}, 7);
    encode_is(t, "a[W]", (const int32_t[]){1, 7, 0}, 3); /* not a single word: text, unk */
    encode_is(t, "", (const int32_t[]){1}, 1);         /* the template still adds <s> */
    CHECK(t->vocab_size == 12 && t->eod == 2, "vocab_size %lld (10 + [X] + [W]) eod %d",
          (long long)t->vocab_size, t->eod);
    decode_is(t, (const int32_t[]){1, 8, 3, 5, 9}, 5, "<s> ab bc");
    decode_is(t, (const int32_t[]){8, 9, 9}, 3, "abcc");
    pl_bytes b = {0};
    CHECK(pl_tokenizer_decode(t, (const int32_t[]){12}, 1, &b) == PL_ERR_ARG && msg_has("token id 12"),
          "%s", pl_error_msg());
    pl_bytes_free(&b);
    CHECK(pl_tokenizer_token_id(t, "[X]") == 10 && pl_tokenizer_token_id(t, SP "ab") == 8, "token_id");
    pl_tokenizer_free(t);
}

TEST(tokenizer_json_unsupported_components_are_named)
{
    static const struct {
        const char *extra, *msg;
    } cases[] = {
        {"\"normalizer\": {\"type\": \"NFKC\"},", "normalizer of type 'NFKC' is not supported"},
        {"\"pre_tokenizer\": {\"type\": \"Whitespace\"},", "pre_tokenizer of type 'Whitespace'"},
        {"\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, \"behavior\": "
         "\"Isolated\"},", "regex \"\\w+\" is not one plait implements"},
        {"\"decoder\": {\"type\": \"WordPiece\"},", "decoder of type 'WordPiece'"},
        {"\"post_processor\": {\"type\": \"RobertaProcessing\"},", "post_processor of type 'RobertaProcessing'"},
        {"\"model\": {\"type\": \"Unigram\", \"vocab\": []},", "model of type 'Unigram'"},
        {"\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}, \"merges\": []},", "dropout"},
        {"\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2}, \"merges\": []},",
         "ids must be the integers 0..1"},
        {"\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]},",
         "model.merges[0]: merged token \"ab\" is not in the vocabulary"},
        {"\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a  a\"]},",
         "model.merges[0]: \"a  a\" is not two tokens"},
        {"\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \"x\"},",
         "Replace with a Regex pattern is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.json", i);
        const char *path = write_json(name, cases[i].extra);
        pl_tokenizer *t = NULL;
        pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "HuggingFaceTokenizer",
                                                                  .tokenizer_model = path});
        CHECK(st != PL_OK && msg_has(path) && msg_has(cases[i].msg), "case %zu: %s", i, pl_error_msg());
        pl_tokenizer_free(t);
    }
    const char *bad = write_file("broken.json", "{\"model\": ", 10);
    pl_tokenizer *t = NULL;
    CHECK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "HuggingFaceTokenizer", .tokenizer_model = bad}) ==
              PL_ERR_FORMAT && msg_has("malformed JSON at byte"), "%s", pl_error_msg());
    CHECK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "HuggingFaceTokenizer"}) == PL_ERR_ARG &&
              msg_has("--tokenizer-model is required"), "%s", pl_error_msg());
    CHECK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = "HuggingFaceTokenizer",
                                                     .tokenizer_model = test_tmpdir()}) != PL_OK &&
              msg_has("has no tokenizer.json"), "%s", pl_error_msg());
}

/* --- allocation failures and forks ------------------------------------------------------------ */

TEST(allocation_failures_come_back_cleanly)
{
    pl_bytes m = {0};
    small_model(&m, PL_SP_BPE, 0, 0);
    /* the tokenizer.json in a directory of its own, with a tokenizer_config.json */
    CHECK_OK(pl_mkdirs(tmp_path("cfg")));
    char json[4096];
    snprintf(json, sizeof json, "%s", write_json("cfg/tokenizer.json", ""));
    write_file("cfg/tokenizer_config.json", "{\"eos_token\": \"</s>\"}", 21);
    const char *bpe = write_file("alloc.model", m.data, m.n);
    small_model(&m, PL_SP_UNIGRAM, 0, 0);
    const char *paths[3] = {bpe, write_file("alloc-uni.model", m.data, m.n), tmp_path("cfg")};
    (void)json;
    const char *types[3] = {"Llama2Tokenizer", "SentencePieceTokenizer", "HuggingFaceTokenizer"};
    pl_bytes_free(&m);
    for (int k = 0; k < 3; k++) {
        int64_t live0 = pl_alloc_live();
        int n;
        for (n = 0; n < 5000; n++) {
            pl_tokenizer *t = NULL, *f = NULL;
            pl_ids ids = {0};
            pl_bytes s = {0};
            pl_alloc_fail_after(n);
            pl_status st = pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = types[k],
                                                                      .tokenizer_model = paths[k]});
            if (st == PL_OK)
                st = pl_tokenizer_fork(t, &f);
            if (st == PL_OK)
                st = pl_tokenizer_encode(f, "a b ab<s>c", 10, &ids);
            if (st == PL_OK)
                st = pl_tokenizer_decode(f, ids.data, ids.n, &s);
            pl_alloc_fail_after(-1);
            pl_tokenizer_free(f);
            pl_tokenizer_free(t);
            pl_ids_free(&ids);
            pl_bytes_free(&s);
            CHECK(pl_alloc_live() == live0, "%s n=%d: %lld blocks leaked", types[k], n,
                  (long long)(pl_alloc_live() - live0));
            if (st == PL_OK)
                break;
            CHECK(st == PL_ERR_NOMEM, "%s n=%d: %s: %s", types[k], n, pl_status_str(st), pl_error_msg());
            if (st != PL_ERR_NOMEM)
                break;
        }
        CHECK(n > 5 && n < 5000, "%s: succeeded after %d allocations", types[k], n);
    }
}

/* --- the real files ------------------------------------------------------------------------------ */

static pl_tokenizer *open_real(const char *type, const char *rel, int legacy)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_datadir(), rel);
    if (!pl_file_exists(path)) {
        CHECK(0, "missing %s (run scripts/setup.sh)", path);
        return NULL;
    }
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_tokenizer_open(&t, &(pl_tokenizer_spec){.type = type, .tokenizer_model = path,
                                                        .legacy = legacy}));
    return t;
}

typedef struct fork_job {
    pl_tokenizer *t;
    const char *text;
    pl_ids ids;
    pl_status st;
} fork_job;

static void *encode_job(void *arg)
{
    fork_job *j = arg;
    j->st = pl_tokenizer_encode(j->t, j->text, strlen(j->text), &j->ids);
    return NULL;
}

TEST(real_files_give_published_ids_and_forks_agree)
{
    /* Meta's Llama 2: "Hello world" -> [15043, 3186] (data-sources.md (c), with <s> 1) */
    pl_tokenizer *t = open_real("Llama2Tokenizer", "llama2/tokenizer.model", 0);
    if (t) {
        encode_is(t, "Hello world", (const int32_t[]){15043, 3186}, 2);
        CHECK(t->vocab_size == 32000 && t->eod == 2, "Llama 2: vocab %lld eod %d", (long long)t->vocab_size,
              t->eod);
        decode_is(t, (const int32_t[]){1, 15043, 3186, 2}, 4, "Hello world");
    }
    pl_tokenizer_free(t);
    t = open_real("Llama2Tokenizer", "llama2/tokenizer.model", 1);
    if (t)
        encode_is(t, "Hello world", (const int32_t[]){1, 15043, 3186}, 3);
    pl_tokenizer_free(t);
    t = open_real("SentencePieceTokenizer", "llama2/tokenizer.model", 1);
    if (t) /* <CLS> <SEP> <EOD> <MASK> <PAD> are new: 32000..32004; <s>, </s> are pieces */
        CHECK(t->vocab_size == 32005 && t->eod == 32002, "legacy SentencePieceTokenizer: vocab %lld eod %d",
              (long long)t->vocab_size, t->eod);
    pl_tokenizer_free(t);
    /* Meta's Llama 3: "Hello world" -> [9906, 1917]; eod <|end_of_text|> */
    t = open_real("HuggingFaceTokenizer", "llama3", 0);
    if (t) {
        encode_is(t, "Hello world", (const int32_t[]){9906, 1917}, 2);
        CHECK(t->vocab_size == 128256 && t->eod == 128001, "Llama 3: vocab %lld eod %d",
              (long long)t->vocab_size, t->eod);
        const char *text = "The quick brown fox jumps over the lazy dog. 日本語 🤗 <|begin_of_text|>";
        fork_job jobs[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            jobs[k] = (fork_job){NULL, text, {0}, PL_OK};
            CHECK_OK(pl_tokenizer_fork(t, &jobs[k].t));
        }
        for (int k = 0; k < 2; k++)
            pthread_create(&th[k], NULL, encode_job, &jobs[k]);
        for (int k = 0; k < 2; k++)
            pthread_join(th[k], NULL);
        pl_ids base = {0};
        CHECK_OK(pl_tokenizer_encode(t, text, strlen(text), &base));
        for (int k = 0; k < 2; k++) {
            CHECK(jobs[k].st == PL_OK && jobs[k].ids.n == base.n &&
                      memcmp(jobs[k].ids.data, base.data, (size_t)base.n * 4) == 0, "fork %d differs", k);
            CHECK(jobs[k].ids.data[jobs[k].ids.n - 1] == 128000, "<|begin_of_text|> in text is the token");
            pl_ids_free(&jobs[k].ids);
            pl_tokenizer_free(jobs[k].t);
        }
        pl_ids_free(&base);
    }
    pl_tokenizer_free(t);
}

int main(void)
{
    RUN(protobuf_reader_reads_pieces_specs_and_skips_unknown_fields);
    RUN(protobuf_reader_names_the_byte_offset_of_malformed_input);
    RUN(protobuf_reader_refuses_what_plait_does_not_implement);
    RUN(sentencepiece_bpe_merges_the_best_scored_pair_first);
    RUN(sentencepiece_unigram_takes_the_best_path);
    RUN(bpe_merge_is_one_merge_at_a_time_by_rank_then_position);
    RUN(tokenizer_json_pipeline_on_a_tiny_vocabulary);
    RUN(tokenizer_json_unsupported_components_are_named);
    RUN(allocation_failures_come_back_cleanly);
    RUN(real_files_give_published_ids_and_forks_agree);
    return test_summary("llama_tokenizer");
}
