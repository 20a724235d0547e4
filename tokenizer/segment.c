/*
 * segment.c - sentences of a text (ICU's sentence BreakIterator plus our
 * hard line boundaries and abbreviation rules) and the reassembly of their
 * translations; the contract is in segment.h.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include "segment.h"

/* ---- one ICU iterator per language, cloned per call ---------------------- */

#define SEG_MAX_LANGS 32

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char lang[16];
    UBreakIterator *bi;
} g_tmpl[SEG_MAX_LANGS];
static int g_n_tmpl;

/* A private iterator for lang (close with ubrk_close), or NULL. */
static UBreakIterator *iterator(const char *lang, char *err, size_t errlen)
{
    char code[16] = "und";
    if (lang && *lang) {
        size_t n = strspn(lang, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
        if (n == strlen(lang) && n < sizeof code)
            memcpy(code, lang, n + 1);
    }
    UErrorCode e = U_ZERO_ERROR;
    UBreakIterator *out = NULL;
    pthread_mutex_lock(&g_mu);
    int k = 0;
    while (k < g_n_tmpl && strcmp(g_tmpl[k].lang, code) != 0)
        k++;
    if (k == g_n_tmpl) {
        char loc[48];
        /* ICU's plain rules, without its suppressions (ss=standard): they
         * merged sentences at words like "app." and "OK."; the
         * abbreviations are ours, per language (k_abbrev) */
        snprintf(loc, sizeof loc, "%s", strcmp(code, "und") ? code : "root");
        UBreakIterator *bi = ubrk_open(UBRK_SENTENCE, loc, NULL, 0, &e);
        if (U_FAILURE(e)) {
            pthread_mutex_unlock(&g_mu);
            snprintf(err, errlen, "ICU sentence iterator for %s: %s", loc, u_errorName(e));
            return NULL;
        }
        if (g_n_tmpl == SEG_MAX_LANGS) {
            /* more languages than slots: this one is not kept */
            pthread_mutex_unlock(&g_mu);
            return bi;
        }
        memcpy(g_tmpl[k].lang, code, sizeof code);
        g_tmpl[k].bi = bi;
        g_n_tmpl++;
    }
    out = ubrk_clone(g_tmpl[k].bi, &e);
    pthread_mutex_unlock(&g_mu);
    if (U_FAILURE(e) || !out) {
        snprintf(err, errlen, "ICU sentence iterator clone: %s", u_errorName(e));
        return NULL;
    }
    return out;
}

/* ---- the rules on top of ICU ---------------------------------------------- */

/* Bytes of a line break at t[i] (< len), or 0. */
static size_t line_break(const char *t, size_t len, size_t i)
{
    unsigned char c = (unsigned char)t[i];
    if (c == '\n' || c == '\v' || c == '\f')
        return 1;
    if (c == '\r')
        return i + 1 < len && t[i + 1] == '\n' ? 2 : 1;
    if (c == 0xC2 && i + 1 < len && (unsigned char)t[i + 1] == 0x85)
        return 2; /* NEL */
    if (c == 0xE2 && i + 2 < len && (unsigned char)t[i + 1] == 0x80 &&
        ((unsigned char)t[i + 2] == 0xA8 || (unsigned char)t[i + 2] == 0xA9))
        return 3; /* LINE / PARAGRAPH SEPARATOR */
    return 0;
}

static int is_space_at(const char *t, size_t len, size_t i, size_t *next)
{
    int32_t j = (int32_t)i, c;
    U8_NEXT(t, j, (int32_t)len, c);
    *next = (size_t)j;
    return c >= 0 && u_isUWhiteSpace(c);
}

/* [*a, *b) without the white space around it. */
static void trim(const char *t, size_t *a, size_t *b)
{
    size_t nx;
    while (*a < *b && is_space_at(t, *b, *a, &nx))
        *a = nx;
    while (*b > *a) {
        int32_t j = (int32_t)*b, c;
        U8_PREV(t, (int32_t)*a, j, c);
        if (c < 0 || !u_isUWhiteSpace(c))
            break;
        *b = (size_t)j;
    }
}

/* Abbreviations that end with a dot and are usually followed by more of the
 * sentence (case-sensitive, without the dot), per source language: a
 * boundary ICU finds is kept unless the word before it is an abbreviation
 * of the text's own language ("app." ends an English sentence; "Fr." is a
 * German abbreviation, not an English one). Words of single letters and
 * dots (e.g., i.e., z., B., U.S., a.m.) are recognised in every language
 * without a list. */
static const char *const k_abbrev_en[] = {
    "Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "vs", "etc", "approx", "ca",
    "cf", "Inc", "Ltd", "Co", "Corp", "No", "Nos", "Fig", "Figs", "Vol", "Eds", "Jan", "Feb",
    "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec", "Gen", "Col", "Lt", "Rev",
    "Hon", "Dept", "Univ", "Est", "min", "max", "resp", NULL};
static const char *const k_abbrev_de[] = {
    "Dr", "Prof", "Hr", "Hrn", "Fr", "Nr", "Str", "St", "bzw", "usw", "vgl", "ggf", "Abb",
    "inkl", "evtl", "Jh", "Mio", "Mrd", "Tel", "Dipl", "Ing", "Hrsg", "geb", "gest", "Bd",
    "Kap", "Anm", "sog", "bspw", "zzgl", "ggü", "Tab", "Aufl", "Jhd", "ca", "etc", "Jan", "Feb",
    "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Okt", "Nov", "Dez", NULL};
static const char *const k_abbrev_fr[] = {"Mme", "Mlle", "Mmes", "Dr", "Pr", "St", "Ste",
                                          "etc", "cf", "env", "av", "bd", NULL};
static const char *const k_abbrev_es[] = {"Sr", "Sra", "Srta", "Dr", "Dra", "Ud", "Uds",
                                          "pág", "núm", "etc", "aprox", "Avda", NULL};
static const char *const k_abbrev_it[] = {"Sig", "Sigg", "Dott", "Dr", "Prof", "ecc", "pag",
                                          "Avv", "Ing", NULL};
static const char *const k_abbrev_pt[] = {"Sr", "Sra", "Dr", "Dra", "pág", "núm", "etc",
                                          "Av", NULL};
static const struct {
    const char *lang;
    const char *const *words;
} k_abbrev[] = {{"en", k_abbrev_en}, {"de", k_abbrev_de}, {"fr", k_abbrev_fr},
                {"es", k_abbrev_es}, {"it", k_abbrev_it}, {"pt", k_abbrev_pt}};

/* 1 when lang is code or one of its regional forms ("de", "de-AT", "de_CH"). */
static int lang_is(const char *lang, const char *code)
{
    size_t n = strlen(code);
    return lang && !strncmp(lang, code, n) && (lang[n] == 0 || lang[n] == '-' || lang[n] == '_');
}

/* 1 when the word t[a, b) (ending with its '.') is an abbreviation; next: the
 * text after it (next_n bytes). */
static int is_abbrev(const char *t, size_t a, size_t b, const char *lang, const char *next,
                     size_t next_n)
{
    /* skip opening punctuation: ( [ " „ « ...; a word after anything
     * else ("%s.", "$x.") is no abbreviation */
    while (a < b) {
        int32_t j = (int32_t)a, c;
        U8_NEXT(t, j, (int32_t)b, c);
        if (c >= 0 && u_isalnum(c))
            break;
        int8_t ct = c >= 0 ? u_charType(c) : 0;
        if (c != '"' && c != '\'' && ct != U_START_PUNCTUATION && ct != U_INITIAL_PUNCTUATION &&
            ct != U_FINAL_PUNCTUATION)
            return 0;
        a = (size_t)j;
    }
    if (b <= a + 1 || t[b - 1] != '.')
        return 0;
    size_t n = b - 1 - a; /* without the final dot */
    for (size_t l = 0; l < sizeof k_abbrev / sizeof k_abbrev[0]; l++)
        for (const char *const *w = k_abbrev[l].words; lang_is(lang, k_abbrev[l].lang) && *w; w++)
            if (strlen(*w) == n && !memcmp(*w, t + a, n))
                return 1;
    /* single letters with dots: every part between dots one letter */
    int letters = 1;
    size_t i = a;
    while (letters && i < b) {
        int32_t j = (int32_t)i, c;
        U8_NEXT(t, j, (int32_t)b, c);
        letters = c >= 0 && u_isalpha(c) && (size_t)j < b && t[j] == '.';
        i = (size_t)j + 1;
    }
    if (letters)
        return 1;
    /* German ordinals before a month or a counted noun: "am 3. Mai" */
    if (lang_is(lang, "de")) {
        size_t d = a;
        while (d < b - 1 && t[d] >= '0' && t[d] <= '9')
            d++;
        if (d == b - 1 && n <= 4 && next) {
            static const char *const k_ord[] = {
                "Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
                "September", "Oktober", "November", "Dezember", "Jahrhundert", "Jahrhunderts",
                "Platz", "Stock", "Klasse", "Mal", "Auflage", "Kapitel", "Tag", "Jahrestag"};
            size_t wl = 0;
            while (wl < next_n && !strchr(" \t,.;:!?", next[wl]))
                wl++;
            for (size_t o = 0; o < sizeof k_ord / sizeof k_ord[0]; o++)
                if (strlen(k_ord[o]) == wl && !memcmp(k_ord[o], next, wl))
                    return 1;
        }
    }
    return 0;
}

/* The first code point of t[a, b) that is a letter (alnum: a letter or a
 * digit), or 0 when there is none. */
static UChar32 first_of(const char *t, size_t a, size_t b, int alnum)
{
    while (a < b) {
        int32_t j = (int32_t)a, c;
        U8_NEXT(t, j, (int32_t)b, c);
        if (c >= 0 && (alnum ? u_isalnum(c) : u_isalpha(c)))
            return c;
        a = (size_t)j;
    }
    return 0;
}

/* 1 when the boundary between sentences [a, m) and [m, e) of t must go;
 * last: [m, e) ends the line. */
static int keep_together(const char *t, size_t a, size_t m, size_t e, int last,
                         const char *lang)
{
    size_t x = a, y = m;
    trim(t, &x, &y);
    if (x == y)
        return 0;
    /* a piece without letters ("1.", an emoji, "...") is no sentence: it
     * goes with the next one, or the one before at the end of the line */
    size_t p = m, q = e;
    trim(t, &p, &q);
    if (!first_of(t, x, y, 0) || (last && !first_of(t, p, q, 0)))
        return 1;
    /* no white space at the boundary, and Latin (not CJK, which has none)
     * after it: "*.SNG", "net/?WhatIsGo" */
    if (y == m && (unsigned char)t[m] < 0x80 && u_isalnum((unsigned char)t[m]))
        return 1;
    /* the next sentence starts with a lower-case letter (after opening
     * punctuation: "[y/N]", "(see below)") */
    if (u_islower(first_of(t, p, q, 1)))
        return 1;
    /* the last word of the first */
    size_t w = y;
    while (w > x) {
        int32_t j = (int32_t)w, c;
        U8_PREV(t, (int32_t)x, j, c);
        if (c >= 0 && u_isUWhiteSpace(c))
            break;
        w = (size_t)j;
    }
    return is_abbrev(t, w, y, lang, t + p, q - p);
}

/* ---- td_segment ------------------------------------------------------------ */

typedef struct seg_list {
    td_sentence *s;
    int n, cap;
} seg_list;

static int push(seg_list *l, const char *t, size_t a, size_t b)
{
    trim(t, &a, &b);
    if (a == b)
        return 0;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        td_sentence *p = realloc(l->s, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        l->s = p;
        l->cap = cap;
    }
    l->s[l->n++] = (td_sentence){a, b};
    return 0;
}

/* The sentences of one line t[a, b) (no line break inside). */
static int split_line(UBreakIterator *bi, UText **ut, const char *t, size_t a, size_t b,
                      const char *lang, seg_list *l, char *err, size_t errlen)
{
    size_t x = a, y = b;
    trim(t, &x, &y);
    if (x == y)
        return 0;
    UErrorCode e = U_ZERO_ERROR;
    *ut = utext_openUTF8(*ut, t + a, (int64_t)(b - a), &e);
    if (U_SUCCESS(e))
        ubrk_setUText(bi, *ut, &e);
    if (U_FAILURE(e)) {
        snprintf(err, errlen, "ICU: %s", u_errorName(e));
        return -1;
    }
    /* ICU's boundaries inside the line, then ours on top */
    size_t nb = 0, cap = 16, *bnd = malloc(cap * sizeof *bnd);
    if (!bnd)
        goto oom;
    ubrk_first(bi);
    for (int32_t q; (q = ubrk_next(bi)) != UBRK_DONE && a + (size_t)q < b;) {
        if (nb + 1 == cap) {
            size_t *p = realloc(bnd, 2 * cap * sizeof *bnd);
            if (!p) {
                free(bnd);
                goto oom;
            }
            bnd = p;
            cap *= 2;
        }
        bnd[nb++] = a + (size_t)q;
    }
    bnd[nb] = b;
    size_t start = a; /* the sentence being built */
    for (size_t k = 0; k < nb; k++) {
        if (keep_together(t, start, bnd[k], bnd[k + 1], k + 1 == nb, lang))
            continue;
        if (push(l, t, start, bnd[k]) != 0) {
            free(bnd);
            goto oom;
        }
        start = bnd[k];
    }
    free(bnd);
    if (push(l, t, start, b) != 0)
        goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

int td_segment(const char *lang, const char *text, size_t len, td_sentence **out, char *err,
               size_t errlen)
{
    *out = NULL;
    if (len > INT32_MAX) {
        snprintf(err, errlen, "text of %zu bytes: too long to split", len);
        return -1;
    }
    seg_list l = {0};
    UBreakIterator *bi = NULL;
    UText *ut = NULL;
    int rc = -1;
    size_t a = 0;
    for (size_t i = 0; i <= len;) {
        size_t nl = i < len ? line_break(text, len, i) : 1;
        if (!nl) {
            i++;
            continue;
        }
        size_t x = a, y = i;
        trim(text, &x, &y);
        if (x < y) {
            if (!bi && !(bi = iterator(lang, err, errlen)))
                goto out;
            if (split_line(bi, &ut, text, a, i, lang, &l, err, errlen) != 0)
                goto out;
        }
        i += nl;
        a = i;
    }
    rc = l.n;
    *out = l.s;
    l.s = NULL;
out:
    free(l.s);
    if (ut)
        utext_close(ut);
    if (bi)
        ubrk_close(bi);
    return rc;
}

int td_segment_join(const char *text, size_t len, const td_sentence *sent, int n,
                    const char *const *parts, const size_t *plens, char **out,
                    size_t *out_len, size_t *ranges)
{
    size_t total = len + 1;
    for (int k = 0; k < n; k++)
        total += plens[k];
    char *o = malloc(total), *w = o;
    if (!o)
        return -1;
    size_t at = 0; /* the source bytes copied so far */
    for (int k = 0; k < n; k++) {
        memcpy(w, text + at, sent[k].start - at);
        w += sent[k].start - at;
        if (ranges)
            ranges[2 * k] = (size_t)(w - o);
        memcpy(w, parts[k], plens[k]);
        w += plens[k];
        if (ranges)
            ranges[2 * k + 1] = (size_t)(w - o);
        at = sent[k].end;
    }
    memcpy(w, text + at, len - at);
    w += len - at;
    *w = 0;
    *out = o;
    *out_len = (size_t)(w - o);
    return 0;
}
