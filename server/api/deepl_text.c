/*
 * deepl_text.c - the DeepL API's texts (deepl.h): /v2/translate, /v2/languages,
 * /v2/usage, the fields, languages and usage the documents share.
 *
 * Fields come as LibreTranslate's do (form.h: JSON, a form, multipart, the
 * query string), so a repeated form key "text" is a list as a JSON array
 * is. Languages are DeepL's codes: a target's variant (EN-GB, PT-BR) names
 * the language the models serve ("en", "pt"), ZH-HANT is "zt"; answers
 * give DeepL's codes back (detected_source_language "EN").
 *
 * /v2/translate: each text is a unit (tag_handling html: each paragraph,
 * as an .html document's, its inline markup placed by the alignment; xml,
 * or html with ignore_tags: each text node outside the ignored elements),
 * source_lang given or detected per text, the
 * units that need the model the request's texts (translate.h) as for the
 * other dialects; split_sentences 0 makes each unit one job, nonewlines
 * joins a unit's lines before it is split into sentences, 1 (the default
 * without tag_handling) splits at sentences and line breaks.
 *
 * Documents and the routes are deepl.c's.
 *
 * Usage: the characters of every text and document translated (their
 * source, markup included, as DeepL bills them) counted for the daemon's
 * key (it has one), refused with 456 past --deepl-character-limit, given
 * back when the translation fails.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "deepl.h"
#include "files.h"
#include "form.h"
#include "languages.h"
#include "models.h"
#include "translate.h"

#define DL_MAX_TEXTS 50        /* texts of one /v2/translate, as DeepL */
#define DL_MAX_TAGS 256        /* names of one of the tag lists */
#define DL_UNLIMITED 1000000000000LL /* character_limit without a limit, as DeepL's */

/* ---- the daemon's usage --------------------------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static long long g_chars;      /* characters translated */

/* Takes n characters of the quota: 0, or -1 when they would pass the limit. */
int srv_deepl_usage_take(const srv_server *s, long n)
{
    pthread_mutex_lock(&g_mu);
    long long lim = s->api->deepl_char_limit;
    int ok = !lim || g_chars + n <= lim;
    if (ok)
        g_chars += n;
    pthread_mutex_unlock(&g_mu);
    return ok ? 0 : -1;
}

void srv_deepl_usage_give_back(long n)
{
    pthread_mutex_lock(&g_mu);
    g_chars -= n;
    pthread_mutex_unlock(&g_mu);
}

/* Whether the quota is spent already. */
int srv_deepl_usage_spent(const srv_server *s)
{
    pthread_mutex_lock(&g_mu);
    int spent = s->api->deepl_char_limit && g_chars >= s->api->deepl_char_limit;
    pthread_mutex_unlock(&g_mu);
    return spent;
}

/* The characters (not bytes) of n bytes of UTF-8. */
long srv_deepl_chars(const char *t, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)t[i] & 0xC0) != 0x80;
    return c;
}

/* ---- a request's state ------------------------------------------------------ */


void srv_deepl_free(srv_req *r)
{
    dl_req *d = r->state;
    if (!d)
        return;
    for (int i = 0; i < d->n_texts; i++) {
        srv_html_free(d->texts[i].html);
        srv_office_free(d->texts[i].office);
        if (d->texts[i].xml)
            xmlFreeDoc(d->texts[i].xml);
    }
    free(d->texts);
    free(d->segs);
    json_decref(d->fields);
    free(d);
}

dl_req *srv_deepl_state(srv_req *r, json_t *fields)
{
    dl_req *d = calloc(1, sizeof *d);
    if (!d) {
        json_decref(fields);
        dl_error(r, 500, "out of memory");
        return NULL;
    }
    d->fields = fields;
    r->state = d;
    r->dialect_free = srv_deepl_free;
    return d;
}

/* ---- fields ------------------------------------------------------------------- */

/* "Authorization: DeepL-Auth-Key KEY" against the daemon's key: 1, or 0
 * with DeepL's 403 recorded. */
int srv_deepl_auth_ok(srv_req *r)
{
    const char *a = srv_call_header(r->call, "Authorization");
    const char *given = NULL;
    if (a && !strncasecmp(a, "DeepL-Auth-Key ", 15)) {
        given = a + 15;
        while (*given == ' ')
            given++;
    }
    if (srv_api_key_ok(r->s, given))
        return 1;
    dl_error(r, 403, "Authorization failure: %s",
             given ? "the DeepL-Auth-Key is not this server's key"
                   : "send Authorization: DeepL-Auth-Key KEY");
    return 0;
}

/* A string field (a one-element list as its element), NULL when absent:
 * 0, or -1 with a 400 naming it. */
int srv_deepl_field_str(srv_req *r, json_t *f, const char *key, const char **out)
{
    json_t *v = json_object_get(f, key);
    *out = NULL;
    if (json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        dl_error(r, 400, "Value for '%s' not supported.", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* A boolean field: JSON's, 0/1, or a form's "0", "1", "true", "false":
 * 0 or 1, dflt when absent, -1 with a 400 naming it. */
static int field_bool(srv_req *r, json_t *f, const char *key, int dflt)
{
    json_t *v = json_object_get(f, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
        return (int)json_integer_value(v);
    const char *s = json_is_string(v) ? json_string_value(v) : "?";
    if (!strcmp(s, "1") || !strcmp(s, "true"))
        return 1;
    if (!strcmp(s, "0") || !strcmp(s, "false"))
        return 0;
    dl_error(r, 400, "Value for '%s' not supported.", key);
    return -1;
}

/* A list of tag names: a JSON array of strings or strings of names
 * separated by commas, into *out (the arena). 0, or -1 with a 400. */
static int field_tags(srv_req *r, json_t *f, const char *key, char ***out, int *n)
{
    json_t *v = json_object_get(f, key);
    *out = NULL;
    *n = 0;
    if (!v || json_is_null(v))
        return 0;
    size_t nv = json_is_array(v) ? json_array_size(v) : 1;
    char **names = srv_req_alloc(r, DL_MAX_TAGS, sizeof *names);
    if (!names) {
        dl_error(r, 500, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < nv; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
            dl_error(r, 400, "Value for '%s' not supported.", key);
            return -1;
        }
        for (const char *p = json_string_value(e); *p;) {
            size_t k = strcspn(p, ",");
            const char *a = p, *b = p + k;
            while (a < b && isspace((unsigned char)*a))
                a++;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            if (b > a && *n == DL_MAX_TAGS) {
                dl_error(r, 400, "Value for '%s' not supported: more than %d tags.", key,
                         DL_MAX_TAGS);
                return -1;
            }
            if (b > a && !(names[(*n)++] = srv_call_strndup(r->call, a, (size_t)(b - a)))) {
                dl_error(r, 500, "out of memory");
                return -1;
            }
            p += k + (p[k] == ',');
        }
    }
    *out = names;
    return 0;
}

/* ---- languages ------------------------------------------------------------------ */

/* DeepL's code as ours ("EN-GB" -> "en", "PT-BR" -> "pt", "ZH-HANT" ->
 * "zt", "DE" -> "de"). */
static void lang_in(const char *code, char *out, size_t n)
{
    char low[32];
    size_t k = 0;
    for (; code[k] && k + 1 < sizeof low; k++)
        low[k] = (char)tolower((unsigned char)code[k]);
    low[k] = 0;
    if (!strcmp(low, "zh-hant")) {
        snprintf(out, n, "zt");
        return;
    }
    char *dash = strchr(low, '-');
    if (dash)
        *dash = 0;
    srv_lang_canon(low, out, n);
}

/* Our code as DeepL's source code ("de" -> "DE", "zt" -> "ZH"). */
static void lang_out(const char *code, char *out, size_t n)
{
    char c[16];
    srv_lang_canon(code, c, sizeof c);
    if (!strcmp(c, "zt"))
        snprintf(c, sizeof c, "zh");
    size_t k = 0;
    for (; c[k] && k + 1 < n; k++)
        out[k] = (char)toupper((unsigned char)c[k]);
    out[k] = 0;
}

int srv_deepl_detect(srv_server *s, const char *t, size_t n, const char *tgt, char *out,
                     size_t outn)
{
    srv_langs L;
    srv_langs_now(s, &L);
    const char *codes[SRV_LANGS_MAX + 1];
    int nc = srv_langs_sources(&L, tgt, codes);
    if (nc == 0)
        return -1;
    int has = 0;
    for (int i = 0; i < nc; i++)
        has |= srv_lang_same(codes[i], tgt);
    if (!has)
        codes[nc++] = tgt;
    srv_lang_score *sc = malloc((size_t)nc * sizeof *sc);
    int k = sc ? srv_langid_detect_among(s->langid, t, n, codes, nc, sc) : -1;
    if (k < 0) {
        free(sc);
        return -2;
    }
    /* none has a fingerprint: the first source */
    snprintf(out, outn, "%s", k > 0 ? sc[0].lang : codes[0]);
    free(sc);
    return 0;
}

/* source_lang (optional) and target_lang into ours: 0, or -1 with a 400. */
int srv_deepl_langs(srv_req *r, json_t *f, char *src, char *tgt)
{
    const char *s, *t;
    if (srv_deepl_field_str(r, f, "source_lang", &s) || srv_deepl_field_str(r, f, "target_lang", &t))
        return -1;
    if (!t || !*t) {
        dl_error(r, 400, "Parameter 'target_lang' not specified.");
        return -1;
    }
    srv_langs L;
    srv_langs_now(r->s, &L);
    src[0] = 0;
    if (s && *s) {
        lang_in(s, src, 16);
        if (!srv_langs_has(&L, src)) {
            dl_error(r, 400, "Value for 'source_lang' not supported.");
            return -1;
        }
    }
    lang_in(t, tgt, 16);
    const char *any[SRV_LANGS_MAX];
    if (!srv_langs_has(&L, tgt) || srv_langs_sources(&L, tgt, any) == 0) {
        dl_error(r, 400, "Value for 'target_lang' not supported.");
        return -1;
    }
    return 0;
}

/* formality: every target here is one without it, where DeepL takes
 * default and the prefer_ values and refuses more and less. */
int srv_deepl_formality_ok(srv_req *r, json_t *f)
{
    const char *v;
    if (srv_deepl_field_str(r, f, "formality", &v))
        return 0;
    if (!v || !strcmp(v, "default") || !strcmp(v, "prefer_more") || !strcmp(v, "prefer_less"))
        return 1;
    if (!strcmp(v, "more") || !strcmp(v, "less"))
        dl_error(r, 400, "'formality' is not supported for given 'target_lang'.");
    else
        dl_error(r, 400, "Value for 'formality' not supported.");
    return 0;
}

/* glossary_id: a glossary of the store (glossary.h), its dictionary for
 * the pair checked where the jobs are made (translate.c); an id the store
 * lacks is DeepL's unknown glossary. 1 to go on, 0 with the error. */
int srv_deepl_glossary_ok(srv_req *r, dl_req *d, json_t *f, const char *src)
{
    if (srv_deepl_field_str(r, f, "glossary_id", &d->glossary_id))
        return 0;
    if (!d->glossary_id)
        return 1;
    if (!src[0]) {
        dl_error(r, 400, "Use of a glossary requires the source_lang parameter to be specified.");
        return 0;
    }
    srv_glossary *g = NULL;
    srv_err e = srv_glossaries_get(r->s->glossaries, d->glossary_id, &g, NULL, 0);
    if (e != SRV_OK) { /* DeepL's message; srv_req_status: 404 for NOT_FOUND */
        dl_error(r, srv_req_status(e), "Glossary not found: %s", d->glossary_id);
        return 0;
    }
    srv_glossary_put(g);
    return srv_api_use_glossary(r, d->glossary_id, "glossary_id") == 0;
}

/* ---- /v2/translate: texts into units -------------------------------------------- */

/* A unit after the others; its line breaks made spaces (nonewlines). */
static int add_seg(srv_req *r, dl_req *d, xmlNode *node, const char *t, size_t n)
{
    if (d->n_segs == d->cap_segs) {
        int cap = d->cap_segs ? d->cap_segs * 2 : 16;
        dl_seg *p = realloc(d->segs, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        d->segs = p;
        d->cap_segs = cap;
    }
    size_t lead = node ? (size_t)(t - (const char *)node->content) : 0;
    if (d->split == SPLIT_NONEWLINES && (memchr(t, '\n', n) || memchr(t, '\r', n))) {
        char *c = srv_call_strndup(r->call, t, n);
        if (!c)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (c[i] == '\n' || c[i] == '\r')
                c[i] = ' ';
        t = c;
    }
    d->segs[d->n_segs++] =
        (dl_seg){.node = node, .text = t, .len = n, .lead = lead, .text_idx = -1};
    return 0;
}

static int ignored(const dl_req *d, const xmlChar *name, int html)
{
    if (html && (!xmlStrcasecmp(name, BAD_CAST "script") || !xmlStrcasecmp(name, BAD_CAST "style")))
        return 1;
    for (int i = 0; i < d->n_ignore; i++)
        if (html ? !xmlStrcasecmp(name, BAD_CAST d->ignore[i])
                 : !xmlStrcmp(name, BAD_CAST d->ignore[i]))
            return 1;
    return 0;
}

/* Every text node under n (and its siblings) outside the ignored
 * elements, without the white space around it, a unit. */
static int walk(srv_req *r, dl_req *d, xmlNode *n, int html)
{
    for (; n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE && !ignored(d, n->name, html)) {
            if (walk(r, d, n->children, html) != 0)
                return -1;
        } else if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content) {
            const char *a = (const char *)n->content, *b = a + strlen(a);
            while (a < b && isspace((unsigned char)*a))
                a++;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            if (b > a && add_seg(r, d, n, a, (size_t)(b - a)) != 0)
                return -1;
        }
    }
    return 0;
}

/* A text's XML under a root element of ours (a text may hold several
 * elements and text between them): 0, -2 when it is no XML. */
static int xml_parse(dl_text *x)
{
    static const char k_open[] = "<deepl-root>", k_close[] = "</deepl-root>";
    /* a whole document's declaration stays in front, as it was */
    const char *end = x->n > 5 && !memcmp(x->src, "<?xml", 5) ? strstr(x->src, "?>") : NULL;
    x->decl_n = end && (size_t)(end - x->src) + 2 <= x->n ? (size_t)(end - x->src) + 2 : 0;
    size_t body = x->n - x->decl_n;
    size_t n = sizeof k_open - 1 + body + sizeof k_close - 1;
    char *buf = malloc(n + 1);
    if (!buf)
        return -1;
    memcpy(buf, k_open, sizeof k_open - 1);
    memcpy(buf + sizeof k_open - 1, x->src + x->decl_n, body);
    memcpy(buf + sizeof k_open - 1 + body, k_close, sizeof k_close);
    x->xml = xmlReadMemory(buf, (int)n, NULL, "UTF-8",
                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    free(buf);
    return x->xml && xmlDocGetRootElement(x->xml) ? 0 : -2;
}

/* Text i's units: the text itself, or its markup's text nodes. 0; -1
 * with the error recorded. */
static int text_units(srv_req *r, dl_req *d, int i)
{
    dl_text *x = &d->texts[i];
    x->seg0 = d->n_segs;
    int rc = 0;
    if (d->tags == TAGS_NONE) {
        rc = add_seg(r, d, NULL, x->src, x->n);
    } else if (x->n > 0x7fffffff) {
        rc = -2;
    } else if (d->tags == TAGS_HTML && d->n_ignore == 0) {
        /* as an .html document: each paragraph whole sentences, its inline
         * markup placed on the words that translate it (office.h) */
        char why[256];
        rc = srv_office_parse(x->src, x->n, ".html", &x->office, why, sizeof why);
        for (int k = 0; rc == 0 && k < srv_office_n(x->office); k++) {
            const char *u = srv_office_source(x->office, k);
            rc = add_seg(r, d, NULL, u, strlen(u));
            if (rc == 0)
                d->segs[d->n_segs - 1].styled = srv_office_styled(x->office, k);
        }
    } else if (d->tags == TAGS_HTML) {
        char why[256];
        rc = srv_html_parse_tree(x->src, x->n, &x->html, why, sizeof why);
        if (rc == 0)
            rc = walk(r, d, srv_html_top(x->html), 1);
    } else {
        rc = xml_parse(x);
        if (rc == 0)
            rc = walk(r, d, xmlDocGetRootElement(x->xml)->children, 0);
    }
    x->n_segs = d->n_segs - x->seg0;
    if (rc == -2)
        dl_error(r, 400, "Tag handling parsing failed, please check input (text %d).", i);
    else if (rc != 0)
        dl_error(r, 500, "out of memory");
    return rc ? -1 : 0;
}

/* Text x's language (srv_deepl_detect), over its units' text: markup
 * is no language. */
static int detect_text(srv_req *r, const dl_req *d, dl_text *x, const char *tgt)
{
    if (d->tags == TAGS_NONE)
        return srv_deepl_detect(r->s, x->src, x->n, tgt, x->lang, sizeof x->lang);
    size_t n = 0;
    for (int k = 0; k < x->n_segs; k++)
        n += d->segs[x->seg0 + k].len + 1;
    char *t = malloc(n + 1), *w = t;
    if (!t)
        return -2;
    for (int k = 0; k < x->n_segs; k++) {
        const dl_seg *sg = &d->segs[x->seg0 + k];
        memcpy(w, sg->text, sg->len);
        w += sg->len;
        *w++ = '\n';
    }
    *w = 0;
    int rc = srv_deepl_detect(r->s, t, (size_t)(w - t), tgt, x->lang, sizeof x->lang);
    free(t);
    return rc;
}

/* Each text's source language: the one given, else detected among the
 * sources of the models into tgt; a text in tgt is copied. The model of
 * the others (one source language). 0, or -1 with the error. */
static int route_texts(srv_req *r, dl_req *d, const char *src, const char *tgt)
{
    int rc;
    for (int i = 0; i < d->n_texts; i++) {
        dl_text *x = &d->texts[i];
        if (src[0])
            snprintf(x->lang, sizeof x->lang, "%s", src);
        else if ((rc = detect_text(r, d, x, tgt)) != 0) {
            if (rc == -2)
                dl_error(r, 500, "out of memory");
            else
                dl_error(r, 400, "Value for 'target_lang' not supported.");
            return -1;
        }
        x->copy = srv_lang_same(x->lang, tgt);
        if (x->copy)
            continue;
        if (r->model && !srv_lang_same(x->lang, r->src_lang)) {
            dl_error(r, 400, "The texts are in several languages (%s, %s): give source_lang.",
                     r->src_lang, x->lang);
            return -1;
        }
        if (r->model)
            continue;
        r->model = srv_models_get_pair(r->s->models, x->lang, tgt);
        if (!r->model) {
            dl_error(r, 400, "No model translates %s into %s.", x->lang, tgt);
            return -1;
        }
        snprintf(r->src_lang, sizeof r->src_lang, "%s", x->lang);
        snprintf(r->tgt_lang, sizeof r->tgt_lang, "%s", tgt);
    }
    return 0;
}

/* The jobs of a paragraph of several styles capture the attention of the
 * model's last layer: their words' alignment places the markup. */
static void align_jobs(srv_req *r, dl_req *d)
{
    static const int k_last[] = {-1};
    td_decode_opts *o = &d->span_opts;
    *o = r->opts;
    o->return_attention = 1;
    o->attn_layers = k_last;
    o->n_attn_layers = 1;
    o->attn_heads = NULL;
    o->n_attn_heads = 0;
    for (int i = 0; i < d->n_segs; i++) {
        const dl_seg *sg = &d->segs[i];
        if (!sg->styled || sg->text_idx < 0)
            continue;
        const srv_split *sp = srv_api_split_of(r, sg->text_idx);
        for (int s = 0; s < (sp ? sp->n : 1); s++) {
            int j = sp ? sp->job[s] : r->pipe.text_job[sg->text_idx];
            if (j >= 0)
                r->pipe.jobs[j].opts = o;
        }
    }
}

/* The units of the texts not copied into the model's jobs: 1 to submit
 * them, 0 answered (an error, or nothing for the model). */
static int text_jobs(srv_req *r, dl_req *d)
{
    const char **texts = malloc((size_t)(d->n_segs + 1) * sizeof *texts);
    size_t *lens = malloc((size_t)(d->n_segs + 1) * sizeof *lens);
    int n = 0;
    if (!texts || !lens) {
        free(texts);
        free(lens);
        dl_error(r, 500, "out of memory");
        return 0;
    }
    for (int i = 0; i < d->n_texts; i++)
        for (int k = 0; !d->texts[i].copy && k < d->texts[i].n_segs; k++) {
            dl_seg *sg = &d->segs[d->texts[i].seg0 + k];
            sg->text_idx = n;
            texts[n] = sg->text;
            lens[n++] = sg->len;
        }
    int rc = 1;
    if (r->model && !srv_api_model_failed(r, r->model)) {
        r->opts = r->model->defaults;
        r->opts.num_hypotheses = 1;
        r->no_split = d->split == SPLIT_NONE;
        rc = srv_api_make_jobs(r, texts, lens, n, "text");
        if (rc == 1)
            align_jobs(r, d);
        if (!rc && r->call->status == 422)
            r->call->status = 413; /* DeepL's status for a request too large */
    } else if (r->model) {
        rc = 0;
    }
    free(texts);
    free(lens);
    return rc;
}

static int parse_options(srv_req *r, dl_req *d, json_t *f)
{
    const char *th, *ss = NULL;
    json_t *sv = json_object_get(f, "split_sentences");
    if (srv_deepl_field_str(r, f, "tag_handling", &th) ||
        (!json_is_integer(sv) && srv_deepl_field_str(r, f, "split_sentences", &ss)))
        return -1;
    d->tags = !th ? TAGS_NONE : !strcmp(th, "xml") ? TAGS_XML : !strcmp(th, "html") ? TAGS_HTML : -1;
    if (d->tags < 0) {
        dl_error(r, 400, "Value for 'tag_handling' not supported.");
        return -1;
    }
    if (json_is_integer(sv))
        ss = json_integer_value(sv) == 0 ? "0" : json_integer_value(sv) == 1 ? "1" : "?";
    d->split = !ss ? (d->tags ? SPLIT_NONEWLINES : SPLIT_ALL)
               : !strcmp(ss, "0") ? SPLIT_NONE
               : !strcmp(ss, "1") ? SPLIT_ALL
               : !strcmp(ss, "nonewlines") ? SPLIT_NONEWLINES : -1;
    if (d->split < 0) {
        dl_error(r, 400, "Value for 'split_sentences' not supported.");
        return -1;
    }
    /* accepted: what they ask is what happens here anyway (docs/api.md) */
    static const char *const k_bools[] = {"preserve_formatting", "outline_detection"};
    for (size_t i = 0; i < sizeof k_bools / sizeof k_bools[0]; i++)
        if (field_bool(r, f, k_bools[i], 0) < 0)
            return -1;
    d->show_billed = field_bool(r, f, "show_billed_characters", 0);
    char **unused;
    int n_unused;
    const char *context;
    if (d->show_billed < 0 || field_tags(r, f, "ignore_tags", &d->ignore, &d->n_ignore) ||
        field_tags(r, f, "non_splitting_tags", &unused, &n_unused) ||
        field_tags(r, f, "splitting_tags", &unused, &n_unused) ||
        srv_deepl_field_str(r, f, "context", &context))
        return -1;
    return srv_deepl_formality_ok(r, f) ? 0 : -1;
}

/* POST /v2/translate: 1 to submit the jobs, 0 answered. */

int srv_deepl_translate(srv_req *r, dl_req *d, json_t *f)
{
    json_t *tv = json_object_get(f, "text");
    if (!tv || json_is_null(tv) || (json_is_array(tv) && json_array_size(tv) == 0)) {
        dl_error(r, 400, "Parameter 'text' not specified.");
        return 0;
    }
    size_t n = json_is_array(tv) ? json_array_size(tv) : 1;
    if (n > DL_MAX_TEXTS || n > (size_t)r->s->api->max_batch_texts) {
        dl_error(r, 400, "Value for 'text' not supported: %zu texts (at most %d).", n,
                 r->s->api->max_batch_texts < DL_MAX_TEXTS ? r->s->api->max_batch_texts : DL_MAX_TEXTS);
        return 0;
    }
    char src[16], tgt[16];
    if (srv_deepl_langs(r, f, src, tgt) || parse_options(r, d, f) || !srv_deepl_glossary_ok(r, d, f, src))
        return 0;
    d->texts = calloc(n, sizeof *d->texts);
    if (!d->texts) {
        dl_error(r, 500, "out of memory");
        return 0;
    }
    d->n_texts = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(tv) ? json_array_get(tv, i) : tv;
        if (!json_is_string(e)) {
            dl_error(r, 400, "Value for 'text' not supported.");
            return 0;
        }
        d->texts[i].src = json_string_value(e);
        d->texts[i].n = json_string_length(e);
        d->billed += srv_deepl_chars(d->texts[i].src, d->texts[i].n);
        if (text_units(r, d, (int)i) != 0)
            return 0;
    }
    if (route_texts(r, d, src, tgt) != 0)
        return 0;
    if (srv_deepl_usage_take(r->s, d->billed) != 0) {
        d->billed = 0;
        dl_error(r, 456, "Quota exceeded. The character limit has been reached.");
        return 0;
    }
    if (!text_jobs(r, d)) {
        srv_deepl_usage_give_back(d->billed);
        d->billed = 0;
        return 0;
    }
    if (r->pipe.n_jobs == 0) {
        srv_deepl_translate_answer(r);
        return 0;
    }
    return 1;
}

/* ---- /v2/translate: the answer ------------------------------------------------------ */

/* Unit k's translation (its source when copied) as a JSON string. */
static json_t *seg_value(srv_req *r, const dl_seg *sg)
{
    return sg->text_idx >= 0 ? srv_api_text_value(r, sg->text_idx, 0)
                             : json_stringn(sg->text, sg->len);
}

/* An .html text's paragraphs translated, its markup placed (malloc'd,
 * NUL-terminated), or NULL. */
static char *office_text(srv_req *r, dl_req *d, dl_text *x)
{
    for (int k = 0; k < x->n_segs; k++) {
        const dl_seg *sg = &d->segs[x->seg0 + k];
        json_t *v = seg_value(r, sg);
        srv_align *al = NULL;
        int nb = v && sg->styled && sg->text_idx >= 0
                     ? srv_api_text_align(r, sg->text_idx, sg->text, sg->len, &al)
                     : 0;
        int rc = v && nb >= 0 ? srv_office_set(x->office, k, json_string_value(v), al, nb) : -1;
        srv_align_free(al, nb);
        json_decref(v);
        if (rc != 0)
            return NULL;
    }
    char why[256];
    size_t len = 0;
    char *out = srv_office_render(x->office, &len, why, sizeof why);
    char *t = out ? malloc(len + 1) : NULL;
    if (t) {
        memcpy(t, out, len);
        t[len] = 0;
    }
    free(out);
    return t;
}

/* A text of markup with its units' translations in place (malloc'd). */
static char *markup_text(srv_req *r, dl_req *d, dl_text *x)
{
    if (x->office)
        return office_text(r, d, x);
    for (int k = 0; k < x->n_segs; k++) {
        const dl_seg *sg = &d->segs[x->seg0 + k];
        if (sg->text_idx < 0)
            continue;
        json_t *v = seg_value(r, sg);
        const char *c = (const char *)sg->node->content;
        /* the white space around the unit's text stays */
        size_t lead = sg->lead, tail = strlen(c) - lead - sg->len;
        size_t vn = v ? json_string_length(v) : 0;
        char *t = v ? malloc(lead + vn + tail + 1) : NULL;
        if (t) {
            memcpy(t, c, lead);
            memcpy(t + lead, json_string_value(v), vn);
            memcpy(t + lead + vn, c + lead + sg->len, tail + 1);
            xmlNodeSetContent(sg->node, BAD_CAST t);
        }
        free(t);
        json_decref(v);
        if (!t)
            return NULL;
    }
    if (x->html)
        return srv_html_render(x->html);
    xmlBuffer *b = xmlBufferCreate();
    if (b && x->decl_n)
        xmlBufferAdd(b, (const xmlChar *)x->src, (int)x->decl_n);
    for (xmlNode *c = b ? xmlDocGetRootElement(x->xml)->children : NULL; c; c = c->next)
        xmlNodeDump(b, x->xml, c, 0, 0);
    char *out = b ? strdup((const char *)xmlBufferContent(b)) : NULL;
    if (b)
        xmlBufferFree(b);
    return out;
}

void srv_deepl_translate_answer(srv_req *r)
{
    dl_req *d = r->state;
    json_t *list = json_array();
    int oom = !list;
    for (int i = 0; !oom && i < d->n_texts; i++) {
        dl_text *x = &d->texts[i];
        json_t *v;
        if (x->copy && d->tags == TAGS_NONE)
            v = json_stringn(x->src, x->n);
        else if (d->tags == TAGS_NONE)
            v = seg_value(r, &d->segs[x->seg0]);
        else
            v = srv_api_text_json(x->copy ? strndup(x->src, x->n) : markup_text(r, d, x));
        char code[16];
        lang_out(x->lang, code, sizeof code);
        json_t *o = v ? json_pack("{s:s,s:o}", "detected_source_language", code, "text", v) : NULL;
        if (o && d->show_billed)
            json_object_set_new(o, "billed_characters", json_integer(srv_deepl_chars(x->src, x->n)));
        oom = !o || json_array_append_new(list, o) != 0;
    }
    if (oom) {
        json_decref(list);
        dl_error(r, 500, "out of memory building the response");
        return;
    }
    long tout = 0;
    for (int i = 0; i < r->pipe.n_jobs; i++)
        tout += r->pipe.jobs[i].res.hyps[0].n_tokens;
    r->tokens_out = tout;
    srv_req_object(r, 200, json_pack("{s:o}", "translations", list));
}

/* ---- /v2/languages, /v2/usage ---------------------------------------------------- */

static json_t *lang_entry(const char *code, const char *name, int target)
{
    return target ? json_pack("{s:s,s:s,s:b}", "language", code, "name", name,
                              "supports_formality", 0)
                  : json_pack("{s:s,s:s}", "language", code, "name", name);
}

/* A target language's entries: its variants as DeepL lists them. */
static void target_entries(json_t *list, const char *c)
{
    char up[16], name[96];
    if (!strcmp(c, "en") || !strcmp(c, "pt")) {
        int en = c[0] == 'e';
        snprintf(name, sizeof name, "%s (%s)", srv_lang_name(c), en ? "British" : "Brazilian");
        json_array_append_new(list, lang_entry(en ? "EN-GB" : "PT-BR", name, 1));
        snprintf(name, sizeof name, "%s (%s)", srv_lang_name(c), en ? "American" : "European");
        json_array_append_new(list, lang_entry(en ? "EN-US" : "PT-PT", name, 1));
        return;
    }
    if (!strcmp(c, "zt")) {
        json_array_append_new(list, lang_entry("ZH-HANT", srv_lang_name(c), 1));
        return;
    }
    lang_out(c, up, sizeof up);
    json_array_append_new(list, lang_entry(up, srv_lang_name(c), 1));
}

/* The served languages in DeepL's shapes: sources, or targets. */
static json_t *languages_list(const srv_server *s, int target)
{
    srv_langs L;
    srv_langs_now(s, &L);
    json_t *list = json_array();
    const char *codes[SRV_LANGS_MAX], *tmp[SRV_LANGS_MAX];
    int n = srv_langs_sources(&L, NULL, codes);
    if (target) /* every language some model translates into */
        for (int i = n = 0; i < L.n; i++)
            if (srv_langs_sources(&L, L.codes[i], tmp) > 0)
                codes[n++] = L.codes[i];
    char seen[SRV_LANGS_MAX][16];
    int n_seen = 0;
    for (int i = 0; list && i < n; i++) {
        char up[16];
        lang_out(codes[i], up, sizeof up);
        int dup = 0;
        for (int k = 0; k < n_seen; k++)
            dup |= !strcmp(seen[k], up);
        if (target) {
            target_entries(list, codes[i]);
        } else if (!dup) { /* zh and zt are one source, ZH */
            snprintf(seen[n_seen++], sizeof seen[0], "%s", up);
            json_array_append_new(list, lang_entry(up, srv_lang_name(codes[i]), 0));
        }
    }
    return list;
}

void srv_deepl_languages(srv_req *r, json_t *f)
{
    const char *type;
    if (srv_deepl_field_str(r, f, "type", &type))
        return;
    if (type && strcmp(type, "source") && strcmp(type, "target")) {
        dl_error(r, 400, "Value for 'type' not supported.");
        return;
    }
    srv_req_object(r, 200, languages_list(r->s, type && !strcmp(type, "target")));
}

/* The codes of languages_list as an enum (nul: with null, as absent). */
static json_t *codes_enum(const srv_server *s, int target, int nul)
{
    json_t *list = languages_list(s, target), *e = json_array();
    for (size_t i = 0; e && i < json_array_size(list); i++)
        json_array_append(e, json_object_get(json_array_get(list, i), "language"));
    if (nul)
        json_array_append_new(e, json_null());
    json_decref(list);
    return e;
}

void srv_deepl_openapi(const srv_server *s, json_t *doc)
{
    json_t *sc = json_object_get(json_object_get(doc, "components"), "schemas");
    json_t *tr = json_object_get(json_object_get(sc, "DeepLTranslateRequest"), "properties");
    json_t *dr = json_object_get(json_object_get(sc, "DeepLDocumentRequest"), "properties");
    json_t *fr = json_object_get(json_object_get(sc, "DeepLTranslateForm"), "properties");
    int max = s->api->max_batch_texts < DL_MAX_TEXTS ? s->api->max_batch_texts : DL_MAX_TEXTS;
    for (int o = 0; o < 2; o++) {
        json_t *t = json_object_get(o ? fr : tr, "text");
        json_t *texts = json_array_get(json_object_get(t, "oneOf"), 1);
        if (texts)
            json_object_set_new(texts, "maxItems", json_integer(max));
    }
    const char *const k_lang[] = {"target_lang", "source_lang"};
    json_t *objs[] = {tr, dr, fr};
    srv_langs L;
    srv_langs_now(s, &L);
    int ready = atomic_load(&s->ready) && L.n > 0;
    for (int o = 0; o < 3; o++)
        for (int k = 0; k < 2 && objs[o]; k++) {
            json_t *p = json_object_get(objs[o], k_lang[k]);
            if (!p)
                continue;
            if (ready) /* the translation's source may be absent or null */
                json_object_set_new(p, "enum", codes_enum(s, k == 0, o == 0 && k == 1));
            else /* an empty enum is not JSON Schema */
                json_object_del(p, "enum");
        }
}

void srv_deepl_usage(srv_req *r)
{
    pthread_mutex_lock(&g_mu);
    long long count = g_chars;
    pthread_mutex_unlock(&g_mu);
    long long lim = r->s->api->deepl_char_limit ? r->s->api->deepl_char_limit : DL_UNLIMITED;
    srv_req_object(r, 200, json_pack("{s:I,s:I}", "character_count", (json_int_t)count,
                                     "character_limit", (json_int_t)lim));
}
