/*
 * arch_ct2.c - CTranslate2's Transformer (python/ctranslate2/specs/
 * transformer_spec.py, attention_spec.py, common_spec.py): the variable
 * names of model.bin by role. Its switches come from model.bin itself
 * (ct2_config.c), so both are left to the configuration.
 *
 * Self-attention keeps Q, K and V in one matrix, linear_0 (3d, d): parts
 * 0, 1, 2 of 3; the encoder-decoder attention keeps Q in linear_0 and K, V
 * in linear_1 (2d, d): parts 0 and 1 of 2; the output projections are the
 * last linear. Layer norms are gamma and beta.
 */
#include <stdio.h>
#include <string.h>

#include "arch.h"

static int ref(td_tref *t, const char *name, int part, int parts)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->part = part;
    t->parts = parts;
    return 1;
}

/* The layer roles: the variable under side/layer_N/ and its part. */
static const struct {
    const char *suffix;
    int part, parts;
} k_layer[TD_R_COUNT] = {
    [TD_R_SA_Q_W] = {"self_attention/linear_0/weight", 0, 3},
    [TD_R_SA_Q_B] = {"self_attention/linear_0/bias", 0, 3},
    [TD_R_SA_K_W] = {"self_attention/linear_0/weight", 1, 3},
    [TD_R_SA_K_B] = {"self_attention/linear_0/bias", 1, 3},
    [TD_R_SA_V_W] = {"self_attention/linear_0/weight", 2, 3},
    [TD_R_SA_V_B] = {"self_attention/linear_0/bias", 2, 3},
    [TD_R_SA_O_W] = {"self_attention/linear_1/weight", 0, 1},
    [TD_R_SA_O_B] = {"self_attention/linear_1/bias", 0, 1},
    [TD_R_SA_LN_W] = {"self_attention/layer_norm/gamma", 0, 1},
    [TD_R_SA_LN_B] = {"self_attention/layer_norm/beta", 0, 1},
    [TD_R_CA_Q_W] = {"attention/linear_0/weight", 0, 1},
    [TD_R_CA_Q_B] = {"attention/linear_0/bias", 0, 1},
    [TD_R_CA_K_W] = {"attention/linear_1/weight", 0, 2},
    [TD_R_CA_K_B] = {"attention/linear_1/bias", 0, 2},
    [TD_R_CA_V_W] = {"attention/linear_1/weight", 1, 2},
    [TD_R_CA_V_B] = {"attention/linear_1/bias", 1, 2},
    [TD_R_CA_O_W] = {"attention/linear_2/weight", 0, 1},
    [TD_R_CA_O_B] = {"attention/linear_2/bias", 0, 1},
    [TD_R_CA_LN_W] = {"attention/layer_norm/gamma", 0, 1},
    [TD_R_CA_LN_B] = {"attention/layer_norm/beta", 0, 1},
    [TD_R_FC1_W] = {"ffn/linear_0/weight", 0, 1},
    [TD_R_FC1_B] = {"ffn/linear_0/bias", 0, 1},
    [TD_R_FC2_W] = {"ffn/linear_1/weight", 0, 1},
    [TD_R_FC2_B] = {"ffn/linear_1/bias", 0, 1},
    [TD_R_FFN_LN_W] = {"ffn/layer_norm/gamma", 0, 1},
    [TD_R_FFN_LN_B] = {"ffn/layer_norm/beta", 0, 1},
};

static int ct2_names(const td_config *c, td_role r, int dec, int layer,
                     td_tref out[TD_ARCH_CANDIDATES])
{
    int n = 0;
    switch (r) {
    case TD_R_ENC_EMBED:
        /* shared (an alias in the file): the decoder's name, so that one
         * upload serves both */
        if (c->share_encoder_decoder_embeddings)
            n += ref(&out[n], "decoder/embeddings/weight", 0, 1);
        n += ref(&out[n], "encoder/embeddings_0/weight", 0, 1);
        n += ref(&out[n], "encoder/embeddings/weight", 0, 1);
        return n;
    case TD_R_DEC_EMBED: return ref(out, "decoder/embeddings/weight", 0, 1);
    case TD_R_LM_HEAD:
        if (c->tie_word_embeddings)
            n += ref(&out[n], "decoder/embeddings/weight", 0, 1);
        n += ref(&out[n], "decoder/projection/weight", 0, 1);
        return n;
    case TD_R_LM_BIAS: return ref(out, "decoder/projection/bias", 0, 1);
    case TD_R_ENC_POS: return ref(out, "encoder/position_encodings/encodings", 0, 1);
    case TD_R_DEC_POS: return ref(out, "decoder/position_encodings/encodings", 0, 1);
    case TD_R_ENC_NORM_W: return ref(out, "encoder/layer_norm/gamma", 0, 1);
    case TD_R_ENC_NORM_B: return ref(out, "encoder/layer_norm/beta", 0, 1);
    case TD_R_DEC_NORM_W: return ref(out, "decoder/layer_norm/gamma", 0, 1);
    case TD_R_DEC_NORM_B: return ref(out, "decoder/layer_norm/beta", 0, 1);
    default: break;
    }
    if ((int)r < 0 || r >= TD_R_COUNT || !k_layer[r].suffix)
        return 0;
    char name[224];
    snprintf(name, sizeof name, "%s/layer_%d/%s", dec ? "decoder" : "encoder", layer,
             k_layer[r].suffix);
    return ref(out, name, k_layer[r].part, k_layer[r].parts);
}

const td_arch td_arch_ct2 = {
    .model_type = "ctranslate2",
    .pre_norm = TD_SWITCH_CONFIG,
    .position_encoding = TD_SWITCH_CONFIG,
    .names = ct2_names,
};
