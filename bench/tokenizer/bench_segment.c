/*
 * bench_segment.c - how often the sentence splitter keeps two sentences
 * apart: every pair of consecutive lines of a held-out set (each line one
 * sentence or a short text) joined with a space into a paragraph, split
 * with td_segment in the given language; a pair is kept when the paragraph
 * splits exactly into the two lines' own splits. Then each line's
 * translation alone is its paragraph's translation's (docs/api.md, "Long
 * texts": a text is its sentences translated one by one), so no model is
 * needed to count it. Pairs whose first line ends without sentence
 * punctuation (. ! ?) or whose second does not start with a capital are
 * left out: to any reader they are one sentence.
 *
 *   bench_segment LANG FILE...   (prints kept / pairs and the merged pairs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "segment.h"

static int starts_capital(const char *s, size_t n)
{
    int32_t i = 0;
    UChar32 c;
    U8_NEXT(s, i, (int32_t)n, c);
    return c >= 0 && u_isupper(c);
}

static int ends_sentence(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == '"' || s[n - 1] == '\'' || s[n - 1] == ')'))
        n--;
    return n > 0 && (s[n - 1] == '.' || s[n - 1] == '!' || s[n - 1] == '?');
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_segment LANG FILE...\n");
        return 2;
    }
    const char *lang = argv[1];
    long pairs = 0, kept = 0, shown = 0;
    char err[256];
    for (int f = 2; f < argc; f++) {
        FILE *in = fopen(argv[f], "r");
        if (!in) {
            fprintf(stderr, "bench_segment: cannot open %s\n", argv[f]);
            return 1;
        }
        char prev[4096] = "", line[4096];
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\r\n")] = 0;
            size_t a = strlen(prev), b = strlen(line);
            if (a && b && ends_sentence(prev, a) && starts_capital(line, b)) {
                char para[8192];
                snprintf(para, sizeof para, "%s %s", prev, line);
                td_sentence *sp = NULL, *s1 = NULL, *s2 = NULL;
                int np = td_segment(lang, para, a + 1 + b, &sp, err, sizeof err);
                int n1 = td_segment(lang, prev, a, &s1, err, sizeof err);
                int n2 = td_segment(lang, line, b, &s2, err, sizeof err);
                if (np < 0 || n1 < 0 || n2 < 0) {
                    fprintf(stderr, "bench_segment: %s\n", err);
                    return 1;
                }
                int same = np == n1 + n2;
                for (int i = 0; same && i < n1; i++)
                    same = sp[i].start == s1[i].start && sp[i].end == s1[i].end;
                for (int i = 0; same && i < n2; i++)
                    same = sp[n1 + i].start == s2[i].start + a + 1 &&
                           sp[n1 + i].end == s2[i].end + a + 1;
                pairs++;
                kept += same;
                if (!same && shown++ < 20)
                    printf("merged: %s\n", para);
                free(sp);
                free(s1);
                free(s2);
            }
            memcpy(prev, line, b + 1);
        }
        fclose(in);
    }
    printf("%s: %ld of %ld pairs kept apart (%.2f %%)\n", lang, kept, pairs,
           pairs ? 100.0 * (double)kept / (double)pairs : 0.0);
    return 0;
}
