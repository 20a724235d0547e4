/*
 * admin.c - the model administration API (admin.h): the models as GET
 * /v1/models lists them, and loads, reloads and unloads at run time.
 * Loads and reloads run on the model manager's thread (models.h); the call
 * waits suspended under one hold, released by the operation's completion.
 */
#define _XOPEN_SOURCE 700 /* realpath (a load's path below --models-dir) */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "admin.h"
#include "buildinfo.h"
#include "cache.h"
#include "languages.h"
#include "langid.h"
#include "memstat.h"
#include "models.h"

#define SRV_MODELS_PREFIX "/v1/models/"

json_t *srv_admin_model_json(const srv_server *s, const srv_model *sm)
{
    const td_config *c = td_model_config(sm->m);
    static const char *const pe[] = {"sinusoidal", "sinusoidal_interleaved", "learned",
                                     "relative", "rope"};
    json_t *arch = json_pack(
        "{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b}", "model_type",
        c->model_type[0] ? c->model_type : "marian", "d_model", c->d_model, "encoder_layers",
        c->encoder_layers, "decoder_layers", c->decoder_layers, "encoder_attention_heads",
        c->encoder_attention_heads, "decoder_attention_heads", c->decoder_attention_heads,
        "encoder_ffn_dim", c->encoder_ffn_dim, "decoder_ffn_dim", c->decoder_ffn_dim,
        "vocab_size", c->vocab_size, "decoder_vocab_size", c->decoder_vocab_size,
        "max_position_embeddings", c->max_position_embeddings, "position_encoding",
        (unsigned)c->position_encoding < 5 ? pe[c->position_encoding] : "unknown",
        "normalize_before", c->normalize_before);
    const char *failed = srv_model_failed(sm);
    json_t *o = json_pack(
        "{s:s,s:{s:s,s:s},s:o,s:s,s:s,s:I,s:{s:I,s:I,s:i,s:I,s:I},s:i,s:s,s:b,"
        "s:{s:i,s:i,s:f},s:{s:i,s:i,s:i,s:i}}",
        "name", sm->name, "languages", "source", sm->src_lang, "target", sm->tgt_lang,
        "architecture", arch, "dtype", sm->dtype, "device", sm->device, "weight_bytes",
        (json_int_t)sm->weight_bytes, "memory", "bytes", (json_int_t)sm->bytes, "weight_bytes",
        (json_int_t)sm->weight_bytes, "workers", sm->workers, "worker_bytes",
        (json_int_t)sm->worker_bytes, "resident_bytes",
        (json_int_t)srv_model_resident_bytes(sm), "generation", (int)sm->generation, "status",
        failed ? "device_error" : "ready", "resident", atomic_load(&sm->resident), "defaults", "beam_size", sm->defaults.beam_size,
        "max_length", sm->defaults.max_length, "length_penalty",
        (double)sm->defaults.length_penalty, "limits", "max_input_tokens", sm->max_input_tokens,
        "max_length", sm->max_length, "max_batch_texts", s->api->max_batch_texts, "max_beam_size",
        sm->max_beam);
    /* a multilingual model: its languages, in its tokenizer's codes */
    json_t *codes = sm->n_langs > 0 && o ? json_array() : NULL;
    for (int i = 0; codes && i < sm->n_langs; i++)
        json_array_append_new(codes, json_string(td_tok_lang(sm->tok, i)));
    if (codes)
        json_object_set_new(json_object_get(o, "languages"), "codes", codes);
    return o;
}

/* Where the process's resident memory is (memstat.h): the resident set,
 * its file-backed part, the heap in use and its parts: the models'
 * weights (models), the shared workers' arenas (workers), the detector's
 * profiles, the cache's
 * entries, and the rest of the heap (tokenizers, requests, threads'
 * arenas). */
static json_t *process_memory(const srv_server *s, size_t models, size_t workers)
{
    srv_memstat m;
    srv_memstat_read(&m);
    srv_cache_stats cs = {0};
    if (s->cache)
        srv_cache_stats_get(s->cache, &cs);
    size_t langid = srv_langid_bytes(s->langid);
    size_t known = models + workers + langid + cs.bytes;
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "rss_bytes", (json_int_t)m.rss,
                     "file_bytes", (json_int_t)m.file, "heap_bytes", (json_int_t)m.heap,
                     "heap_free_bytes", (json_int_t)m.heap_free, "models_bytes",
                     (json_int_t)models, "workers_bytes", (json_int_t)workers,
                     "langid_bytes", (json_int_t)langid, "cache_bytes",
                     (json_int_t)cs.bytes, "other_heap_bytes",
                     (json_int_t)(m.heap > known ? m.heap - known : 0));
}

/* GET /v1/models, once the configured models serve. */
static void admin_list(srv_req *r)
{
    srv_server *s = r->s;
    if (!atomic_load(&s->ready)) {
        srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
        return;
    }
    srv_model *all[64];
    int n = srv_models_snapshot(s->models, all, 64);
    json_t *list = json_array();
    size_t used, budget, models = 0;
    for (int i = 0; i < n; i++) { /* read before the reference goes back */
        json_array_append_new(list, srv_admin_model_json(s, all[i]));
        models += srv_model_resident_bytes(all[i]);
        srv_model_put(all[i]);
    }
    srv_models_memory(s->models, &used, &budget);
    srv_workers_info wi;
    srv_models_workers(s->models, &wi);
    srv_req_object(
        r, 200,
        json_pack("{s:o,s:{s:I,s:o,s:{s:i,s:I,s:I},s:o},s:{s:s,s:s}}", "models", list, "memory",
                  "used", (json_int_t)used, "budget",
                  budget ? json_integer((json_int_t)budget) : json_null(), "workers", "count",
                  wi.seats, "scratch_bytes", (json_int_t)wi.scratch_bytes, "max_bytes",
                  (json_int_t)wi.max_bytes, "process",
                  process_memory(s, models, wi.scratch_bytes), "server", "version", srv_version,
                  "commit", srv_commit));
}

/* ---- run-time model changes --------------------------------------------------- */

/* "/v1/models/NAME" or "/v1/models/NAME/reload": NAME into name; 1 when
 * the path has that shape and NAME is a valid name. */
static int admin_path(const char *path, char *name, size_t n, int *reload)
{
    const char *p = path + strlen(SRV_MODELS_PREFIX);
    size_t k = strcspn(p, "/");
    *reload = !strcmp(p + k, "/reload");
    if (k == 0 || k >= n || (p[k] && !*reload))
        return 0;
    memcpy(name, p, k);
    name[k] = 0;
    return srv_model_name_ok(name);
}

/* DELETE /v1/models/NAME: unloads it (models.h: new requests stop at once,
 * the ones holding it finish on it). */
static void admin_unload(srv_req *r)
{
    char name[128], msg[512];
    int reload, inflight = 0;
    if (!admin_path(r->path, name, sizeof name, &reload) || reload) {
        srv_req_error(r, 404, "model_not_found", "model", "no such model path");
        return;
    }
    srv_err e = srv_models_unload(r->s->models, name, &inflight, msg, sizeof msg);
    if (e != SRV_OK) {
        srv_req_error(r, srv_req_status(e), e == SRV_ERR_NOT_FOUND  ? "model_not_found"
                                            : e == SRV_ERR_CONFLICT ? "conflict"
                                                                    : "internal",
                      "model", "%s", msg);
        return;
    }
    srv_req_object(r, 200, json_pack("{s:s,s:s,s:i}", "name", name, "status", "unloaded",
                                     "requests_in_flight", inflight));
}

/* A load's "path": a directory below --models-dir (resolved, links
 * followed, and still below it; a path with a NUL names none). 0, or -1
 * with an error recorded (404: no such directory there). */
static int load_path(srv_req *r, json_t *pv, char *out, size_t n)
{
    char base[4096], full[8300], real[4096];
    if (!realpath(r->s->o.models_dir, base)) {
        srv_req_error(r, 500, "internal", NULL, "--models-dir: cannot resolve it");
        return -1;
    }
    const char *path = json_string_value(pv);
    snprintf(full, sizeof full, "%s/%s", base, path);
    size_t bl = strlen(base);
    if (strlen(path) != json_string_length(pv) || !realpath(full, real) ||
        strncmp(real, base, bl) || (real[bl] != '/' && real[bl])) {
        srv_req_error(r, 404, "not_found", "path", "path names no directory below --models-dir");
        return -1;
    }
    snprintf(out, n, "%s", real);
    return 0;
}

/* The completion of a load or reload (the model manager's thread): the
 * outcome is in the request's op; its hold of the call is released. */
static void op_done(srv_model_op *op, void *ud)
{
    (void)op;
    srv_req *r = ud;
    srv_call_release(r->call);
}

/* Hands the request's operation to the model manager (a load takes seconds: no HTTP thread
 * waits for it). */
static srv_call_next submit_op(srv_req *r)
{
    srv_call_hold(r->call, 1);
    srv_model_op *op = r->state;
    op->done = op_done;
    op->ud = r;
    srv_models_submit(r->s->models, op);
    return SRV_NEXT_PENDING;
}

/* The request's operation, in its arena (the call is held while the
 * manager has it). */
static srv_model_op *new_op(srv_req *r)
{
    srv_model_op *op = srv_req_alloc(r, 1, sizeof *op);
    if (!op)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    r->state = op;
    return op;
}

/* POST /v1/models/NAME/reload. */
static srv_call_next admin_reload(srv_req *r)
{
    srv_model_op *op = new_op(r);
    int reload = 0;
    if (!op)
        return SRV_NEXT_ANSWERED;
    if (!admin_path(r->path, op->spec.name, sizeof op->spec.name, &reload) || !reload) {
        srv_req_error(r, 404, "not_found", NULL, "POST /v1/models/NAME/reload only");
        return SRV_NEXT_ANSWERED;
    }
    op->kind = SRV_OP_RELOAD;
    return submit_op(r);
}

/* POST /v1/models {"name", "path", "source"?, "target"?}: a run-time load. */
static srv_call_next admin_load(srv_req *r)
{
    srv_model_op *op = new_op(r);
    if (!op)
        return SRV_NEXT_ANSWERED;
    json_t *root = srv_req_json_body(r);
    if (!root)
        return SRV_NEXT_ANSWERED;
    static const char *const fields[] = {"name", "path", "source", "target"};
    const char *key, *v[4] = {NULL, NULL, NULL, NULL};
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val)
    {
        int known = 0;
        for (size_t i = 0; i < 4; i++)
            known |= !strcmp(key, fields[i]);
        if (!known) {
            srv_req_error(r, 400, "unknown_field", key, "unknown field '%s'", key);
            goto out;
        }
    }
    if (!r->s->o.models_dir) {
        srv_req_error(r, 403, "forbidden", "path",
                      "loading a model at run time needs --models-dir (the directory it loads "
                      "from)");
        goto out;
    }
    json_t *pv = json_object_get(root, "path");
    if (!json_is_string(pv)) {
        srv_req_error(r, 400, pv ? "invalid_type" : "missing_field", "path",
                      "path must be a string (a directory below --models-dir)");
        goto out;
    }
    if (srv_req_opt_string(r, root, "name", &v[0]) || srv_req_opt_string(r, root, "source", &v[2]) ||
        srv_req_opt_string(r, root, "target", &v[3]) ||
        load_path(r, pv, op->spec.dir, sizeof op->spec.dir) != 0)
        goto out;
    if (v[0] && !srv_model_name_ok(v[0])) {
        srv_req_error(r, 400, "invalid_name", "name",
                      "name must be 1..127 characters of A-Z a-z 0-9 . _ -");
        goto out;
    }
    if (v[0]) {
        snprintf(op->spec.name, sizeof op->spec.name, "%s", v[0]);
    } else {
        const char *b = strrchr(op->spec.dir, '/');
        snprintf(op->spec.name, sizeof op->spec.name, "%.127s", b ? b + 1 : op->spec.dir);
        if (!srv_model_name_ok(op->spec.name)) {
            srv_req_error(r, 400, "invalid_name", "name",
                          "the directory's name is no model name: give name");
            goto out;
        }
    }
    if (!v[2] != !v[3]) {
        srv_req_error(r, 400, "missing_field", v[2] ? "target" : "source",
                      "source and target go together");
        goto out;
    }
    if (v[2]) {
        snprintf(op->spec.langs, sizeof op->spec.langs, "%.15s-%.15s", v[2], v[3]);
        if (!srv_model_langs_ok(op->spec.langs)) {
            srv_req_error(r, 400, "invalid_language", "source",
                          "source and target must be 2- or 3-letter lower-case codes");
            goto out;
        }
    }
    op->kind = SRV_OP_LOAD;
    rc = 1;
out:
    json_decref(root);
    return rc ? submit_op(r) : SRV_NEXT_ANSWERED;
}

/* The request's operation finished: 201 for a load, 200 for a reload, or
 * the loader's error with its status. */
static srv_call_next admin_respond(srv_req *r)
{
    const srv_model_op *op = r->state;
    if (op->err != SRV_OK) {
        srv_req_error(r, srv_req_status(op->err), op->code, op->param[0] ? op->param : NULL, "%s",
                      op->msg);
        return SRV_NEXT_ANSWERED;
    }
    srv_model *sm = srv_models_get(r->s->models, op->name);
    json_t *m = sm ? srv_admin_model_json(r->s, sm) : NULL;
    srv_model_put(sm);
    srv_req_object(r, op->kind == SRV_OP_LOAD ? 201 : 200,
                   json_pack("{s:s,s:I,s:o*,s:s}", "name", op->name, "generation",
                             (json_int_t)op->generation, "model", m, "message", op->msg));
    return SRV_NEXT_ANSWERED;
}

/* ---- the routes ---------------------------------------------------------- */

/* The reload's pattern comes first: a path matching both is a reload's. */
static const srv_route k_admin_routes[] = {
    {"GET", "/v1/models", SRV_EP_MODELS, 0, admin_list, NULL, NULL, "/v1/models"},
    {"POST", "/v1/models", SRV_EP_MODELS, SRV_ROUTE_SERVING | SRV_ROUTE_KEY, NULL, admin_load,
     admin_respond, "/v1/models"},
    {"POST", SRV_MODELS_PREFIX "*/reload", SRV_EP_MODEL_ADMIN,
     SRV_ROUTE_SERVING | SRV_ROUTE_KEY | SRV_ROUTE_ANY_BODY, NULL, admin_reload, admin_respond,
     "/v1/models/{name}"},
    {"DELETE", SRV_MODELS_PREFIX "*", SRV_EP_MODEL_ADMIN, SRV_ROUTE_SERVING | SRV_ROUTE_KEY,
     admin_unload, NULL, NULL, "/v1/models/{name}"},
};

int srv_admin_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_admin_routes, (int)(sizeof k_admin_routes / sizeof k_admin_routes[0]), out, max);
}
