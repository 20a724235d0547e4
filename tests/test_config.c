/*
 * test_config.c - config.json / generation_config.json parsing (model/config.h).
 *
 * The reference config is the shape transformers' MarianMTModel.save_pretrained
 * writes for an OPUS-MT checkpoint (Helsinki-NLP/opus-mt-*), noise keys
 * included. Error cases assert failure and that the message names the file
 * and the key.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"

/* OPUS-MT style config.json. Keys that follow it are appended by cfg_with(). */
#define OPUS_HEAD                                                             \
    "{\"_name_or_path\": \"Helsinki-NLP/opus-mt-en-de\",\n"                    \
    " \"activation_dropout\": 0.0, \"activation_function\": \"swish\",\n"     \
    " \"add_bias_logits\": false, \"add_final_layer_norm\": false,\n"          \
    " \"architectures\": [\"MarianMTModel\"], \"attention_dropout\": 0.0,\n"   \
    " \"bad_words_ids\": [[58100]], \"bos_token_id\": 0,\n"                    \
    " \"classif_dropout\": 0.0, \"classifier_dropout\": 0.0,\n"                \
    " \"d_model\": 512, \"decoder_attention_heads\": 8,\n"                     \
    " \"decoder_ffn_dim\": 2048, \"decoder_layerdrop\": 0.0,\n"                \
    " \"decoder_layers\": 6, \"decoder_start_token_id\": 58100,\n"             \
    " \"decoder_vocab_size\": 58101, \"dropout\": 0.1,\n"                      \
    " \"encoder_attention_heads\": 8, \"encoder_ffn_dim\": 2048,\n"            \
    " \"encoder_layerdrop\": 0.0, \"encoder_layers\": 6, \"eos_token_id\": 0,\n" \
    " \"forced_eos_token_id\": 0, \"gradient_checkpointing\": false,\n"        \
    " \"id2label\": {\"0\": \"LABEL_0\", \"1\": \"LABEL_1\"},\n"               \
    " \"init_std\": 0.02, \"is_encoder_decoder\": true,\n"                     \
    " \"label2id\": {\"LABEL_0\": 0, \"LABEL_1\": 1},\n"                       \
    " \"max_length\": 512, \"max_position_embeddings\": 512,\n"                \
    " \"model_type\": \"marian\", \"normalize_before\": false,\n"              \
    " \"normalize_embedding\": false, \"num_beams\": 4,\n"                     \
    " \"num_hidden_layers\": 6, \"pad_token_id\": 58100,\n"                    \
    " \"scale_embedding\": true, \"share_encoder_decoder_embeddings\": true,\n" \
    " \"static_position_embeddings\": true,\n"                                 \
    " \"transformers_version\": \"4.22.0.dev0\", \"use_cache\": true,\n"       \
    " \"vocab_size\": 58101"

static const char opus_config[] = OPUS_HEAD "}";

/* A minimal config whose required keys can be replaced one by one. */
#define MIN_HEAD                                                              \
    "{\"d_model\": 64, \"encoder_layers\": 2, \"decoder_layers\": 2,"         \
    " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"        \
    " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"                    \
    " \"max_position_embeddings\": 64, \"vocab_size\": 100,"                  \
    " \"pad_token_id\": 99, \"decoder_start_token_id\": 99, \"eos_token_id\": 0"

static char errbuf[512];

/* MIN_HEAD with the keys of override_json added or replaced (jansson merges
 * them so no test trips over duplicate keys). The result lives until the
 * next call. */
static char *mk_buf;

static const char *mk(const char *override_json)
{
    json_error_t jerr;
    json_t *base = json_loads(MIN_HEAD "}", 0, &jerr);
    json_t *over = json_loads(override_json, 0, &jerr);
    ck_assert_msg(base && over, "test JSON: %s", jerr.text);
    ck_assert_int_eq(json_object_update(base, over), 0);
    free(mk_buf);
    mk_buf = json_dumps(base, JSON_COMPACT);
    ck_assert_ptr_nonnull(mk_buf);
    json_decref(over);
    json_decref(base);
    return mk_buf;
}

/* Parses and requires success; fails the test with the message otherwise. */
static td_config parse_ok(const char *cfg_json, const char *gen_json)
{
    td_config c;
    memset(&c, 0xab, sizeof c);
    errbuf[0] = '\0';
    int rc = td_config_parse(&c, cfg_json, gen_json, errbuf, sizeof errbuf);
    ck_assert_msg(rc == 0, "unexpected failure: %s", errbuf);
    return c;
}

/* Parses and requires failure with both needles in the message. */
static void parse_fails(const char *cfg_json, const char *gen_json,
                        const char *needle1, const char *needle2)
{
    td_config c;
    memset(&c, 0, sizeof c);
    strcpy(errbuf, "untouched");
    int rc = td_config_parse(&c, cfg_json, gen_json, errbuf, sizeof errbuf);
    ck_assert_msg(rc == -1, "expected failure (%s), got success", needle1);
    ck_assert_msg(strstr(errbuf, needle1) != NULL, "'%s' not in error: %s", needle1, errbuf);
    if (needle2)
        ck_assert_msg(strstr(errbuf, needle2) != NULL, "'%s' not in error: %s", needle2, errbuf);
}

/* Error for a key in config.json: "config.json: key 'NAME': ...". */
static void cfg_key_fails(const char *cfg_json, const char *key)
{
    char needle[96];
    snprintf(needle, sizeof needle, "config.json: key '%s': ", key);
    parse_fails(cfg_json, NULL, needle, NULL);
    ck_assert_msg(strncmp(errbuf, "config.json: ", 13) == 0, "prefix: %s", errbuf);
}

static void gen_key_fails(const char *gen_json, const char *key)
{
    char needle[96];
    snprintf(needle, sizeof needle, "generation_config.json: key '%s': ", key);
    parse_fails(opus_config, gen_json, needle, NULL);
    ck_assert_msg(strncmp(errbuf, "generation_config.json: ", 24) == 0, "prefix: %s", errbuf);
}

START_TEST(opus_mt_config)
{
    td_config c = parse_ok(opus_config, NULL);
    ck_assert_int_eq(c.d_model, 512);
    ck_assert_int_eq(c.encoder_layers, 6);
    ck_assert_int_eq(c.decoder_layers, 6);
    ck_assert_int_eq(c.encoder_attention_heads, 8);
    ck_assert_int_eq(c.decoder_attention_heads, 8);
    ck_assert_int_eq(c.encoder_ffn_dim, 2048);
    ck_assert_int_eq(c.decoder_ffn_dim, 2048);
    ck_assert_int_eq(c.activation, TD_ACT_SILU);
    ck_assert_int_eq(c.max_position_embeddings, 512);
    ck_assert_int_eq(c.scale_embedding, 1);
    ck_assert_int_eq(c.vocab_size, 58101);
    ck_assert_int_eq(c.decoder_vocab_size, 58101);
    ck_assert_int_eq(c.share_encoder_decoder_embeddings, 1);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    ck_assert_int_eq(c.pad_token_id, 58100);
    ck_assert_int_eq(c.eos_token_id, 0);
    ck_assert_int_eq(c.decoder_start_token_id, 58100);
    ck_assert_int_eq(c.bos_token_id, 0);
    ck_assert_int_eq(c.forced_eos_token_id, 0);
    ck_assert_float_eq(c.layer_norm_eps, 1e-5f);
    ck_assert_int_eq(c.position_encoding, TD_POS_SINUSOIDAL);
    ck_assert_int_eq(c.relative_attention_max_distance, 0);
    ck_assert_int_eq(c.relative_attention_values, 0);
    ck_assert_float_eq(c.rope_theta, 10000.0f);
    ck_assert_int_eq(c.normalize_before, 0);
    ck_assert_str_eq(c.model_type, "marian");
    ck_assert_int_eq(c.num_beams, 4);
    ck_assert_int_eq(c.max_length, 512);
    ck_assert_float_eq(c.length_penalty, 1.0f);
    ck_assert_int_eq(c.early_stopping, TD_EARLY_STOP_HEURISTIC);
    ck_assert_int_eq(c.num_return_sequences, 1);
    ck_assert_int_eq(c.n_suppress, 1);
    ck_assert_int_eq(c.suppress[0], 58100);
    ck_assert_str_eq(td_activation_name(c.activation), "silu");
    ck_assert_str_eq(td_posenc_name(c.position_encoding), "sinusoidal");
}
END_TEST

START_TEST(defaults_when_absent)
{
    /* Only the required keys: MarianConfig defaults for the rest. */
    td_config c = parse_ok("{\"d_model\": 64, \"encoder_layers\": 1, \"decoder_layers\": 3,"
                           " \"encoder_attention_heads\": 2, \"decoder_attention_heads\": 4,"
                           " \"encoder_ffn_dim\": 96, \"decoder_ffn_dim\": 80,"
                           " \"max_position_embeddings\": 128, \"vocab_size\": 60000}", NULL);
    ck_assert_int_eq(c.decoder_layers, 3);
    ck_assert_int_eq(c.decoder_vocab_size, 60000);
    ck_assert_int_eq(c.activation, TD_ACT_GELU);
    ck_assert_int_eq(c.scale_embedding, 0);
    ck_assert_int_eq(c.share_encoder_decoder_embeddings, 1);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    ck_assert_int_eq(c.pad_token_id, 58100);
    ck_assert_int_eq(c.eos_token_id, 0);
    ck_assert_int_eq(c.decoder_start_token_id, 58100);
    ck_assert_int_eq(c.bos_token_id, -1);
    ck_assert_int_eq(c.forced_eos_token_id, 0); /* MarianConfig default */
    ck_assert_str_eq(c.model_type, "marian");
    ck_assert_int_eq(c.num_beams, 4);
    ck_assert_int_eq(c.max_length, 512);
    ck_assert_int_eq(c.n_suppress, 1);
    ck_assert_int_eq(c.suppress[0], 58100);

    /* The pad default does not fit a small vocabulary: named. */
    parse_fails("{\"d_model\": 64, \"encoder_layers\": 1, \"decoder_layers\": 1,"
                " \"encoder_attention_heads\": 2, \"decoder_attention_heads\": 2,"
                " \"encoder_ffn_dim\": 96, \"decoder_ffn_dim\": 96,"
                " \"max_position_embeddings\": 128, \"vocab_size\": 100}", NULL,
                "config.json: key 'pad_token_id'", "58100");
}
END_TEST

START_TEST(extensions)
{
    td_config c = parse_ok(mk("{\"position_encoding\": \"relative\","
                           " \"relative_attention_max_distance\": 16, \"normalize_before\": true,"
                           " \"activation_function\": \"relu\", \"layer_norm_eps\": 1e-6,"
                           " \"model_type\": \"marian\"}"), NULL);
    ck_assert_int_eq(c.position_encoding, TD_POS_RELATIVE);
    ck_assert_int_eq(c.relative_attention_max_distance, 16);
    ck_assert_int_eq(c.normalize_before, 1);
    ck_assert_int_eq(c.activation, TD_ACT_RELU);
    ck_assert_float_eq_tol(c.layer_norm_eps, 1e-6f, 1e-12f);
    ck_assert_str_eq(c.model_type, "marian");
    /* a model_type the architecture table lacks is refused, named */
    cfg_key_fails(mk("{\"model_type\": \"marian-xl-with-a-very-long-model-type-name\"}"),
                  "model_type");
    char err[512];
    td_config bad;
    ck_assert_int_ne(td_config_parse(&bad, mk("{\"model_type\": \"t5\"}"), NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "unknown architecture 't5' (known: marian") != NULL, "%s", err);

    c = parse_ok(mk("{\"position_encoding\": \"rope\", \"rope_theta\": 500000,"
                 " \"activation_function\": \"gelu_new\"}"), NULL);
    ck_assert_int_eq(c.position_encoding, TD_POS_ROPE);
    ck_assert_float_eq(c.rope_theta, 500000.0f);
    ck_assert_int_eq(c.activation, TD_ACT_GELU_NEW);
    ck_assert_str_eq(td_posenc_name(c.position_encoding), "rope");
    ck_assert_str_eq(td_activation_name(c.activation), "gelu_new");

    c = parse_ok(mk("{\"position_encoding\": \"learned\", \"activation_function\": \"silu\"}"), NULL);
    ck_assert_int_eq(c.position_encoding, TD_POS_LEARNED);
    ck_assert_int_eq(c.activation, TD_ACT_SILU);

    c = parse_ok(mk("{\"position_encoding\": \"sinusoidal_interleaved\"}"), NULL);
    ck_assert_int_eq(c.position_encoding, TD_POS_SINUSOIDAL_INTERLEAVED);
    ck_assert_str_eq(td_posenc_name(c.position_encoding), "sinusoidal_interleaved");

    /* Odd d_model: fine for Marian's sinusoidal layout, not interleaved. */
    c = parse_ok("{\"d_model\": 63, \"encoder_layers\": 1, \"decoder_layers\": 1,"
                 " \"encoder_attention_heads\": 3, \"decoder_attention_heads\": 7,"
                 " \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
                 " \"max_position_embeddings\": 8, \"vocab_size\": 10, \"pad_token_id\": 9,"
                 " \"decoder_start_token_id\": 9}", NULL);
    ck_assert_int_eq(c.d_model, 63);
    cfg_key_fails("{\"d_model\": 63, \"encoder_layers\": 1, \"decoder_layers\": 1,"
                  " \"encoder_attention_heads\": 3, \"decoder_attention_heads\": 7,"
                  " \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
                  " \"max_position_embeddings\": 8, \"vocab_size\": 10, \"pad_token_id\": 9,"
                  " \"decoder_start_token_id\": 9, \"position_encoding\": \"sinusoidal_interleaved\"}",
                  "position_encoding");

    /* Separate vocabularies. */
    c = parse_ok(mk("{\"share_encoder_decoder_embeddings\": false,"
                 " \"decoder_vocab_size\": 120, \"tie_word_embeddings\": false}"), NULL);
    ck_assert_int_eq(c.vocab_size, 100);
    ck_assert_int_eq(c.decoder_vocab_size, 120);
    ck_assert_int_eq(c.share_encoder_decoder_embeddings, 0);
    ck_assert_int_eq(c.tie_word_embeddings, 0);

    /* decoder_vocab_size null = vocab_size; eos as a list uses the first. */
    c = parse_ok(mk("{\"decoder_vocab_size\": null, \"bos_token_id\": null,"
                 " \"forced_eos_token_id\": null, \"eos_token_id\": [3, 0]}"), NULL);
    ck_assert_int_eq(c.decoder_vocab_size, 100);
    ck_assert_int_eq(c.bos_token_id, -1);
    ck_assert_int_eq(c.forced_eos_token_id, -1);
    ck_assert_int_eq(c.eos_token_id, 3);
}
END_TEST

START_TEST(generation_overrides)
{
    const char *gen =
        "{\"_from_model_config\": true, \"bad_words_ids\": [[58100], [7]],"
        " \"bos_token_id\": 0, \"decoder_start_token_id\": 58099, \"eos_token_id\": 5,"
        " \"forced_eos_token_id\": 5, \"max_length\": 256, \"num_beams\": 6,"
        " \"pad_token_id\": 58099, \"renormalize_logits\": true, \"length_penalty\": 0.6,"
        " \"early_stopping\": true, \"num_return_sequences\": 3,"
        " \"transformers_version\": \"4.40.0\"}";
    td_config c = parse_ok(opus_config, gen);
    ck_assert_int_eq(c.num_beams, 6);
    ck_assert_int_eq(c.max_length, 256);
    ck_assert_float_eq_tol(c.length_penalty, 0.6f, 1e-7f);
    ck_assert_int_eq(c.early_stopping, TD_EARLY_STOP_TRUE);
    ck_assert_int_eq(c.num_return_sequences, 3);
    ck_assert_int_eq(c.pad_token_id, 58099);
    ck_assert_int_eq(c.eos_token_id, 5);
    ck_assert_int_eq(c.decoder_start_token_id, 58099);
    ck_assert_int_eq(c.forced_eos_token_id, 5);
    ck_assert_int_eq(c.n_suppress, 2);
    ck_assert_int_eq(c.suppress[0], 58100);
    ck_assert_int_eq(c.suppress[1], 7);
    /* Architecture untouched by generation_config.json. */
    ck_assert_int_eq(c.d_model, 512);

    /* Keys absent from generation_config.json keep config.json's values; null
     * counts as unset; "never" early stopping. */
    c = parse_ok(opus_config, "{\"num_beams\": 1, \"forced_eos_token_id\": null,"
                              " \"early_stopping\": \"never\"}");
    ck_assert_int_eq(c.num_beams, 1);
    ck_assert_int_eq(c.max_length, 512);
    ck_assert_int_eq(c.forced_eos_token_id, 0);
    ck_assert_int_eq(c.early_stopping, TD_EARLY_STOP_NEVER);
    ck_assert_int_eq(c.n_suppress, 1);
    ck_assert_int_eq(c.suppress[0], 58100);

    /* Empty bad_words_ids: nothing suppressed. */
    c = parse_ok(opus_config, "{\"bad_words_ids\": []}");
    ck_assert_int_eq(c.n_suppress, 0);

    /* No bad_words_ids anywhere: {pad}, the pad from generation_config.json. */
    c = parse_ok(mk("{}"), "{\"pad_token_id\": 98}");
    ck_assert_int_eq(c.pad_token_id, 98);
    ck_assert_int_eq(c.n_suppress, 1);
    ck_assert_int_eq(c.suppress[0], 98);

    /* Generation keys from config.json alone (older checkpoints). */
    c = parse_ok(mk("{\"num_beams\": 2, \"max_length\": 40, \"length_penalty\": 2,"
                 " \"early_stopping\": false, \"bad_words_ids\": [[5], [6], [99]]}"), NULL);
    ck_assert_int_eq(c.num_beams, 2);
    ck_assert_int_eq(c.max_length, 40);
    ck_assert_float_eq(c.length_penalty, 2.0f);
    ck_assert_int_eq(c.early_stopping, TD_EARLY_STOP_HEURISTIC);
    ck_assert_int_eq(c.n_suppress, 3);
    ck_assert_int_eq(c.suppress[2], 99);
}
END_TEST

START_TEST(architecture_errors)
{
    /* missing d_model */
    cfg_key_fails("{\"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100}", "d_model");
    ck_assert(strstr(errbuf, "missing") != NULL);
    /* not divisible: the message carries the numbers */
    cfg_key_fails("{\"d_model\": 30, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 8, \"decoder_attention_heads\": 5,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100, \"pad_token_id\": 1,"
                  " \"decoder_start_token_id\": 1}", "d_model");
    ck_assert(strstr(errbuf, "encoder_attention_heads") && strstr(errbuf, "30") && strstr(errbuf, "8"));
    cfg_key_fails("{\"d_model\": 40, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 8, \"decoder_attention_heads\": 3,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100, \"pad_token_id\": 1,"
                  " \"decoder_start_token_id\": 1}", "d_model");
    ck_assert(strstr(errbuf, "decoder_attention_heads") != NULL);
    /* bounds */
    cfg_key_fails("{\"d_model\": 0}", "d_model");
    cfg_key_fails("{\"d_model\": 65537}", "d_model");
    cfg_key_fails(mk("{\"encoder_layers\": 257}"), "encoder_layers");
    cfg_key_fails("{\"d_model\": 64, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 16777217}", "vocab_size");
    cfg_key_fails("{\"d_model\": 64, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 1048577, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100}", "encoder_ffn_dim");
    cfg_key_fails("{\"d_model\": 64, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": -1, \"vocab_size\": 100}", "max_position_embeddings");
    /* bad activation: the supported names are listed */
    cfg_key_fails(mk("{\"activation_function\": \"tanh\"}"), "activation_function");
    ck_assert(strstr(errbuf, "swish") && strstr(errbuf, "gelu_new") && strstr(errbuf, "relu"));
    cfg_key_fails(mk("{\"activation_function\": 3}"), "activation_function");
    /* relative without its distance, and with a bad one */
    cfg_key_fails(mk("{\"position_encoding\": \"relative\"}"), "relative_attention_max_distance");
    cfg_key_fails(mk("{\"position_encoding\": \"relative\", \"relative_attention_max_distance\": 0}"),
                  "relative_attention_max_distance");
    cfg_key_fails(mk("{\"position_encoding\": \"relative\", \"relative_attention_max_distance\": 4097}"),
                  "relative_attention_max_distance");
    cfg_key_fails(mk("{\"position_encoding\": \"alibi\"}"), "position_encoding");
    /* rope with an odd head dim (d_model 60 / 4 heads = 15) on either side */
    cfg_key_fails("{\"d_model\": 60, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 2,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100, \"pad_token_id\": 1,"
                  " \"decoder_start_token_id\": 1, \"position_encoding\": \"rope\"}", "position_encoding");
    ck_assert(strstr(errbuf, "head dim") && strstr(errbuf, "15"));
    cfg_key_fails("{\"d_model\": 60, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 2, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100, \"pad_token_id\": 1,"
                  " \"decoder_start_token_id\": 1, \"position_encoding\": \"rope\"}", "position_encoding");
    cfg_key_fails(mk("{\"position_encoding\": \"rope\", \"rope_theta\": 0}"), "rope_theta");
    cfg_key_fails(mk("{\"layer_norm_eps\": -1e-5}"), "layer_norm_eps");
    cfg_key_fails(mk("{\"layer_norm_eps\": 1e-300}"), "layer_norm_eps");
    /* shared embeddings with different vocabulary sizes */
    cfg_key_fails(mk("{\"decoder_vocab_size\": 120}"), "decoder_vocab_size");
    ck_assert(strstr(errbuf, "share_encoder_decoder_embeddings") != NULL);
    cfg_key_fails(mk("{\"decoder_vocab_size\": 0, \"share_encoder_decoder_embeddings\": false}"),
                  "decoder_vocab_size");
}
END_TEST

START_TEST(token_id_errors)
{
    /* pad out of range (decoder side, and source side with separate vocabularies) */
    cfg_key_fails(mk("{\"pad_token_id\": 100}"), "pad_token_id");
    cfg_key_fails(mk("{\"pad_token_id\": -1}"), "pad_token_id");
    cfg_key_fails(mk("{\"pad_token_id\": 110, \"share_encoder_decoder_embeddings\": false,"
                  " \"decoder_vocab_size\": 120}"), "pad_token_id");
    cfg_key_fails(mk("{\"pad_token_id\": null}"), "pad_token_id");
    cfg_key_fails(mk("{\"eos_token_id\": 100}"), "eos_token_id");
    cfg_key_fails(mk("{\"eos_token_id\": []}"), "eos_token_id");
    cfg_key_fails(mk("{\"eos_token_id\": [0, 100]}"), "eos_token_id");
    cfg_key_fails(mk("{\"decoder_start_token_id\": 100}"), "decoder_start_token_id");
    cfg_key_fails(mk("{\"bos_token_id\": 100}"), "bos_token_id");
    cfg_key_fails(mk("{\"forced_eos_token_id\": 100}"), "forced_eos_token_id");
    /* decoder_start default 58100 outside a small decoder vocabulary */
    cfg_key_fails("{\"d_model\": 64, \"encoder_layers\": 2, \"decoder_layers\": 2,"
                  " \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4,"
                  " \"encoder_ffn_dim\": 128, \"decoder_ffn_dim\": 128,"
                  " \"max_position_embeddings\": 64, \"vocab_size\": 100, \"pad_token_id\": 3}",
                  "decoder_start_token_id");
    /* overrides in generation_config.json are validated the same way */
    gen_key_fails("{\"pad_token_id\": 58101}", "pad_token_id");
    gen_key_fails("{\"eos_token_id\": \"0\"}", "eos_token_id");
    gen_key_fails("{\"decoder_start_token_id\": 1e3}", "decoder_start_token_id");
    gen_key_fails("{\"forced_eos_token_id\": -1}", "forced_eos_token_id");
}
END_TEST

START_TEST(generation_errors)
{
    /* multi-token bad words, in either file */
    gen_key_fails("{\"bad_words_ids\": [[1], [2, 3]]}", "bad_words_ids");
    ck_assert(strstr(errbuf, "multi-token") != NULL);
    cfg_key_fails(mk("{\"bad_words_ids\": [[5, 6]]}"), "bad_words_ids");
    ck_assert(strstr(errbuf, "unsupported") != NULL);
    gen_key_fails("{\"bad_words_ids\": [[58101]]}", "bad_words_ids");
    gen_key_fails("{\"bad_words_ids\": [[]]}", "bad_words_ids");
    gen_key_fails("{\"bad_words_ids\": [5]}", "bad_words_ids");
    gen_key_fails("{\"bad_words_ids\": \"[[5]]\"}", "bad_words_ids");

    /* more than TD_MAX_SUPPRESS entries */
    char big[16 + 8 * (TD_MAX_SUPPRESS + 1)];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"bad_words_ids\": [");
    for (int i = 0; i <= TD_MAX_SUPPRESS; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s[%d]", i ? "," : "", i);
    snprintf(big + n, sizeof big - n, "]}");
    gen_key_fails(big, "bad_words_ids");
    /* exactly TD_MAX_SUPPRESS is fine */
    n = (size_t)snprintf(big, sizeof big, "{\"bad_words_ids\": [");
    for (int i = 0; i < TD_MAX_SUPPRESS; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s[%d]", i ? "," : "", i);
    snprintf(big + n, sizeof big - n, "]}");
    td_config c = parse_ok(opus_config, big);
    ck_assert_int_eq(c.n_suppress, TD_MAX_SUPPRESS);
    ck_assert_int_eq(c.suppress[TD_MAX_SUPPRESS - 1], TD_MAX_SUPPRESS - 1);

    /* num_beams bounds */
    gen_key_fails("{\"num_beams\": 0}", "num_beams");
    gen_key_fails("{\"num_beams\": 17}", "num_beams");
    cfg_key_fails(mk("{\"num_beams\": 0}"), "num_beams");
    c = parse_ok(opus_config, "{\"num_beams\": 16}");
    ck_assert_int_eq(c.num_beams, 16);
    /* max_length, length_penalty, early_stopping, num_return_sequences */
    gen_key_fails("{\"max_length\": 1}", "max_length");
    gen_key_fails("{\"max_length\": 1048577}", "max_length");
    gen_key_fails("{\"max_length\": 512.0}", "max_length");
    ck_assert(strstr(errbuf, "must be an integer") != NULL);
    gen_key_fails("{\"length_penalty\": 1e300}", "length_penalty");
    gen_key_fails("{\"length_penalty\": \"1.0\"}", "length_penalty");
    gen_key_fails("{\"early_stopping\": \"always\"}", "early_stopping");
    gen_key_fails("{\"early_stopping\": 1}", "early_stopping");
    gen_key_fails("{\"num_return_sequences\": 5}", "num_return_sequences"); /* > num_beams 4 */
    gen_key_fails("{\"num_return_sequences\": 0}", "num_return_sequences");
    c = parse_ok(opus_config, "{\"num_return_sequences\": 4}");
    ck_assert_int_eq(c.num_return_sequences, 4);
}
END_TEST

START_TEST(type_and_json_errors)
{
    /* wrong types for known keys */
    cfg_key_fails("{\"d_model\": \"512\"}", "d_model");
    ck_assert(strstr(errbuf, "must be an integer") != NULL);
    cfg_key_fails("{\"d_model\": 512.0}", "d_model");
    ck_assert(strstr(errbuf, "must be an integer") != NULL);
    cfg_key_fails("{\"d_model\": true}", "d_model");
    cfg_key_fails(mk("{\"scale_embedding\": 1}"), "scale_embedding");
    ck_assert(strstr(errbuf, "boolean") != NULL);
    cfg_key_fails(mk("{\"share_encoder_decoder_embeddings\": \"true\"}"),
                  "share_encoder_decoder_embeddings");
    cfg_key_fails(mk("{\"tie_word_embeddings\": null}"), "tie_word_embeddings");
    cfg_key_fails(mk("{\"normalize_before\": 0}"), "normalize_before");
    cfg_key_fails(mk("{\"position_encoding\": 1}"), "position_encoding");
    cfg_key_fails(mk("{\"model_type\": [\"marian\"]}"), "model_type");
    cfg_key_fails(mk("{\"decoder_vocab_size\": \"100\"}"), "decoder_vocab_size");
    cfg_key_fails(mk("{\"rope_theta\": \"1e4\"}"), "rope_theta");
    gen_key_fails("{\"num_beams\": \"4\"}", "num_beams");

    /* duplicate keys: rejected by jansson, the key is quoted in the message */
    parse_fails(MIN_HEAD ", \"d_model\": 64}", NULL, "config.json: ", "d_model");
    ck_assert(strstr(errbuf, "duplicate") != NULL);
    parse_fails(opus_config, "{\"num_beams\": 4, \"num_beams\": 5}", "generation_config.json: ", "num_beams");
    ck_assert(strstr(errbuf, "duplicate") != NULL);

    /* not an object / not JSON */
    parse_fails("[1, 2]", NULL, "config.json: ", "object");
    parse_fails("42", NULL, "config.json: ", "invalid JSON");
    parse_fails("{\"d_model\": 512,", NULL, "config.json: ", "invalid JSON");
    parse_fails("", NULL, "config.json: ", "invalid JSON");
    parse_fails(opus_config, "[]", "generation_config.json: ", "object");
    parse_fails(opus_config, "{num_beams: 4}", "generation_config.json: ", "invalid JSON");
    parse_fails(NULL, NULL, "config.json: ", NULL);

    /* a failed parse leaves cfg alone; a tiny error buffer is fine */
    td_config c;
    memset(&c, 0x5a, sizeof c);
    char tiny[8];
    ck_assert_int_eq(td_config_parse(&c, "[]", NULL, tiny, sizeof tiny), -1);
    ck_assert_uint_eq(strlen(tiny), sizeof tiny - 1);
    ck_assert_int_eq(c.d_model, 0x5a5a5a5a);
    ck_assert_int_eq(td_config_parse(&c, "[]", NULL, NULL, 0), -1);
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(td_posenc_name(TD_POS_SINUSOIDAL), "sinusoidal");
    ck_assert_str_eq(td_posenc_name(TD_POS_SINUSOIDAL_INTERLEAVED), "sinusoidal_interleaved");
    ck_assert_str_eq(td_posenc_name(TD_POS_LEARNED), "learned");
    ck_assert_str_eq(td_posenc_name(TD_POS_RELATIVE), "relative");
    ck_assert_str_eq(td_posenc_name(TD_POS_ROPE), "rope");
    ck_assert_str_eq(td_activation_name(TD_ACT_NONE), "none");
    ck_assert_str_eq(td_activation_name(TD_ACT_RELU), "relu");
    ck_assert_str_eq(td_activation_name(TD_ACT_GELU), "gelu");
    ck_assert_str_eq(td_activation_name(TD_ACT_GELU_NEW), "gelu_new");
    ck_assert_str_eq(td_activation_name(TD_ACT_SILU), "silu");
}
END_TEST

/* ---- td_config_load on a temporary directory ----------------------------- */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
}

static void remove_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

START_TEST(load_directory)
{
    char dir[] = "/tmp/td_config_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    td_config c;

    /* missing config.json: named with its path and strerror */
    ck_assert_int_eq(td_config_load(&c, dir, errbuf, sizeof errbuf), -1);
    ck_assert_msg(strncmp(errbuf, "config.json: ", 13) == 0, "%s", errbuf);
    ck_assert_msg(strstr(errbuf, dir) && strstr(errbuf, strerror(ENOENT)), "%s", errbuf);

    /* config.json alone */
    write_file(dir, "config.json", opus_config);
    ck_assert_msg(td_config_load(&c, dir, errbuf, sizeof errbuf) == 0, "%s", errbuf);
    ck_assert_int_eq(c.d_model, 512);
    ck_assert_int_eq(c.num_beams, 4);
    ck_assert_int_eq(c.n_suppress, 1);

    /* with generation_config.json */
    write_file(dir, "generation_config.json", "{\"num_beams\": 2, \"max_length\": 100}");
    ck_assert_msg(td_config_load(&c, dir, errbuf, sizeof errbuf) == 0, "%s", errbuf);
    ck_assert_int_eq(c.num_beams, 2);
    ck_assert_int_eq(c.max_length, 100);

    /* a bad generation_config.json is reported as such */
    write_file(dir, "generation_config.json", "{\"num_beams\": 99}");
    ck_assert_int_eq(td_config_load(&c, dir, errbuf, sizeof errbuf), -1);
    ck_assert_msg(strstr(errbuf, "generation_config.json: key 'num_beams'") != NULL, "%s", errbuf);

    /* generation_config.json that is not a regular file */
    remove_file(dir, "generation_config.json");
    char sub[512];
    snprintf(sub, sizeof sub, "%s/generation_config.json", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(td_config_load(&c, dir, errbuf, sizeof errbuf), -1);
    ck_assert_msg(strstr(errbuf, "generation_config.json: ") == errbuf &&
                  strstr(errbuf, "not a regular file") != NULL, "%s", errbuf);
    ck_assert_int_eq(rmdir(sub), 0);

    /* an empty config.json */
    write_file(dir, "config.json", "");
    ck_assert_int_eq(td_config_load(&c, dir, errbuf, sizeof errbuf), -1);
    ck_assert_msg(strstr(errbuf, "config.json: invalid JSON") != NULL, "%s", errbuf);

    remove_file(dir, "config.json");
    ck_assert_int_eq(rmdir(dir), 0);

    /* missing directory */
    ck_assert_int_eq(td_config_load(&c, "/nonexistent/td_model_dir", errbuf, sizeof errbuf), -1);
    ck_assert_msg(strstr(errbuf, "config.json: ") == errbuf, "%s", errbuf);
    ck_assert_msg(strstr(errbuf, "/nonexistent/td_model_dir/config.json") != NULL, "%s", errbuf);
    ck_assert_msg(strstr(errbuf, strerror(ENOENT)) != NULL, "%s", errbuf);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, opus_mt_config);
    tcase_add_test(tc, defaults_when_absent);
    tcase_add_test(tc, extensions);
    tcase_add_test(tc, generation_overrides);
    tcase_add_test(tc, architecture_errors);
    tcase_add_test(tc, token_id_errors);
    tcase_add_test(tc, generation_errors);
    tcase_add_test(tc, type_and_json_errors);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    TCase *tl = tcase_create("load");
    tcase_add_test(tl, load_directory);
    suite_add_tcase(s, tl);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free(mk_buf);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
