/*
 * arch_m2m100.c - M2M100ForConditionalGeneration (transformers'
 * modeling_m2m_100.py; NLLB-200 checkpoints say the same model_type).
 *
 * What the row fixes, read from modeling_m2m_100.py and
 * configuration_m2m_100.py:
 *   - pre-norm: every sub-layer normalises its input, and the encoder and
 *     the decoder end with a layer norm (model.{encoder,decoder}.layer_norm);
 *     no layernorm_embedding;
 *   - M2M100SinusoidalPositionalEmbedding: fairseq's table (posenc.c,
 *     TD_POS_SINUSOIDAL_FAIRSEQ), not a weight; positions from the token
 *     mask, the first at padding_idx + 1 and a pad token at row padding_idx
 *     (create_position_ids_from_input_ids);
 *   - M2M100ScaledWordEmbedding: embeddings times sqrt(d_model) when
 *     scale_embedding (M2M100Config's default true);
 *   - the output projection lm_head tied to model.shared, without
 *     final_logits_bias;
 *   - M2M100Config's defaults: relu, pad 1, eos 2, decoder start 2; no
 *     forced EOS and no suppressed token unless the files ask for them
 *     (the generation config of the published checkpoints sets neither).
 * The language of the translation is the first generated token, forced
 * (generate's forced_bos_token_id): a target prefix of the decode.
 */
#include "arch.h"

static int m2m100_names(const td_config *c, td_role r, int dec, int layer,
                        td_tref out[TD_ARCH_CANDIDATES])
{
    switch (r) {
    case TD_R_LM_BIAS: /* none: the role's default (zeros) */
    case TD_R_ENC_POS: /* computed, never stored */
    case TD_R_DEC_POS:
        return 0;
    default:
        return td_arch_hf_names(c, r, dec, layer, out);
    }
}

const td_arch td_arch_m2m100 = {
    .model_type = "m2m_100",
    .pre_norm = 1,
    .position_encoding = TD_POS_SINUSOIDAL_FAIRSEQ,
    .positions_after_pad = 1,
    .defaults = {.pad_token_id = 1, .eos_token_id = 2, .decoder_start_token_id = 2,
                 .forced_eos_token_id = -1, .scale_embedding = 1, .activation = "relu",
                 .suppress_pad = 0},
    .names = m2m100_names,
};
