/* ckpt/pickle: the restricted reader, opcode by opcode, on byte strings written
 * here from Python's pickle format (Lib/pickletools.py): what it builds from the
 * subset torch.save uses, and what it refuses, with the message naming why.
 * torch.save's own files are checked in tests/scripts/torch_import.sh. */
#include "base/alloc.h"
#include "ckpt/pickle.h"
#include "test.h"

/* Parses n bytes; *ok whether it succeeded. The caller frees the document. */
static pl_pickle *parse(const char *bytes, size_t n, int *ok)
{
    pl_pickle *p = NULL;
    *ok = pl_pickle_parse((const uint8_t *)bytes, n, "test.pkl", &p) == PL_OK;
    return p;
}

/* The parse fails and the message holds want. */
static void refused(const char *bytes, size_t n, const char *want)
{
    int ok;
    pl_pickle *p = parse(bytes, n, &ok);
    CHECK(!ok, "accepted, expected a refusal naming \"%s\"", want);
    CHECK(ok || strstr(pl_error_msg(), want), "message \"%s\" lacks \"%s\"", pl_error_msg(), want);
    pl_pickle_free(p);
}

TEST(numbers_strings_and_containers_are_built)
{
    /* PROTO 2, {'a': [1, -1, 300, 2**40, -2**63, 1.5, 'x', None, True], 'b': (1, 2)} */
    static const char b[] =
        "\x80\x02}q\x00(X\x01\x00\x00\x00" "aq\x01]q\x02(K\x01J\xff\xff\xff\xffM,\x01"
        "\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
        "G?\xf8\x00\x00\x00\x00\x00\x00X\x01\x00\x00\x00xN\x88" "eX\x01\x00\x00\x00" "bK\x01K\x02\x86u.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "%s", pl_error_msg());
    if (ok) {
        const pl_pk *a = pl_pk_get(pl_pickle_root(p), "a"), *t = pl_pk_get(pl_pickle_root(p), "b");
        CHECK(a && a->kind == PL_PK_LIST && a->n == 9, "a is a list of 9");
        if (a && a->n == 9) {
            CHECK(a->v[0]->i == 1 && a->v[1]->i == -1 && a->v[2]->i == 300, "small ints");
            CHECK(a->v[3]->i == (int64_t)1 << 40, "LONG1 2^40: %lld", (long long)a->v[3]->i);
            CHECK(a->v[4]->i == INT64_MIN, "LONG1 -2^63: %lld", (long long)a->v[4]->i);
            CHECK(a->v[5]->kind == PL_PK_FLOAT && a->v[5]->f == 1.5, "BINFLOAT 1.5");
            CHECK(a->v[6]->kind == PL_PK_STR && !strcmp(a->v[6]->s, "x"), "'x'");
            CHECK(a->v[7]->kind == PL_PK_NONE && a->v[8]->kind == PL_PK_BOOL && a->v[8]->i, "None True");
        }
        CHECK(t && t->kind == PL_PK_TUPLE && t->n == 2 && t->v[1]->i == 2, "b is (1, 2)");
    }
    pl_pickle_free(p);
}

TEST(a_namespace_is_data_read_by_attribute)
{
    /* argparse.Namespace(num_layers=2) as protocol 2 writes it: GLOBAL, EMPTY_TUPLE, NEWOBJ, BUILD */
    static const char b[] = "\x80\x02" "cargparse\nNamespace\n)\x81}X\x0a\x00\x00\x00num_layersK\x02sb.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "%s", pl_error_msg());
    const pl_pk *v = ok ? pl_pk_get(pl_pickle_root(p), "num_layers") : NULL;
    CHECK(v && v->kind == PL_PK_INT && v->i == 2, "num_layers 2");
    pl_pickle_free(p);
}

TEST(a_tensor_is_a_view_of_its_storage)
{
    /* _rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', 6), 1, (2, 2), (2, 1), False, OrderedDict()) */
    static const char b[] =
        "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage"
        "ctorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x01K\x02K\x02\x86"
        "K\x02K\x01\x86\x89" "ccollections\nOrderedDict\n)RtR.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "%s", pl_error_msg());
    const pl_pk *t = ok ? pl_pickle_root(p) : NULL;
    CHECK(t && t->kind == PL_PK_TENSOR && t->ndim == 2 && t->shape[0] == 2 && t->stride[0] == 2 &&
              t->i == 1 && !strcmp(t->dtype, "F32") && t->storage->i == 6,
          "a 2 x 2 F32 view at offset 1 of 6 elements");
    pl_pickle_free(p);
}

TEST(a_view_past_its_storage_is_refused)
{
    /* the same view at offset 3: its last element, 3 + 2 + 1 = 6, is past 6 elements */
    static const char b[] =
        "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage"
        "ctorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x03K\x02K\x02\x86"
        "K\x02K\x01\x86\x89" "ccollections\nOrderedDict\n)RtR.";
    refused(b, sizeof b - 1, "reaches element 6 of storage 0, which holds 6");
}

TEST(any_other_global_is_refused_by_name)
{
    static const char sys[] = "\x80\x02" "cposix\nsystem\nX\x02\x00\x00\x00lsq\x00\x85R.";
    refused(sys, sizeof sys - 1, "the global posix.system, which plait refuses");
    static const char ev[] = "\x80\x02" "cbuiltins\neval\n.";
    refused(ev, sizeof ev - 1, "builtins.eval");
    /* an allowed class called in a way that would run code is refused too */
    static const char ns[] = "\x80\x02" "cargparse\nNamespace\n)R.";
    refused(ns, sizeof ns - 1, "calls argparse.Namespace");
}

#define REFUSED(lit, want) refused(lit, sizeof lit - 1, want)

TEST(deepspeeds_enum_member_and_torch_size_are_named_not_run)
{
    /* PROTO 2, getattr(deepspeed.runtime.zero.config.ZeroStageEnum, 'gradients') (an enum
     * member as Python >= 3.12 pickles it), then torch.Size((2, 3)), in a tuple */
    static const char b[] = "\x80\x02" "c__builtin__\ngetattr\n" "cdeepspeed.runtime.zero.config\n"
                            "ZeroStageEnum\n" "X\x09\x00\x00\x00gradients\x86R"
                            "ctorch\nSize\nK\x02K\x03\x86\x85R\x86.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "%s", pl_error_msg());
    const pl_pk *r = ok ? pl_pickle_root(p) : NULL;
    CHECK(!ok || (r->kind == PL_PK_TUPLE && r->n == 2), "a pair");
    if (ok && r->n == 2) {
        CHECK(r->v[0]->kind == PL_PK_OBJECT &&
                  !strcmp(r->v[0]->s, "deepspeed.runtime.zero.config.ZeroStageEnum.gradients"),
              "the member is named: %s", r->v[0]->s ? r->v[0]->s : "(none)");
        const pl_pk *sz = r->v[1];
        CHECK(sz->kind == PL_PK_OBJECT && !strcmp(sz->s, "torch.Size") && sz->v[0]->n == 1 &&
                  sz->v[0]->v[0]->n == 2 && sz->v[0]->v[0]->v[1]->i == 3,
              "torch.Size((2, 3)) kept as data");
    }
    pl_pickle_free(p);
    /* getattr(1, 'x'), and getattr of a global off the allow list */
    static const char n[] = "\x80\x02" "c__builtin__\ngetattr\n" "K\x01X\x01\x00\x00\x00x\x86R.";
    refused(n, sizeof n - 1, "getattr of something other than an allowed global and a name");
    static const char o[] = "\x80\x02" "c__builtin__\ngetattr\n" "cos\nsystem\n" "X\x01\x00\x00\x00x\x86R.";
    refused(o, sizeof o - 1, "the global os.system, which plait refuses");
}

TEST(malformed_streams_are_refused_with_the_reason)
{
    REFUSED("\x80\x02]q\x00", "without STOP (truncated)");
    REFUSED("\x80\x02h\x05.", "GET of a memo entry never stored");
    REFUSED("\x80\x02(K\x01K\x02K\x03" "d.", "a key but no value");
    REFUSED("\x80\x02I1\n.", "opcode 0x49 ('I')");
    REFUSED("\x80\x02K\x01K\x02.", "STOP with other than one value");
    REFUSED("\x80\x02X\xff\xff\x00\x00" "ab.", "runs past the end");
    REFUSED("\x80\x09.", "an unknown protocol");
    REFUSED("\x80\x02]K\x01s.", "APPEND or SETITEM without a container and items");
}

TEST(shared_and_cyclic_nodes_are_marked_once)
{
    /* l = []; l.append(l): EMPTY_LIST, BINPUT 0, BINGET 0, APPEND */
    static const char b[] = "\x80\x02]q\x00h\x00" "a.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "a self-holding list is data: %s", ok ? "" : pl_error_msg());
    if (ok) {
        const pl_pk *l = pl_pickle_root(p);
        const uint64_t s = pl_pickle_stamp(p);
        CHECK(pl_pk_enter(l, s) == 1 && pl_pk_enter(l->v[0], s) == -1, "the cycle is seen");
        pl_pk_leave(l, s);
        CHECK(pl_pk_enter(l, s) == 0, "a node walked once is skipped after");
        CHECK(pl_pk_enter(l, pl_pickle_stamp(p)) == 1, "a new walk starts afresh");
    }
    pl_pickle_free(p);
}

TEST(a_torch_dtype_is_a_name_never_called)
{
    /* [torch.float32] (args.params_dtype, DCP's TensorProperties.dtype): a name, kept as data */
    static const char b[] = "\x80\x02]ctorch\nfloat32\na.";
    int ok;
    pl_pickle *p = parse(b, sizeof b - 1, &ok);
    CHECK(ok, "%s", pl_error_msg());
    const pl_pk *l = ok ? pl_pickle_root(p) : NULL;
    CHECK(l && l->kind == PL_PK_LIST && l->n == 1 && l->v[0]->kind == PL_PK_GLOBAL &&
              !strcmp(l->v[0]->s, "torch.float32"), "[torch.float32] read as a name");
    pl_pickle_free(p);
    /* torch.float32("x"): calling it is refused */
    static const char c[] = "\x80\x02" "ctorch\nfloat32\nX\x01\x00\x00\x00" "x\x85R.";
    refused(c, sizeof c - 1, "calls torch.float32, which plait does not build");
}

int main(void)
{
    RUN(numbers_strings_and_containers_are_built);
    RUN(a_namespace_is_data_read_by_attribute);
    RUN(a_tensor_is_a_view_of_its_storage);
    RUN(a_view_past_its_storage_is_refused);
    RUN(any_other_global_is_refused_by_name);
    RUN(deepspeeds_enum_member_and_torch_size_are_named_not_run);
    RUN(malformed_streams_are_refused_with_the_reason);
    RUN(shared_and_cyclic_nodes_are_marked_once);
    RUN(a_torch_dtype_is_a_name_never_called);
    return test_summary("pickle");
}
