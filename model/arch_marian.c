/*
 * arch_marian.c - MarianMTModel (transformers' port of Marian NMT): post-norm
 * unless config.json says normalize_before, the position encoding its keys
 * choose (sinusoidal by default), transformers' state-dict names. Also the
 * BART-family names other rows reuse (td_arch_hf_names).
 */
#include <stdio.h>
#include <string.h>

#include "arch.h"

static int one(td_tref *t, const char *name)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->part = 0;
    t->parts = 1;
    return 1;
}

int td_arch_hf_names(const td_config *c, td_role r, int dec, int layer,
                     td_tref out[TD_ARCH_CANDIDATES])
{
    /* suffix of a layer role under model.{encoder,decoder}.layers.N */
    static const char *const layer_suffix[TD_R_COUNT] = {
        [TD_R_SA_Q_W] = "self_attn.q_proj.weight",     [TD_R_SA_Q_B] = "self_attn.q_proj.bias",
        [TD_R_SA_K_W] = "self_attn.k_proj.weight",     [TD_R_SA_K_B] = "self_attn.k_proj.bias",
        [TD_R_SA_V_W] = "self_attn.v_proj.weight",     [TD_R_SA_V_B] = "self_attn.v_proj.bias",
        [TD_R_SA_O_W] = "self_attn.out_proj.weight",   [TD_R_SA_O_B] = "self_attn.out_proj.bias",
        [TD_R_SA_REL_K] = "self_attn.relative_key.weight",
        [TD_R_SA_REL_V] = "self_attn.relative_value.weight",
        [TD_R_SA_LN_W] = "self_attn_layer_norm.weight", [TD_R_SA_LN_B] = "self_attn_layer_norm.bias",
        [TD_R_CA_Q_W] = "encoder_attn.q_proj.weight",  [TD_R_CA_Q_B] = "encoder_attn.q_proj.bias",
        [TD_R_CA_K_W] = "encoder_attn.k_proj.weight",  [TD_R_CA_K_B] = "encoder_attn.k_proj.bias",
        [TD_R_CA_V_W] = "encoder_attn.v_proj.weight",  [TD_R_CA_V_B] = "encoder_attn.v_proj.bias",
        [TD_R_CA_O_W] = "encoder_attn.out_proj.weight", [TD_R_CA_O_B] = "encoder_attn.out_proj.bias",
        [TD_R_CA_LN_W] = "encoder_attn_layer_norm.weight",
        [TD_R_CA_LN_B] = "encoder_attn_layer_norm.bias",
        [TD_R_FC1_W] = "fc1.weight", [TD_R_FC1_B] = "fc1.bias",
        [TD_R_FC2_W] = "fc2.weight", [TD_R_FC2_B] = "fc2.bias",
        [TD_R_FFN_LN_W] = "final_layer_norm.weight", [TD_R_FFN_LN_B] = "final_layer_norm.bias",
    };
    const char *side = dec ? "decoder" : "encoder";
    int shared_ok = c->share_encoder_decoder_embeddings;
    int n = 0;
    switch (r) {
    case TD_R_ENC_EMBED:
        n += one(&out[n], "model.encoder.embed_tokens.weight");
        n += one(&out[n], "model.shared.weight");
        return n;
    case TD_R_DEC_EMBED:
        n += one(&out[n], "model.decoder.embed_tokens.weight");
        if (shared_ok)
            n += one(&out[n], "model.shared.weight");
        return n;
    case TD_R_LM_HEAD:
        /* lm_head.weight, then (tied) model.shared.weight, then
         * model.decoder.embed_tokens.weight */
        n += one(&out[n], "lm_head.weight");
        if (c->tie_word_embeddings && shared_ok)
            n += one(&out[n], "model.shared.weight");
        if (c->tie_word_embeddings)
            n += one(&out[n], "model.decoder.embed_tokens.weight");
        return n;
    case TD_R_LM_BIAS: return one(out, "final_logits_bias");
    case TD_R_ENC_POS: return one(out, "model.encoder.embed_positions.weight");
    case TD_R_DEC_POS: return one(out, "model.decoder.embed_positions.weight");
    case TD_R_ENC_NORM_W: return one(out, "model.encoder.layer_norm.weight");
    case TD_R_ENC_NORM_B: return one(out, "model.encoder.layer_norm.bias");
    case TD_R_DEC_NORM_W: return one(out, "model.decoder.layer_norm.weight");
    case TD_R_DEC_NORM_B: return one(out, "model.decoder.layer_norm.bias");
    default: break;
    }
    if ((int)r < 0 || r >= TD_R_COUNT || !layer_suffix[r])
        return 0;
    snprintf(out->name, sizeof out->name, "model.%s.layers.%d.%s", side, layer, layer_suffix[r]);
    out->part = 0;
    out->parts = 1;
    return 1;
}

const td_arch td_arch_marian = {
    .model_type = "marian",
    .pre_norm = TD_SWITCH_CONFIG,
    .position_encoding = TD_SWITCH_CONFIG,
    .positions_after_pad = 0,
    /* MarianConfig's constructor (configuration_marian.py); forced EOS at
     * max_length and the pad column suppressed are Marian's conventions
     * (config.c's file comment) */
    .defaults = {.pad_token_id = 58100, .eos_token_id = 0, .decoder_start_token_id = 58100,
                 .forced_eos_token_id = 0, .scale_embedding = 0, .activation = "gelu",
                 .suppress_pad = 1},
    .names = td_arch_hf_names,
};
