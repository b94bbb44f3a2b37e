/* MegaMolBART's data switches in the manifest (ckpt/manifest.h):
 *   "data": {"megamolbart": {"encoder_augment": true, "encoder_mask": true,
 *            "decoder_augment": true, "decoder_mask": false,
 *            "canonicalize_input": true, "mask_prob": 0.1, "span_lambda": 3}}
 * the keys of MegaMolBART v0.2.0's model.data. Written only by a MegaMolBART
 * run, so other manifests are unchanged; absent, meta->mmb reads as 0. */
#include "ckpt/manifest.h"

static const char *const keys[5] = {"encoder_augment", "encoder_mask", "decoder_augment",
                                    "decoder_mask", "canonicalize_input"};

void pl_ckpt_mmb_write(cJSON *root, const pl_ckpt_meta *m, pl_ckpt_jbuild *b)
{
    if (!m->mmb)
        return;
    cJSON *mmb = pl_ckpt_jobj(pl_ckpt_jobj(root, "data", b), "megamolbart", b);
    for (int i = 0; i < 5 && mmb; i++)
        if (!cJSON_AddBoolToObject(mmb, keys[i], m->mmb_switch[i] != 0))
            b->ok = 0;
    pl_ckpt_jnum(mmb, "mask_prob", m->mmb_mask_prob, b);
    pl_ckpt_jnum(mmb, "span_lambda", m->mmb_span_lambda, b);
}

pl_status pl_ckpt_mmb_read(const cJSON *root, const char *mpath, pl_ckpt_meta *m)
{
    m->mmb = 0;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    const cJSON *mmb = cJSON_GetObjectItemCaseSensitive(data, "megamolbart");
    if (!mmb)
        return PL_OK;
    if (!cJSON_IsObject(mmb))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"data.megamolbart\" is not an object", mpath);
    for (int i = 0; i < 5; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(mmb, keys[i]);
        if (!cJSON_IsBool(v))
            return pl_errorf(PL_ERR_FORMAT, "%s: \"data.megamolbart.%s\" is missing or not true "
                             "or false", mpath, keys[i]);
        m->mmb_switch[i] = cJSON_IsTrue(v);
    }
    pl_status st = pl_ckpt_jfield(mmb, "data.megamolbart", "mask_prob", 0, 1, 0, mpath,
                                  &m->mmb_mask_prob);
    if (!st)
        st = pl_ckpt_jfield(mmb, "data.megamolbart", "span_lambda", 1e-300, 30, 0, mpath,
                            &m->mmb_span_lambda);
    m->mmb = !st;
    return st;
}
