/*
 * arch.h - architectures as data: what a `model_type` means to the engine.
 *
 * An architecture is one file (model/arch_NAME.c) exporting one td_arch and
 * one row in arch.c's table. It says
 *   - its switches: pre- or post-norm and the position encoding, each
 *     either fixed by the architecture or left to config.json's keys;
 *   - the names of its tensors by role (td_role): one role may have several
 *     candidate names, the first present wins (tied embeddings), and a name
 *     may stand for a part of a stacked tensor (fused QKV: part 1 of 3 is
 *     the rows [d, 2d));
 *   - how a language is named to it (the tokenizer reads that).
 * weights.c binds roles, never names; the config parser applies the
 * switches after reading the keys and refuses a model_type the table lacks.
 */
#ifndef TD_ARCH_H
#define TD_ARCH_H

#include <stddef.h>

#include "config.h"

/* Roles of the whole model, then roles of one layer (side and index given
 * apart). */
#define TD_MODEL_ROLES(X)                                                      \
    X(ENC_EMBED) X(DEC_EMBED) X(LM_HEAD) X(LM_BIAS)                            \
    X(ENC_POS) X(DEC_POS)              /* stored position tables */             \
    X(ENC_NORM_W) X(ENC_NORM_B)        /* final layer norms (pre-norm) */       \
    X(DEC_NORM_W) X(DEC_NORM_B)
#define TD_LAYER_ROLES(X)                                                      \
    X(SA_Q_W) X(SA_Q_B) X(SA_K_W) X(SA_K_B) X(SA_V_W) X(SA_V_B)                \
    X(SA_O_W) X(SA_O_B) X(SA_REL_K) X(SA_REL_V) X(SA_LN_W) X(SA_LN_B)          \
    X(CA_Q_W) X(CA_Q_B) X(CA_K_W) X(CA_K_B) X(CA_V_W) X(CA_V_B)                \
    X(CA_O_W) X(CA_O_B) X(CA_LN_W) X(CA_LN_B)                                  \
    X(FC1_W) X(FC1_B) X(FC2_W) X(FC2_B) X(FFN_LN_W) X(FFN_LN_B)

typedef enum td_role {
#define TD_ROLE_ENUM(r) TD_R_##r,
    TD_MODEL_ROLES(TD_ROLE_ENUM) TD_LAYER_ROLES(TD_ROLE_ENUM)
#undef TD_ROLE_ENUM
    TD_R_COUNT
} td_role;

#define TD_R_FIRST_LAYER TD_R_SA_Q_W

/* One candidate name of a role: the tensor `name`, or its part `part` of
 * `parts` equal slices along the first dimension (parts 1: all of it). */
typedef struct td_tref {
    char name[224];
    int part, parts;
} td_tref;

#define TD_ARCH_CANDIDATES 3
#define TD_SWITCH_CONFIG (-1) /* a switch left to config.json's keys */

/* What an architecture's config class takes when config.json lacks a key
 * (transformers' MarianConfig, M2M100Config, ...). */
typedef struct td_arch_defaults {
    int pad_token_id, eos_token_id, decoder_start_token_id;
    int forced_eos_token_id;   /* -1: none */
    int scale_embedding;       /* bool */
    const char *activation;    /* activation_function */
    int suppress_pad;          /* bool: no bad_words_ids in either file suppresses
                                  {pad_token_id} (Marian's convention) */
} td_arch_defaults;

typedef struct td_arch {
    const char *model_type;  /* config.json's "model_type" */
    int pre_norm;            /* 0, 1 or TD_SWITCH_CONFIG (normalize_before) */
    int position_encoding;   /* a td_posenc, or TD_SWITCH_CONFIG */
    int positions_after_pad; /* bool: fairseq's make_positions (td_config's
                                position_offset = pad_token_id + 1, position_pad) */
    td_arch_defaults defaults; /* activation NULL: MarianConfig's (td_arch_defaults_of) */
    /* The candidate names of role r (of layer `layer` of the decoder when
     * dec, else the encoder; both ignored for the model's roles) for the
     * config c, in order of preference, into out; returns how many (0: the
     * architecture has no such tensor, the role's default applies). */
    int (*names)(const td_config *c, td_role r, int dec, int layer,
                 td_tref out[TD_ARCH_CANDIDATES]);
} td_arch;

/* The defaults of a: its own, or MarianConfig's (td_arch_marian's) for a
 * row that leaves them unset (defaults.activation NULL). */
const td_arch_defaults *td_arch_defaults_of(const td_arch *a);
/* The architecture of a model_type, NULL when the table lacks it. */
const td_arch *td_arch_find(const char *model_type);
/* The known model_types, comma-separated ("marian, m2m_100"), into out
 * (n bytes), for messages; returns out. */
const char *td_arch_known(char *out, size_t n);
/* A role's name for messages ("SA_Q_W"). */
const char *td_role_name(td_role r);

/* The state-dict names of transformers' BART family (MarianMTModel,
 * M2M100ForConditionalGeneration, ...: "model.encoder.layers.0.self_attn.
 * q_proj.weight"), which several architectures share. */
int td_arch_hf_names(const td_config *c, td_role r, int dec, int layer,
                     td_tref out[TD_ARCH_CANDIDATES]);

#endif /* TD_ARCH_H */
