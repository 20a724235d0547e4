/*
 * test_segment.c - tokenizer/segment.h: the sentences of texts against
 * expected splits (abbreviations, numbers, URLs, quotes, CJK and German
 * punctuation, line breaks, blank lines, white space around sentences), and
 * the reassembly (separators kept byte for byte, ranges of the parts).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

typedef struct seg_case {
    const char *lang, *text;
    const char *want; /* the sentences joined with '|' ("" for none) */
} seg_case;

static const seg_case k_cases[] = {
    /* plain sentences; the white space between them is not part of either */
    {"en", "Hello world. How are you?", "Hello world.|How are you?"},
    {"en", "Stop! Go on.", "Stop!|Go on."},
    {"en", "One sentence without a dot", "One sentence without a dot"},
    {"en", "  Leading and trailing spaces.  Second one.   ", "Leading and trailing spaces.|Second one."},
    /* abbreviations */
    {"en", "Dr. Smith met Mr. Jones at 5 p.m. yesterday. They talked.",
     "Dr. Smith met Mr. Jones at 5 p.m. yesterday.|They talked."},
    {"en", "Use a tool, e.g. Vim or Emacs, i.e. an editor. Then save.",
     "Use a tool, e.g. Vim or Emacs, i.e. an editor.|Then save."},
    {"en", "Apples, pears, etc. are fruit. Fine.", "Apples, pears, etc. are fruit.|Fine."},
    {"en", "J. R. R. Tolkien wrote it. Read it.", "J. R. R. Tolkien wrote it.|Read it."},
    {"en", "He lives in the U.S. now. Really.", "He lives in the U.S. now.|Really."},
    {"de", "Das ist z. B. gut. Er kam am 3. Mai. Dr. Müller kam.",
     "Das ist z. B. gut.|Er kam am 3. Mai.|Dr. Müller kam."},
    {"de", "Siehe Nr. 5 bzw. Abb. 2. Danach weiter.", "Siehe Nr. 5 bzw. Abb. 2.|Danach weiter."},
    /* a word that merely starts (or ends) like an abbreviation ends its
     * sentence: "Note" is not "No", "Strings" not "Str", "Zinc" not "Inc" */
    {"en", "Add a Note. Then save.", "Add a Note.|Then save."},
    {"en", "Translate the Strings. Then build.", "Translate the Strings.|Then build."},
    {"en", "Add some Zinc. Then stir.", "Add some Zinc.|Then stir."},
    /* abbreviations of the text's own language only, not ICU's list ("app.")
     * nor another language's ("Gen." is English, "Tab." German) */
    {"en", "There was an error launching the app. Authentication is required to set default route.",
     "There was an error launching the app.|Authentication is required to set default route."},
    {"en", "Press Tab. Then type the name.", "Press Tab.|Then type the name."},
    {"de", "Das ist ein Gen. Es ist kurz.", "Das ist ein Gen.|Es ist kurz."},
    {"de", "Siehe Tab. 3 und Abb. 2. Danach weiter.", "Siehe Tab. 3 und Abb. 2.|Danach weiter."},
    /* a format directive before the dot ("%s.") is no single-letter abbreviation */
    {"en", "Cannot open %s. Try again.", "Cannot open %s.|Try again."},
    {"de", "Das ist die Strecke. Dann links.", "Das ist die Strecke.|Dann links."},
    /* numbers, URLs, ellipses */
    {"en", "Pi is 3.14 or so. The price is $1,000.50 today.",
     "Pi is 3.14 or so.|The price is $1,000.50 today."},
    {"en", "Visit https://example.com/a.b?c=d.e now. Or www.example.org. Thanks.",
     "Visit https://example.com/a.b?c=d.e now.|Or www.example.org.|Thanks."},
    {"en", "Wait... what happened? Nothing.", "Wait... what happened?|Nothing."},
    {"en", "Well… maybe. Yes.", "Well… maybe.|Yes."},
    {"en", "Songs in its own format (*.SNG). Fine.", "Songs in its own format (*.SNG).|Fine."},
    {"en", "See http://x.net/?WhatIsGo for more. Fine.", "See http://x.net/?WhatIsGo for more.|Fine."},
    /* quotes */
    {"en", "\"Really?\" she asked. He nodded.", "\"Really?\" she asked.|He nodded."},
    {"en", "He said \"Stop.\" Then he left.", "He said \"Stop.\"|Then he left."},
    {"de", "Er sagte: „Komm her!“ Sie kam.", "Er sagte: „Komm her!“|Sie kam."},
    /* pieces without letters stay with a neighbour; lower case after brackets */
    {"en", "Are you sure? [y/N]", "Are you sure? [y/N]"},
    {"en", "\xF0\x9F\x98\x80 Thank you! \xF0\x9F\x91\x8D", "\xF0\x9F\x98\x80 Thank you! \xF0\x9F\x91\x8D"},
    {"en", "1. Open the file. 2. Close it.", "1. Open the file.|2. Close it."},
    {"en", "It works (see below). Fine.", "It works (see below).|Fine."},
    {"en", "Done! (really) Yes.", "Done! (really) Yes."},
    /* CJK */
    {"ja", "今日は晴れです。明日は雨でしょう！本当？", "今日は晴れです。|明日は雨でしょう！|本当？"},
    {"zh", "我很好。你呢？", "我很好。|你呢？"},
    /* line breaks and blank lines are hard boundaries */
    {"en", "First line\nsecond line", "First line|second line"},
    {"en", "Dr.\nSmith", "Dr.|Smith"},
    {"en", "Para one. Still one.\n\nPara two.\r\n\r\nPara three.\n",
     "Para one.|Still one.|Para two.|Para three."},
    {"en", "a\xE2\x80\xA8" "b\xE2\x80\xA9" "c", "a|b|c"},
    /* nothing but white space */
    {"en", "", ""},
    {"en", " \n\t\n  ", ""},
    /* an unknown language: ICU's root rules */
    {"xx", "One. Two.", "One.|Two."},
    {NULL, "One. Two.", "One.|Two."},
};

START_TEST(expected_splits)
{
    const seg_case *c = &k_cases[_i];
    td_sentence *s = NULL;
    char err[256] = "";
    size_t len = strlen(c->text);
    int n = td_segment(c->lang, c->text, len, &s, err, sizeof err);
    ck_assert_msg(n >= 0, "%s: %s", c->text, err);
    char got[1024] = "";
    size_t w = 0;
    for (int k = 0; k < n; k++) {
        ck_assert(s[k].start < s[k].end && s[k].end <= len);
        ck_assert(k == 0 || s[k].start >= s[k - 1].end);
        w += (size_t)snprintf(got + w, sizeof got - w, "%s%.*s", k ? "|" : "",
                              (int)(s[k].end - s[k].start), c->text + s[k].start);
    }
    ck_assert_msg(!strcmp(got, c->want), "[%s] %s\n got: %s\nwant: %s", c->lang ? c->lang : "-",
                  c->text, got, c->want);
    /* the sentences joined back with their own text are the text */
    const char **parts = calloc((size_t)n + 1, sizeof *parts);
    size_t *plens = calloc((size_t)n + 1, sizeof *plens);
    size_t *ranges = calloc(2 * (size_t)n + 2, sizeof *ranges);
    for (int k = 0; k < n; k++) {
        parts[k] = c->text + s[k].start;
        plens[k] = s[k].end - s[k].start;
    }
    char *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(td_segment_join(c->text, len, s, n, parts, plens, &out, &out_len, ranges), 0);
    ck_assert_uint_eq(out_len, len);
    ck_assert_str_eq(out, c->text);
    for (int k = 0; k < n; k++) {
        ck_assert_uint_eq(ranges[2 * k], s[k].start);
        ck_assert_uint_eq(ranges[2 * k + 1], s[k].end);
    }
    free(out);
    free(parts);
    free(plens);
    free(ranges);
    free(s);
}
END_TEST

/* Translations of other lengths land between the original separators. */
START_TEST(join_layout)
{
    const char *t = "  Ab cd.  Ef gh?\n\n  Ij.\t";
    td_sentence *s = NULL;
    char err[256];
    int n = td_segment("en", t, strlen(t), &s, err, sizeof err);
    ck_assert_int_eq(n, 3);
    const char *parts[] = {"Xx", "", "Yyyyy zz."};
    size_t plens[] = {2, 0, 9}, ranges[6];
    char *out = NULL;
    size_t out_len;
    ck_assert_int_eq(td_segment_join(t, strlen(t), s, n, parts, plens, &out, &out_len, ranges), 0);
    ck_assert_str_eq(out, "  Xx  \n\n  Yyyyy zz.\t");
    ck_assert_uint_eq(out_len, strlen(out));
    size_t want[] = {2, 4, 6, 6, 10, 19};
    for (int k = 0; k < 6; k++)
        ck_assert_uint_eq(ranges[k], want[k]);
    free(out);
    free(s);
}
END_TEST

/* Bytes that are not UTF-8, NULs and a long text: no crash, sentences
 * inside the text, in order, separators only white space. */
START_TEST(odd_bytes_and_long_text)
{
    static const char odd[] = "Bad \xFF\xFE bytes. And \0 a NUL. \xE2\x80 cut";
    td_sentence *s = NULL;
    char err[256];
    int n = td_segment("en", odd, sizeof odd - 1, &s, err, sizeof err);
    ck_assert_int_ge(n, 1);
    for (int k = 0; k < n; k++)
        ck_assert(s[k].start < s[k].end && s[k].end <= sizeof odd - 1 &&
                  (k == 0 || s[k].start >= s[k - 1].end));
    free(s);
    size_t len = 0, cap = 200000;
    char *big = malloc(cap);
    for (int i = 0; i < 5000; i++)
        len += (size_t)snprintf(big + len, cap - len, "Sentence number %d is here. ", i);
    n = td_segment("en", big, len, &s, err, sizeof err);
    ck_assert_int_eq(n, 5000);
    free(s);
    free(big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("segment");
    TCase *tc = tcase_create("segment");
    tcase_add_loop_test(tc, expected_splits, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, join_layout);
    tcase_add_test(tc, odd_bytes_and_long_text);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
