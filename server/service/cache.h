/*
 * cache.h - the translation cache: finished sentences kept by what decides
 * their result, so that a sentence seen again skips the engine and gets the
 * exact result it got then (docs/api.md, "The translation cache").
 *
 * The key: the model (its srv_model, which is one load of one directory:
 * a reload is a new one, and a model's entries are dropped when it is
 * freed, before its address can be reused, with its generation as a second
 * check), every decoding option that changes the result (beam size,
 * hypotheses, length penalty, max length, the attention asked and its
 * layers and heads, the forced target prefix: a multilingual model's target
 * language), and the sentence's source token ids. The value: the
 * engine's whole result (every hypothesis, the attention when it was
 * asked), copied. Exact: a hit returns those bytes, and the engine gives a
 * sentence the same result whatever runs beside it.
 *
 * An LRU bounded in bytes (the entries' own bytes: key, tokens, attention,
 * bookkeeping), one lock, shared by every worker and HTTP thread.
 *
 * Threads: any; every function takes the cache's lock (NULL: off, every
 * function a no-op or a miss).
 */
#ifndef SRV_CACHE_H
#define SRV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "translator.h"

typedef struct srv_cache srv_cache;

/* A cache of at most max_bytes (0: none, NULL). NULL too when out of
 * memory. */
srv_cache *srv_cache_new(size_t max_bytes);
void srv_cache_free(srv_cache *c); /* accepts NULL */

/* What a sentence's result depends on. */
typedef struct srv_cache_key {
    const void *model;     /* the srv_model */
    unsigned generation;
    const td_decode_opts *opts;
    const int32_t *src;
    int n_src;
} srv_cache_key;

/* A copy of the result stored under k into *out (td_result_free frees it):
 * 1; 0 for a miss (or out of memory). Counts a hit or a miss. */
int srv_cache_get(srv_cache *c, const srv_cache_key *k, td_result *out);

/* Stores a copy of res under k (the least recently used entries make
 * room; an entry larger than the whole cache is not kept). */
void srv_cache_put(srv_cache *c, const srv_cache_key *k, const td_result *res);

/* Drops every entry of model (it is being freed). */
void srv_cache_drop_model(srv_cache *c, const void *model);

typedef struct srv_cache_stats {
    uint64_t hits, misses, evictions;
    size_t bytes, max_bytes;
    long entries;
} srv_cache_stats;

void srv_cache_stats_get(srv_cache *c, srv_cache_stats *s);

#endif /* SRV_CACHE_H */
