/*
 * config.h - config.json (MarianConfig + transformerd extensions) and
 * generation_config.json.
 *
 * Every key that changes the computation is read and validated; a missing
 * required key, a wrong type or an out-of-range value is an error naming the
 * file and the key, e.g. "config.json: key 'd_model': must be a positive
 * integer divisible by encoder_attention_heads (got 30)". Keys that do not
 * change the computation (architectures, transformers_version, dropout ...)
 * are ignored, as transformers ignores unknown keys.
 */
#ifndef TD_CONFIG_H
#define TD_CONFIG_H

#include <stddef.h>

#include "activation.h" /* td_activation */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_posenc {
    TD_POS_SINUSOIDAL = 0,      /* Marian: sin in the first half, cos in the second */
    TD_POS_SINUSOIDAL_INTERLEAVED, /* Vaswani: pe[:,0::2]=sin, pe[:,1::2]=cos */
    TD_POS_LEARNED,             /* model.{encoder,decoder}.embed_positions.weight */
    TD_POS_RELATIVE,            /* Shaw et al. 2018 in self-attention */
    TD_POS_ROPE,                /* rotary, rotate-half, on self-attention q/k */
    TD_POS_SINUSOIDAL_CT2,      /* CTranslate2's generated table (model.bin without one):
                                   sin | cos halves, timescales 10000^(-i/(d/2-1)) */
    TD_POS_SINUSOIDAL_FAIRSEQ,  /* fairseq / M2M100: sin | cos halves, frequencies
                                   10000^(-i/(d/2-1)), the padding row zero */
} td_posenc;

typedef enum td_early_stopping {
    TD_EARLY_STOP_HEURISTIC = 0, /* transformers' early_stopping = false */
    TD_EARLY_STOP_TRUE,          /* early_stopping = true */
    TD_EARLY_STOP_NEVER,         /* early_stopping = "never" */
} td_early_stopping;

#define TD_MAX_SUPPRESS 64

typedef struct td_config {
    /* architecture (config.json) */
    int d_model;
    int encoder_layers, decoder_layers;
    int encoder_attention_heads, decoder_attention_heads;
    int encoder_ffn_dim, decoder_ffn_dim;
    td_activation activation;        /* activation_function */
    int max_position_embeddings;
    int scale_embedding;             /* bool: embeddings * sqrt(d_model) */
    int vocab_size;                  /* source vocabulary */
    int decoder_vocab_size;          /* = vocab_size when absent/null */
    int share_encoder_decoder_embeddings; /* bool, default 1 */
    int tie_word_embeddings;         /* bool, default 1 */
    int pad_token_id, eos_token_id, decoder_start_token_id;
    int bos_token_id;                /* informational, -1 when absent */
    int forced_eos_token_id;         /* -1 when absent/null */
    float layer_norm_eps;            /* 1e-5 (nn.LayerNorm default) */
    /* extensions (docs/architecture.md) */
    td_posenc position_encoding;     /* default sinusoidal */
    int relative_attention_max_distance; /* k, required > 0 for relative */
    int relative_attention_values;   /* bool: relative_value weights present (set by the loader) */
    float rope_theta;                /* default 10000 */
    int normalize_before;            /* bool, default 0 */
    /* Absolute position tables (sinusoidal, learned) hold position_offset
     * rows before position 0: a token at position t reads row
     * t + position_offset. position_pad (fairseq's make_positions, set with
     * the offset pad_token_id + 1 by the architecture): a pad token reads
     * row pad_token_id instead (zero in the fixed tables) and the encoder's
     * positions count the tokens that are not pad. Both 0 for Marian. */
    int position_offset;
    int position_pad;
    char model_type[32];             /* "marian" */
    /* set by a weight format that carries its own architecture (wformat.h's
     * config hook: CTranslate2), never by config.json */
    float embedding_scale;           /* > 0: the embeddings' factor (else scale_embedding decides) */
    int decoder_start_zero;          /* bool: the decoder starts from a zero vector, row
                                        decoder_vocab_size of its embeddings, which
                                        decoder_start_token_id then names */
    int weights_int8;                /* the checkpoint's matrices are int8: 1, 2 when its
                                        embeddings (and so its output projection) are too */

    /* generation (generation_config.json, then config.json, then defaults) */
    int num_beams;                   /* default 4 when unset */
    int max_length;                  /* transformers' max_length (counts the
                                        decoder start token); default 512 */
    float length_penalty;            /* default 1.0 */
    td_early_stopping early_stopping;
    int num_return_sequences;        /* default 1 */
    int suppress[TD_MAX_SUPPRESS];   /* single-token bad_words_ids; default {pad} */
    int n_suppress;
} td_config;

/* Parses dir/config.json and, when present, dir/generation_config.json;
 * for a directory whose weight format carries its own architecture
 * (wformat.h: CTranslate2's model.bin), that format's description instead,
 * with the generation defaults. Returns 0 or -1 with a message naming file
 * and key in err. */
int td_config_load(td_config *cfg, const char *dir, char *err, size_t errlen);

/* Same from JSON strings (gen_json may be NULL): used by tests and fuzzers. */
int td_config_parse(td_config *cfg, const char *config_json,
                    const char *gen_json, char *err, size_t errlen);

const char *td_posenc_name(td_posenc p);
const char *td_activation_name(td_activation a);

#ifdef __cplusplus
}
#endif

#endif /* TD_CONFIG_H */
