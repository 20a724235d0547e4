/*
 * fuzz_config.c - libFuzzer target for td_config_parse (model/config.c).
 *
 * Input layout: config.json text, then optionally a NUL byte and the
 * generation_config.json text (absent or empty -> gen_json = NULL). Bytes
 * after a second NUL are ignored by the JSON parser.
 *
 * On success, every invariant that the weight loader, the position tables and
 * beam search rely on without re-checking is asserted here (abort() when one
 * is broken); on failure, a message must have been written. The parse is run
 * twice to check that it is deterministic and never writes *cfg on failure.
 *
 * Build and run: tests/fuzz/run.sh (see tests/fuzz/README.md).
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

#define IS_BOOL(x) ((x) == 0 || (x) == 1)

static void check_id(int id, int lo, int hi_excl)
{
    FUZZ_CHECK(id >= lo && id < hi_excl);
}

static void check_config(const td_config *c)
{
    /* shapes */
    FUZZ_CHECK(c->d_model >= 1);
    FUZZ_CHECK(c->encoder_layers >= 1 && c->decoder_layers >= 1);
    FUZZ_CHECK(c->encoder_attention_heads >= 1 && c->decoder_attention_heads >= 1);
    FUZZ_CHECK(c->d_model % c->encoder_attention_heads == 0);
    FUZZ_CHECK(c->d_model % c->decoder_attention_heads == 0);
    FUZZ_CHECK(c->encoder_ffn_dim >= 1 && c->decoder_ffn_dim >= 1);
    FUZZ_CHECK(c->max_position_embeddings >= 1);
    FUZZ_CHECK(c->vocab_size >= 1 && c->decoder_vocab_size >= 1);
    FUZZ_CHECK(IS_BOOL(c->scale_embedding) && IS_BOOL(c->share_encoder_decoder_embeddings) &&
               IS_BOOL(c->tie_word_embeddings) && IS_BOOL(c->normalize_before));
    if (c->share_encoder_decoder_embeddings)
        FUZZ_CHECK(c->decoder_vocab_size == c->vocab_size);
    FUZZ_CHECK(c->activation == TD_ACT_RELU || c->activation == TD_ACT_GELU ||
               c->activation == TD_ACT_GELU_NEW || c->activation == TD_ACT_SILU);
    FUZZ_CHECK(isfinite(c->layer_norm_eps) && c->layer_norm_eps > 0.0f);
    FUZZ_CHECK(memchr(c->model_type, '\0', sizeof c->model_type) != NULL);

    /* token ids: all index the decoder vocabulary; pad also the source one */
    int dv = c->decoder_vocab_size;
    check_id(c->pad_token_id, 0, dv < c->vocab_size ? dv : c->vocab_size);
    check_id(c->eos_token_id, 0, dv);
    check_id(c->decoder_start_token_id, 0, dv);
    check_id(c->bos_token_id, -1, dv);
    check_id(c->forced_eos_token_id, -1, dv);

    /* position encoding */
    switch (c->position_encoding) {
    case TD_POS_SINUSOIDAL:
    case TD_POS_LEARNED:
        break;
    case TD_POS_SINUSOIDAL_INTERLEAVED:
        FUZZ_CHECK(c->d_model % 2 == 0);
        break;
    case TD_POS_RELATIVE:
        FUZZ_CHECK(c->relative_attention_max_distance >= 1 &&
                   c->relative_attention_max_distance <= 4096);
        break;
    case TD_POS_ROPE:
        FUZZ_CHECK((c->d_model / c->encoder_attention_heads) % 2 == 0);
        FUZZ_CHECK((c->d_model / c->decoder_attention_heads) % 2 == 0);
        break;
    case TD_POS_SINUSOIDAL_CT2:
        FUZZ_CHECK(!"config.json cannot choose CTranslate2's sinusoid");
        break;
    case TD_POS_SINUSOIDAL_FAIRSEQ: /* m2m_100's: after the padding row */
        FUZZ_CHECK(c->d_model >= 4);
        FUZZ_CHECK(c->position_pad && c->position_offset == c->pad_token_id + 1);
        break;
    default:
        FUZZ_CHECK(!"position_encoding out of range");
    }
    FUZZ_CHECK(c->position_offset >= 0 && (c->position_offset == 0 || c->position_pad));
    FUZZ_CHECK(c->relative_attention_max_distance >= 0 &&
               c->relative_attention_max_distance <= 4096);
    FUZZ_CHECK(c->relative_attention_values == 0); /* only the loader sets it */
    FUZZ_CHECK(isfinite(c->rope_theta) && c->rope_theta > 0.0f);

    /* generation */
    FUZZ_CHECK(c->num_beams >= 1 && c->num_beams <= 16);
    FUZZ_CHECK(c->num_return_sequences >= 1 && c->num_return_sequences <= c->num_beams);
    FUZZ_CHECK(c->max_length >= 2);
    FUZZ_CHECK(isfinite(c->length_penalty));
    FUZZ_CHECK(c->early_stopping == TD_EARLY_STOP_HEURISTIC ||
               c->early_stopping == TD_EARLY_STOP_TRUE ||
               c->early_stopping == TD_EARLY_STOP_NEVER);
    FUZZ_CHECK(c->n_suppress >= 0 && c->n_suppress <= TD_MAX_SUPPRESS);
    for (int i = 0; i < c->n_suppress; i++)
        check_id(c->suppress[i], 0, dv);

    FUZZ_CHECK(strcmp(td_posenc_name(c->position_encoding), "unknown") != 0);
    FUZZ_CHECK(strcmp(td_activation_name(c->activation), "unknown") != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* One allocation holding both NUL-terminated strings. */
    char *buf = malloc(size + 2);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data, size);
    buf[size] = '\0';
    buf[size + 1] = '\0';
    const char *config_json = buf;
    const char *gen_json = NULL;
    const char *nul = memchr(buf, '\0', size);
    if (nul != NULL && nul[1] != '\0')
        gen_json = nul + 1;

    td_config c1, c2;
    char err[256];
    memset(&c1, 0xA5, sizeof c1);
    int rc = td_config_parse(&c1, config_json, gen_json, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        check_config(&c1);
        err[0] = 'x';
        FUZZ_CHECK(td_config_parse(&c2, config_json, gen_json, err, sizeof err) == 0);
        FUZZ_CHECK(memcmp(&c1, &c2, sizeof c1) == 0);
        FUZZ_CHECK(err[0] == '\0');
    } else {
        static td_config poison;
        memset(&poison, 0xA5, sizeof poison);
        FUZZ_CHECK(memcmp(&c1, &poison, sizeof c1) == 0); /* untouched on failure */
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof err) != NULL);
        /* Same failure with a tiny buffer (truncation) and with none. */
        char small[8];
        FUZZ_CHECK(td_config_parse(&c2, config_json, gen_json, small, sizeof small) == -1);
        FUZZ_CHECK(memchr(small, '\0', sizeof small) != NULL);
        FUZZ_CHECK(td_config_parse(&c2, config_json, gen_json, NULL, 0) == -1);
    }
    free(buf);
    return 0;
}
