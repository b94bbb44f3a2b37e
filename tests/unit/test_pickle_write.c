/* ckpt/pickle_write and ckpt/torch_write: what the writer emits reads back
 * through plait's restricted reader (ckpt/pickle.h, ckpt/torch_file.h) as the
 * values written; integers take Python's encodings byte for byte (the bytes
 * below are pickle.dumps(v, 2) of CPython 3); tensors land in a torch.save
 * archive whose storages start on 64-byte boundaries. torch.load itself reads
 * the exported files in tests/scripts/megatron_export.sh. */
#include "base/alloc.h"
#include "ckpt/pickle_write.h"
#include "ckpt/torch_file.h"
#include "ckpt/torch_write.h"
#include "kernels/kernels.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

/* The pickle of one int, between PROTO 2 and STOP, equals want[0..n). */
static void int_bytes(int64_t v, const char *want, size_t n)
{
    pl_pkw w;
    const uint8_t *d;
    size_t size = 0;
    pl_pkw_init(&w);
    pl_pkw_int(&w, v);
    CHECK_OK(pl_pkw_finish(&w, &d, &size));
    CHECK(size == n + 3 && memcmp(d + 2, want, n) == 0, "%lld: %zu bytes, not Python's", (long long)v,
          size);
    pl_pkw_free(&w);
}

TEST(integers_take_pythons_encodings)
{
    int_bytes(7, "K\x07", 2);
    int_bytes(65535, "M\xff\xff", 3);
    int_bytes(65536, "J\x00\x00\x01\x00", 5);
    int_bytes(-1, "J\xff\xff\xff\xff", 5);
    int_bytes(2147483648LL, "\x8a\x05\x00\x00\x00\x80\x00", 7);
    int_bytes(-2147483649LL, "\x8a\x05\xff\xff\xff\x7f\xff", 7);
    int_bytes(INT64_MIN, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10);
    int_bytes(INT64_MAX, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
}

TEST(values_read_back_through_the_reader)
{
    static const int64_t ints[] = {0, 255, 256, 65535, 65536, -1, INT32_MIN, INT32_MAX,
                                   (int64_t)1 << 31, -((int64_t)1 << 31) - 1, (int64_t)1 << 40,
                                   INT64_MIN, INT64_MAX};
    const int ni = (int)(sizeof ints / sizeof *ints);
    pl_pkw w;
    pl_pkw_init(&w);
    pl_pkw_dict_begin(&w, 0);
    pl_pkw_str(&w, "ints");
    pl_pkw_tuple_begin(&w);
    for (int k = 0; k < ni; k++)
        pl_pkw_int(&w, ints[k]);
    pl_pkw_tuple_end(&w);
    pl_pkw_str(&w, "misc");
    pl_pkw_dict_begin(&w, 1);
    pl_pkw_str(&w, "f");
    pl_pkw_float(&w, 1e-5);
    pl_pkw_str(&w, "s");
    pl_pkw_str(&w, "caf\xc3\xa9");
    pl_pkw_str(&w, "n");
    pl_pkw_none(&w);
    pl_pkw_str(&w, "t");
    pl_pkw_bool(&w, 1);
    pl_pkw_str(&w, "empty");
    pl_pkw_str(&w, "");
    pl_pkw_dict_end(&w);
    pl_pkw_str(&w, "args");
    pl_pkw_namespace_begin(&w);
    pl_pkw_str(&w, "num_layers");
    pl_pkw_int(&w, 12);
    pl_pkw_namespace_end(&w);
    pl_pkw_dict_end(&w);
    const uint8_t *d;
    size_t size;
    CHECK_OK(pl_pkw_finish(&w, &d, &size));
    pl_pickle *p = NULL;
    CHECK_OK(pl_pickle_parse(d, size, "written.pkl", &p));
    const pl_pk *root = p ? pl_pickle_root(p) : NULL;
    const pl_pk *t = root ? pl_pk_get(root, "ints") : NULL, *m = root ? pl_pk_get(root, "misc") : NULL;
    CHECK(t && t->kind == PL_PK_TUPLE && t->n == ni, "ints: a tuple of %d", ni);
    for (int k = 0; t && k < t->n && k < ni; k++)
        CHECK(t->v[k]->kind == PL_PK_INT && t->v[k]->i == ints[k], "ints[%d] %lld read as %lld", k,
              (long long)ints[k], (long long)t->v[k]->i);
    const pl_pk *f = m ? pl_pk_get(m, "f") : NULL, *s = m ? pl_pk_get(m, "s") : NULL;
    CHECK(f && f->kind == PL_PK_FLOAT && f->f == 1e-5, "misc.f is 1e-5 exactly");
    CHECK(s && s->kind == PL_PK_STR && !strcmp(s->s, "caf\xc3\xa9"), "misc.s in UTF-8");
    CHECK(m && pl_pk_get(m, "n")->kind == PL_PK_NONE, "misc.n is None");
    CHECK(m && pl_pk_get(m, "t")->kind == PL_PK_BOOL && pl_pk_get(m, "t")->i == 1, "misc.t is True");
    CHECK(m && pl_pk_get(m, "empty")->kind == PL_PK_STR && pl_pk_get(m, "empty")->n == 0, "''");
    const pl_pk *a = root ? pl_pk_get(root, "args") : NULL;
    CHECK(a && a->kind == PL_PK_OBJECT && !strcmp(a->s, "argparse.Namespace"), "args: a Namespace");
    const pl_pk *nl = a ? pl_pk_get(a, "num_layers") : NULL;
    CHECK(nl && nl->i == 12, "args.num_layers 12");
    pl_pickle_free(p);
    pl_pkw_free(&w);
}

TEST(tensors_archived_read_back_aligned_and_exact)
{
    char path[] = "/tmp/plait_pkw_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    close(fd);
    float a[6] = {1.5f, -2.25f, 3.0e-8f, 65504.0f, -0.0f, 1.0f / 3.0f};
    uint16_t h[3];
    for (int k = 0; k < 3; k++)
        h[k] = pl_ref_bf16_from_f32(a[k] * 7.0f);
    const int64_t sa[2] = {2, 3}, sh[1] = {3};
    pl_pkw w;
    pl_pkw_init(&w);
    pl_pkw_dict_begin(&w, 1);
    pl_pkw_str(&w, "a");
    pl_pkw_tensor(&w, "F32", "0", 2, sa);
    pl_pkw_str(&w, "h");
    pl_pkw_tensor(&w, "BF16", "1", 1, sh);
    pl_pkw_dict_end(&w);
    const uint8_t *d;
    size_t size;
    CHECK_OK(pl_pkw_finish(&w, &d, &size));
    const pl_pt_blob blobs[2] = {{"0", a, sizeof a}, {"1", h, sizeof h}};
    CHECK_OK(pl_pt_write(path, "archive", d, size, blobs, 2));
    pl_pkw_free(&w);
    pl_pt f;
    CHECK_OK(pl_pt_open(&f, path));
    const pl_pk *ta = f.pk ? pl_pk_get(pl_pt_root(&f), "a") : NULL;
    const pl_pk *th = f.pk ? pl_pk_get(pl_pt_root(&f), "h") : NULL;
    CHECK(ta && ta->kind == PL_PK_TENSOR && ta->ndim == 2 && ta->shape[0] == 2 && ta->shape[1] == 3 &&
          ta->stride[0] == 3 && ta->stride[1] == 1, "a: [2, 3], contiguous");
    CHECK(th && th->kind == PL_PK_TENSOR && th->ndim == 1 && !strcmp(th->storage->dtype, "BF16"),
          "h: BF16 [3]");
    float back[6] = {0};
    if (ta) {
        CHECK_OK(pl_pt_tensor_floats(&f, ta, back, 6));
        CHECK(memcmp(back, a, sizeof a) == 0, "a's bits read back");
        CHECK((ta->storage->data - f.map.data) % 64 == 0, "a's storage 64-byte aligned");
    }
    if (th) {
        CHECK_OK(pl_pt_tensor_floats(&f, th, back, 3));
        for (int k = 0; k < 3; k++) {
            const uint32_t u = (uint32_t)h[k] << 16;
            float want;
            memcpy(&want, &u, 4);
            CHECK(back[k] == want, "h[%d] %g read as %g", k, (double)want, (double)back[k]);
        }
        CHECK((th->storage->data - f.map.data) % 64 == 0, "h's storage 64-byte aligned");
    }
    CHECK(pl_zip_find(&f.zip, "archive/version") && pl_zip_find(&f.zip, "archive/byteorder"),
          "version and byteorder entries");
    pl_pt_close(&f);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "no temporary file left");
    unlink(path);
}

TEST(an_unknown_dtype_is_reported_at_finish)
{
    pl_pkw w;
    const uint8_t *d;
    size_t size;
    const int64_t s[1] = {4};
    pl_pkw_init(&w);
    pl_pkw_tensor(&w, "F64", "0", 1, s);
    CHECK(pl_pkw_finish(&w, &d, &size) != PL_OK && strstr(pl_error_msg(), "F32 / BF16"),
          "refused: %s", pl_error_msg());
    pl_pkw_free(&w);
}

TEST(an_allocation_failure_is_reported_and_nothing_leaks)
{
    const int64_t live = pl_alloc_live();
    pl_pkw w;
    const uint8_t *d;
    size_t size;
    pl_alloc_fail_after(0);
    pl_pkw_init(&w);
    pl_pkw_str(&w, "x");
    const pl_status st = pl_pkw_finish(&w, &d, &size);
    pl_alloc_fail_after(-1);
    CHECK(st == PL_ERR_NOMEM, "out of memory reported: %s", pl_error_msg());
    pl_pkw_free(&w);
    CHECK(pl_alloc_live() == live, "%lld allocations leaked", (long long)(pl_alloc_live() - live));
}

int main(void)
{
    RUN(integers_take_pythons_encodings);
    RUN(values_read_back_through_the_reader);
    RUN(tensors_archived_read_back_aligned_and_exact);
    RUN(an_unknown_dtype_is_reported_at_finish);
    RUN(an_allocation_failure_is_reported_and_nothing_leaks);
    return test_summary("pickle_write");
}
