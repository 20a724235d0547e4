/*
 * config.c - config.json (MarianConfig + transformerd extensions) and
 * generation_config.json, parsed with jansson.
 *
 * Defaults follow transformers' MarianConfig (configuration_marian.py) and
 * GenerationConfig, except where noted:
 *   - forced_eos_token_id: absent from config.json takes MarianConfig's
 *     default 0 (</s> forced at max_length); null means none (-1).
 *   - bad_words_ids absent from both files suppresses {pad_token_id}, Marian's
 *     convention (the pad column is never generated).
 *
 * Order of precedence for generation settings and the decoder-side token ids:
 * generation_config.json, then config.json (older checkpoints keep num_beams,
 * max_length and bad_words_ids there), then the defaults. A key set to null
 * in generation_config.json counts as unset there (GenerationConfig's None).
 *
 * Integers must be JSON integers: 512.0 is rejected with "must be an integer".
 * Unknown keys are ignored, as transformers ignores them.
 */
#include "arch.h"
#include "config.h"
#include "spm.h"
#include "wformat.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define CFG_FILE "config.json"
#define GEN_FILE "generation_config.json"
#define CFG_MAX_FILE_BYTES ((size_t)16 << 20)

#if defined(__GNUC__) || defined(__clang__)
#define CFG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CFG_PRINTF(f, a)
#endif

/* Where an error goes and which file is being read. */
typedef struct cfg_ctx {
    const char *file; /* CFG_FILE or GEN_FILE: the message prefix */
    char *err;
    size_t errlen;
} cfg_ctx;

/* Writes "<file>: key '<key>': <message>" (or "<file>: <message>" when key is
 * NULL) into the caller's buffer. Always returns -1 so callers can
 * `return cfg_fail(...)`. */
static int cfg_fail(const cfg_ctx *cx, const char *key, const char *fmt, ...) CFG_PRINTF(3, 4);

static int cfg_fail(const cfg_ctx *cx, const char *key, const char *fmt, ...)
{
    if (!cx->err || cx->errlen == 0)
        return -1;
    int n;
    if (key)
        n = snprintf(cx->err, cx->errlen, "%s: key '%s': ", cx->file, key);
    else
        n = snprintf(cx->err, cx->errlen, "%s: ", cx->file);
    if (n < 0 || (size_t)n >= cx->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cx->err + n, cx->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

/* Checks that v is a JSON integer in [lo, hi] and stores it. */
static int int_value(const cfg_ctx *cx, const char *key, const json_t *v,
                     long long lo, long long hi, int *out)
{
    if (!json_is_integer(v))
        return cfg_fail(cx, key, "must be an integer (got %s)", json_kind(v));
    long long x = (long long)json_integer_value(v);
    if (x < lo || x > hi)
        return cfg_fail(cx, key, "must be in [%lld, %lld] (got %lld)", lo, hi, x);
    *out = (int)x;
    return 0;
}

/* A required integer in [lo, hi]. */
static int get_int_req(const cfg_ctx *cx, const json_t *obj, const char *key,
                       long long lo, long long hi, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return cfg_fail(cx, key, "missing (required integer in [%lld, %lld])", lo, hi);
    return int_value(cx, key, v, lo, hi, out);
}

/* An optional integer in [lo, hi]: *out is left alone when the key is absent,
 * and also when it is null and null_is_unset is set. *present tells which. */
static int get_int_opt(const cfg_ctx *cx, const json_t *obj, const char *key,
                       long long lo, long long hi, int null_is_unset,
                       int *out, int *present)
{
    const json_t *v = json_object_get(obj, key);
    *present = 0;
    if (!v || (null_is_unset && json_is_null(v)))
        return 0;
    if (int_value(cx, key, v, lo, hi, out) != 0)
        return -1;
    *present = 1;
    return 0;
}

/* An optional boolean: *out left alone when absent. */
static int get_bool_opt(const cfg_ctx *cx, const json_t *obj, const char *key, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return cfg_fail(cx, key, "must be a boolean (got %s)", json_kind(v));
    *out = json_is_true(v) ? 1 : 0;
    return 0;
}

/* An optional string: *out left alone (NULL stays NULL) when absent. */
static int get_string_opt(const cfg_ctx *cx, const json_t *obj, const char *key,
                          const char **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return cfg_fail(cx, key, "must be a string (got %s)", json_kind(v));
    *out = json_string_value(v);
    return 0;
}

/* An optional number (integer or real) that must be finite as a float, and
 * strictly positive when positive is set. *out left alone when absent. */
static int get_float_opt(const cfg_ctx *cx, const json_t *obj, const char *key,
                         int positive, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return cfg_fail(cx, key, "must be a number (got %s)", json_kind(v));
    double d = json_number_value(v);
    if (!isfinite(d) || fabs(d) > (double)FLT_MAX)
        return cfg_fail(cx, key, "must be a finite number (got %g)", d);
    float f = (float)d;
    /* A positive double below FLT_TRUE_MIN rounds to 0: reject it too. */
    if (positive && !(d > 0.0 && f > 0.0f))
        return cfg_fail(cx, key, "must be a positive number (got %g)", d);
    *out = f;
    return 0;
}

/* ---- architecture -------------------------------------------------------- */

static int parse_activation(const cfg_ctx *cx, const json_t *obj, const td_arch *arch,
                            td_config *c)
{
    const char *s = NULL;
    if (get_string_opt(cx, obj, "activation_function", &s) != 0)
        return -1;
    if (!s)
        s = td_arch_defaults_of(arch)->activation; /* the config class's default */
    if (strcmp(s, "swish") == 0 || strcmp(s, "silu") == 0)
        c->activation = TD_ACT_SILU;
    else if (strcmp(s, "gelu") == 0)
        c->activation = TD_ACT_GELU;
    else if (strcmp(s, "gelu_new") == 0)
        c->activation = TD_ACT_GELU_NEW;
    else if (strcmp(s, "relu") == 0)
        c->activation = TD_ACT_RELU;
    else
        return cfg_fail(cx, "activation_function",
                        "unsupported value '%.64s' (supported: swish, silu, gelu, gelu_new, relu)", s);
    return 0;
}

static int parse_posenc(const cfg_ctx *cx, const json_t *obj, td_config *c)
{
    static const struct { const char *name; td_posenc p; } names[] = {
        {"sinusoidal", TD_POS_SINUSOIDAL},
        {"sinusoidal_interleaved", TD_POS_SINUSOIDAL_INTERLEAVED},
        {"learned", TD_POS_LEARNED},
        {"relative", TD_POS_RELATIVE},
        {"rope", TD_POS_ROPE},
    };
    const char *s = NULL;
    if (get_string_opt(cx, obj, "position_encoding", &s) != 0)
        return -1;
    c->position_encoding = TD_POS_SINUSOIDAL;
    if (s) {
        size_t i, n = sizeof names / sizeof names[0];
        for (i = 0; i < n; i++)
            if (strcmp(s, names[i].name) == 0)
                break;
        if (i == n)
            return cfg_fail(cx, "position_encoding",
                            "unsupported value '%.64s' (supported: sinusoidal, "
                            "sinusoidal_interleaved, learned, relative, rope)", s);
        c->position_encoding = names[i].p;
    }

    int present;
    c->relative_attention_max_distance = 0;
    if (get_int_opt(cx, obj, "relative_attention_max_distance", 1, 4096, 0,
                    &c->relative_attention_max_distance, &present) != 0)
        return -1;
    if (c->position_encoding == TD_POS_RELATIVE && !present)
        return cfg_fail(cx, "relative_attention_max_distance",
                        "missing (required integer in [1, 4096] when position_encoding is 'relative')");

    c->rope_theta = 10000.0f;
    if (get_float_opt(cx, obj, "rope_theta", 1, &c->rope_theta) != 0)
        return -1;

    /* Marian's layout (sin | cos halves) copes with an odd width as
     * transformers' MarianSinusoidalPositionalEmbedding does; the interleaved
     * layout pairs columns and needs an even one. */
    if (c->position_encoding == TD_POS_SINUSOIDAL_INTERLEAVED && c->d_model % 2 != 0)
        return cfg_fail(cx, "position_encoding",
                        "'sinusoidal_interleaved' requires an even d_model (got %d)", c->d_model);
    /* Rotate-half pairs dimension i with i + head_dim/2 in every head. */
    if (c->position_encoding == TD_POS_ROPE) {
        int enc_hd = c->d_model / c->encoder_attention_heads;
        int dec_hd = c->d_model / c->decoder_attention_heads;
        if (enc_hd % 2 != 0 || dec_hd % 2 != 0)
            return cfg_fail(cx, "position_encoding",
                            "'rope' requires an even head dim (d_model %d / encoder_attention_heads %d = %d, "
                            "d_model %d / decoder_attention_heads %d = %d)",
                            c->d_model, c->encoder_attention_heads, enc_hd,
                            c->d_model, c->decoder_attention_heads, dec_hd);
    }
    return 0;
}

static int parse_architecture(const cfg_ctx *cx, const json_t *obj, td_config *c)
{
    const char *mt = NULL;
    if (get_string_opt(cx, obj, "model_type", &mt) != 0)
        return -1;
    /* The architecture table (arch.h) decides what a model_type means. */
    const td_arch *arch = td_arch_find(mt ? mt : "marian");
    if (!arch) {
        char known[256];
        return cfg_fail(cx, "model_type", "unknown architecture '%s' (known: %s)", mt,
                        td_arch_known(known, sizeof known));
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", arch->model_type);

    if (get_int_req(cx, obj, "d_model", 1, 65536, &c->d_model) != 0 ||
        get_int_req(cx, obj, "encoder_layers", 1, 256, &c->encoder_layers) != 0 ||
        get_int_req(cx, obj, "decoder_layers", 1, 256, &c->decoder_layers) != 0 ||
        get_int_req(cx, obj, "encoder_attention_heads", 1, 1024, &c->encoder_attention_heads) != 0 ||
        get_int_req(cx, obj, "decoder_attention_heads", 1, 1024, &c->decoder_attention_heads) != 0 ||
        get_int_req(cx, obj, "encoder_ffn_dim", 1, 1 << 20, &c->encoder_ffn_dim) != 0 ||
        get_int_req(cx, obj, "decoder_ffn_dim", 1, 1 << 20, &c->decoder_ffn_dim) != 0 ||
        get_int_req(cx, obj, "max_position_embeddings", 1, 1 << 20, &c->max_position_embeddings) != 0 ||
        get_int_req(cx, obj, "vocab_size", 1, 1 << 24, &c->vocab_size) != 0)
        return -1;

    if (c->d_model % c->encoder_attention_heads != 0)
        return cfg_fail(cx, "d_model", "must be divisible by encoder_attention_heads (d_model %d, "
                        "encoder_attention_heads %d)", c->d_model, c->encoder_attention_heads);
    if (c->d_model % c->decoder_attention_heads != 0)
        return cfg_fail(cx, "d_model", "must be divisible by decoder_attention_heads (d_model %d, "
                        "decoder_attention_heads %d)", c->d_model, c->decoder_attention_heads);

    int present;
    c->decoder_vocab_size = c->vocab_size;
    if (get_int_opt(cx, obj, "decoder_vocab_size", 1, 1 << 24, 1, &c->decoder_vocab_size, &present) != 0)
        return -1;

    c->share_encoder_decoder_embeddings = 1;
    c->tie_word_embeddings = 1;
    c->scale_embedding = td_arch_defaults_of(arch)->scale_embedding;
    c->normalize_before = 0;
    if (get_bool_opt(cx, obj, "share_encoder_decoder_embeddings", &c->share_encoder_decoder_embeddings) != 0 ||
        get_bool_opt(cx, obj, "tie_word_embeddings", &c->tie_word_embeddings) != 0 ||
        get_bool_opt(cx, obj, "scale_embedding", &c->scale_embedding) != 0 ||
        get_bool_opt(cx, obj, "normalize_before", &c->normalize_before) != 0)
        return -1;
    if (c->share_encoder_decoder_embeddings && c->decoder_vocab_size != c->vocab_size)
        return cfg_fail(cx, "decoder_vocab_size",
                        "must equal vocab_size (%d) when share_encoder_decoder_embeddings is true (got %d)",
                        c->vocab_size, c->decoder_vocab_size);

    if (parse_activation(cx, obj, arch, c) != 0)
        return -1;

    c->layer_norm_eps = 1e-5f; /* torch.nn.LayerNorm default, used by Marian */
    if (get_float_opt(cx, obj, "layer_norm_eps", 1, &c->layer_norm_eps) != 0)
        return -1;

    c->relative_attention_values = 0; /* set by the weight loader */
    if (parse_posenc(cx, obj, c) != 0)
        return -1;
    if (arch->pre_norm != TD_SWITCH_CONFIG)
        c->normalize_before = arch->pre_norm;
    if (arch->position_encoding != TD_SWITCH_CONFIG)
        c->position_encoding = (td_posenc)arch->position_encoding;
    /* fairseq's table pairs frequencies over d/2 - 1 steps */
    if (c->position_encoding == TD_POS_SINUSOIDAL_FAIRSEQ && c->d_model < 4)
        return cfg_fail(cx, "d_model", "must be at least 4 for model_type '%s' (got %d)",
                        arch->model_type, c->d_model);
    return 0;
}

/* ---- token ids ----------------------------------------------------------- */

/* eos_token_id: an int, or a list of ints (some configs list several end
 * tokens); every element is validated and the first is used. */
static int get_eos(const cfg_ctx *cx, const json_t *obj, int hi, int null_is_unset, int *out)
{
    const char *key = "eos_token_id";
    const json_t *v = json_object_get(obj, key);
    if (!v || (null_is_unset && json_is_null(v)))
        return 0;
    if (!json_is_array(v))
        return int_value(cx, key, v, 0, (long long)hi - 1, out);
    size_t n = json_array_size(v);
    if (n == 0)
        return cfg_fail(cx, key, "must be an integer or a non-empty list of integers (got an empty list)");
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        int x;
        if (int_value(cx, key, json_array_get(v, i), 0, (long long)hi - 1, &x) != 0)
            return -1;
        if (i == 0)
            first = x;
    }
    *out = first;
    return 0;
}

/* Reads the token ids. In config.json (gen == 0) absent keys take the
 * architecture's defaults (its config class's, td_arch_defaults); in generation_config.json they override only when
 * present and non-null. All of pad/eos/decoder_start/bos/forced_eos are
 * decoder-side ids, checked against decoder_vocab_size; pad also pads the
 * source, so it is checked against vocab_size too. */
static int parse_token_ids(const cfg_ctx *cx, const json_t *obj, int gen, td_config *c)
{
    int present;
    int dv = c->decoder_vocab_size;
    long long pad_hi = (long long)(dv < c->vocab_size ? dv : c->vocab_size) - 1;

    const td_arch_defaults *df = td_arch_defaults_of(td_arch_find(c->model_type));
    if (!gen) {
        c->pad_token_id = df->pad_token_id;
        c->eos_token_id = df->eos_token_id;
        c->decoder_start_token_id = df->decoder_start_token_id;
        c->bos_token_id = -1;
        /* the config class's default, when it fits the vocabulary */
        c->forced_eos_token_id = df->forced_eos_token_id < dv ? df->forced_eos_token_id : -1;
        const json_t *fe = json_object_get(obj, "forced_eos_token_id");
        if (fe && json_is_null(fe))
            c->forced_eos_token_id = -1;
    }

    if (get_int_opt(cx, obj, "pad_token_id", 0, pad_hi, gen, &c->pad_token_id, &present) != 0)
        return -1;
    /* The default itself must fit the vocabularies. */
    if (!gen && !present && c->pad_token_id > pad_hi)
        return cfg_fail(cx, "pad_token_id", "missing, and the %s default %d is outside "
                        "[0, %lld] (vocab_size %d, decoder_vocab_size %d)", c->model_type,
                        c->pad_token_id, pad_hi, c->vocab_size, dv);

    if (get_eos(cx, obj, dv, gen, &c->eos_token_id) != 0)
        return -1;

    if (get_int_opt(cx, obj, "decoder_start_token_id", 0, (long long)dv - 1, gen,
                    &c->decoder_start_token_id, &present) != 0)
        return -1;
    if (!gen && !present && c->decoder_start_token_id >= dv)
        return cfg_fail(cx, "decoder_start_token_id", "missing, and the %s default %d is "
                        "outside [0, %d) (decoder_vocab_size)", c->model_type,
                        c->decoder_start_token_id, dv);

    /* Informational / optional ids: null means none (config.json, where the
     * default is already -1) or unset (generation_config.json). */
    if (get_int_opt(cx, obj, "bos_token_id", 0, (long long)dv - 1, 1, &c->bos_token_id, &present) != 0 ||
        get_int_opt(cx, obj, "forced_eos_token_id", 0, (long long)dv - 1, 1,
                    &c->forced_eos_token_id, &present) != 0)
        return -1;
    return 0;
}

/* ---- generation ---------------------------------------------------------- */

/* Generation settings gathered from both files before they are committed:
 * which file set num_beams / num_return_sequences (for the cross check) and
 * whether any file set bad_words_ids. */
typedef struct gen_state {
    const char *beams_file, *nrs_file;
    int have_bad_words;
} gen_state;

static int parse_bad_words(const cfg_ctx *cx, const json_t *v, td_config *c)
{
    const char *key = "bad_words_ids";
    if (!json_is_array(v))
        return cfg_fail(cx, key, "must be a list of lists of token ids (got %s)", json_kind(v));
    size_t n = json_array_size(v);
    if (n > TD_MAX_SUPPRESS)
        return cfg_fail(cx, key, "at most %d entries are supported (got %zu)", TD_MAX_SUPPRESS, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_array(e))
            return cfg_fail(cx, key, "entry %zu must be a list of token ids (got %s)", i, json_kind(e));
        size_t m = json_array_size(e);
        if (m == 0)
            return cfg_fail(cx, key, "entry %zu is empty", i);
        if (m > 1)
            return cfg_fail(cx, key, "entry %zu has %zu tokens: multi-token entries are unsupported "
                            "(only single-token entries)", i, m);
        if (int_value(cx, key, json_array_get(e, 0), 0, (long long)c->decoder_vocab_size - 1,
                      &c->suppress[i]) != 0)
            return -1;
    }
    c->n_suppress = (int)n;
    return 0;
}

static int parse_generation(const cfg_ctx *cx, const json_t *obj, gen_state *gs, td_config *c)
{
    int present;
    if (get_int_opt(cx, obj, "num_beams", 1, 16, 1, &c->num_beams, &present) != 0)
        return -1;
    if (present)
        gs->beams_file = cx->file;
    if (get_int_opt(cx, obj, "max_length", 2, 1 << 20, 1, &c->max_length, &present) != 0)
        return -1;
    if (get_int_opt(cx, obj, "num_return_sequences", 1, 16, 1, &c->num_return_sequences, &present) != 0)
        return -1;
    if (present)
        gs->nrs_file = cx->file;

    const json_t *v = json_object_get(obj, "length_penalty");
    if (v && !json_is_null(v) && get_float_opt(cx, obj, "length_penalty", 0, &c->length_penalty) != 0)
        return -1;

    v = json_object_get(obj, "early_stopping");
    if (v && !json_is_null(v)) {
        if (json_is_boolean(v))
            c->early_stopping = json_is_true(v) ? TD_EARLY_STOP_TRUE : TD_EARLY_STOP_HEURISTIC;
        else if (json_is_string(v) && strcmp(json_string_value(v), "never") == 0)
            c->early_stopping = TD_EARLY_STOP_NEVER;
        else
            return cfg_fail(cx, "early_stopping", "must be true, false or \"never\" (got %s)", json_kind(v));
    }

    v = json_object_get(obj, "bad_words_ids");
    if (v && !json_is_null(v)) {
        if (parse_bad_words(cx, v, c) != 0)
            return -1;
        gs->have_bad_words = 1;
    }
    return 0;
}

/* ---- entry points -------------------------------------------------------- */

static json_t *load_object(const cfg_ctx *cx, const char *text)
{
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        cfg_fail(cx, NULL, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        cfg_fail(cx, NULL, "top level must be a JSON object (got %s)", json_kind(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* The generation settings' defaults (config.h). */
static void config_defaults(td_config *c)
{
    memset(c, 0, sizeof *c);
    c->num_beams = 4;
    c->max_length = 512;
    c->length_penalty = 1.0f;
    c->early_stopping = TD_EARLY_STOP_HEURISTIC;
    c->num_return_sequences = 1;
}

int td_config_parse(td_config *cfg, const char *config_json, const char *gen_json,
                    char *err, size_t errlen)
{
    cfg_ctx cx = {CFG_FILE, err, errlen};
    if (err && errlen)
        err[0] = '\0';
    if (!cfg || !config_json)
        return cfg_fail(&cx, NULL, "no config text given");

    td_config c;
    config_defaults(&c);

    gen_state gs = {NULL, CFG_FILE, 0};
    int rc = -1;
    json_t *gen = NULL;
    json_t *root = load_object(&cx, config_json);
    if (!root)
        goto out;
    if (parse_architecture(&cx, root, &c) != 0 ||
        parse_token_ids(&cx, root, 0, &c) != 0 ||
        parse_generation(&cx, root, &gs, &c) != 0)
        goto out;
    /* fairseq's make_positions: the padding_idx of the position tables is
     * config.json's pad_token_id */
    const td_arch *arch = td_arch_find(c.model_type);
    c.position_offset = arch->positions_after_pad ? c.pad_token_id + 1 : 0;
    c.position_pad = arch->positions_after_pad;

    if (gen_json) {
        cx.file = GEN_FILE;
        gen = load_object(&cx, gen_json);
        if (!gen)
            goto out;
        if (parse_token_ids(&cx, gen, 1, &c) != 0 ||
            parse_generation(&cx, gen, &gs, &c) != 0)
            goto out;
    }

    /* Beam search returns at most num_beams hypotheses (transformers raises
     * the same error). Blame the file that set num_return_sequences. */
    if (c.num_return_sequences > c.num_beams) {
        cx.file = gs.nrs_file;
        cfg_fail(&cx, "num_return_sequences", "must be <= num_beams (got %d > %d, num_beams from %s)",
                 c.num_return_sequences, c.num_beams, gs.beams_file ? gs.beams_file : "the default");
        goto out;
    }
    if (!gs.have_bad_words && td_arch_defaults_of(arch)->suppress_pad) {
        c.suppress[0] = c.pad_token_id;
        c.n_suppress = 1;
    }
    *cfg = c;
    rc = 0;
out:
    json_decref(gen);
    json_decref(root);
    return rc;
}

/* Reads a whole regular file (at most CFG_MAX_FILE_BYTES) as a C string.
 * Returns NULL with *missing set when the file does not exist and
 * missing_ok is set; NULL with a message otherwise. The caller frees. */
static char *read_text(const cfg_ctx *cx, const char *path, int missing_ok, int *missing)
{
    char ebuf[128];
    *missing = 0;
    int not_regular;
    FILE *f = spm_fopen_regular(path, &not_regular);
    if (!f && not_regular) {
        cfg_fail(cx, NULL, "'%s' is not a regular file", path);
        return NULL;
    }
    if (!f) {
        int e = errno;
        if (missing_ok && e == ENOENT) {
            *missing = 1;
            return NULL;
        }
        if (strerror_r(e, ebuf, sizeof ebuf) != 0)
            snprintf(ebuf, sizeof ebuf, "errno %d", e);
        cfg_fail(cx, NULL, "cannot open '%s': %s", path, ebuf);
        return NULL;
    }
    char *buf = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        if (strerror_r(e, ebuf, sizeof ebuf) != 0)
            snprintf(ebuf, sizeof ebuf, "errno %d", e);
        cfg_fail(cx, NULL, "cannot stat '%s': %s", path, ebuf);
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        cfg_fail(cx, NULL, "'%s' is not a regular file", path);
        goto fail;
    }
    if (st.st_size < 0 || (unsigned long long)st.st_size > CFG_MAX_FILE_BYTES) {
        cfg_fail(cx, NULL, "'%s' is too large (%lld bytes, limit %zu)", path,
                 (long long)st.st_size, CFG_MAX_FILE_BYTES);
        goto fail;
    }
    /* Read up to one byte past the limit so a file that grew is caught. */
    size_t cap = (size_t)st.st_size + 1;
    if (cap > CFG_MAX_FILE_BYTES + 1)
        cap = CFG_MAX_FILE_BYTES + 1;
    buf = malloc(cap + 1);
    if (!buf) {
        cfg_fail(cx, NULL, "out of memory reading '%s'", path);
        goto fail;
    }
    size_t n = fread(buf, 1, cap, f);
    if (ferror(f)) {
        int e = errno;
        if (strerror_r(e, ebuf, sizeof ebuf) != 0)
            snprintf(ebuf, sizeof ebuf, "errno %d", e);
        cfg_fail(cx, NULL, "cannot read '%s': %s", path, ebuf);
        goto fail;
    }
    if (n > CFG_MAX_FILE_BYTES) {
        cfg_fail(cx, NULL, "'%s' is too large (limit %zu bytes)", path, CFG_MAX_FILE_BYTES);
        goto fail;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        cfg_fail(cx, NULL, "'%s' contains a NUL byte", path);
        goto fail;
    }
    fclose(f);
    return buf;
fail:
    free(buf);
    fclose(f);
    return NULL;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + 1 + b + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* The configuration a weight format describes (wformat.h's config hook):
 * its architecture and token ids over the generation defaults, checked
 * against the architecture table like config.json's. */
static int config_from_weights(td_config *cfg, const td_wformat *f, const char *dir, char *err,
                               size_t errlen)
{
    td_config c;
    config_defaults(&c);
    td_wsrc s;
    if (td_wsrc_open(&s, dir, err, errlen) != 0)
        return -1;
    int rc = f->config(&s, dir, &c, err, errlen);
    td_wsrc_close(&s);
    if (rc != 0)
        return -1;
    if (!td_arch_find(c.model_type)) {
        snprintf(err, errlen, "%s: no architecture '%s'", f->file, c.model_type);
        return -1;
    }
    *cfg = c;
    return 0;
}

int td_config_load(td_config *cfg, const char *dir, char *err, size_t errlen)
{
    cfg_ctx cx = {CFG_FILE, err, errlen};
    if (err && errlen)
        err[0] = '\0';
    if (!cfg || !dir)
        return cfg_fail(&cx, NULL, "no model directory given");
    char wpath[4200];
    uint64_t wbytes;
    const td_wformat *f = td_wformat_probe(dir, wpath, sizeof wpath, &wbytes);
    if (f && f->config)
        return config_from_weights(cfg, f, dir, err, errlen);

    int rc = -1, missing;
    char *cfg_text = NULL, *gen_text = NULL;
    char *cfg_path = join_path(dir, CFG_FILE);
    char *gen_path = join_path(dir, GEN_FILE);
    if (!cfg_path || !gen_path) {
        cfg_fail(&cx, NULL, "out of memory");
        goto out;
    }
    cfg_text = read_text(&cx, cfg_path, 0, &missing);
    if (!cfg_text)
        goto out;
    cx.file = GEN_FILE;
    gen_text = read_text(&cx, gen_path, 1, &missing);
    if (!gen_text && !missing)
        goto out;
    rc = td_config_parse(cfg, cfg_text, gen_text, err, errlen);
out:
    free(cfg_text);
    free(gen_text);
    free(cfg_path);
    free(gen_path);
    return rc;
}

const char *td_posenc_name(td_posenc p)
{
    switch (p) {
    case TD_POS_SINUSOIDAL: return "sinusoidal";
    case TD_POS_SINUSOIDAL_INTERLEAVED: return "sinusoidal_interleaved";
    case TD_POS_LEARNED: return "learned";
    case TD_POS_RELATIVE: return "relative";
    case TD_POS_ROPE: return "rope";
    case TD_POS_SINUSOIDAL_CT2: return "sinusoidal_ct2";
    case TD_POS_SINUSOIDAL_FAIRSEQ: return "sinusoidal_fairseq";
    }
    return "unknown";
}

/* "silu" is canonical; "swish" (what OPUS-MT configs say) is an alias. */
const char *td_activation_name(td_activation a)
{
    switch (a) {
    case TD_ACT_NONE: return "none";
    case TD_ACT_RELU: return "relu";
    case TD_ACT_GELU: return "gelu";
    case TD_ACT_GELU_NEW: return "gelu_new";
    case TD_ACT_SILU: return "silu";
    }
    return "unknown";
}
