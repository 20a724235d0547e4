/*
 * test_lidprof.c - the detector's word and character profiles
 * (server/service/lidprof.c) and their use by langid.c:
 *   - the scores of the committed profiles (models/langid) equal, to 1e-9,
 *     those of the model written out in Python by
 *     tools/make_langid_profiles.py --golden (tests/data/langid_golden.jsonl:
 *     short and long texts, joiners, case, umlauts, other scripts, emoji,
 *     no word at all, a word past 64 characters, more than 256 words);
 *   - a missing profile is no error, a malformed one is refused naming the
 *     file and the line;
 *   - with profiles the short texts LibreTranslate's users saw wrong are
 *     right ("I am hungry.", "Hello", "Hallo"); without a word, or when a
 *     candidate has no profile, the fingerprints answer.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <zlib.h>

#include "langid.h"
#include "lidprof.h"

#ifndef TD_LANGID_DIR
#error "TD_LANGID_DIR (models/langid) must be defined"
#endif
#ifndef TD_TEXTCAT_DIR
#error "TD_TEXTCAT_DIR must be defined"
#endif

START_TEST(test_golden)
{
    char err[512], path[600];
    srv_lidprof *p[2];
    const char *codes[2] = {"en", "de"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s.lid.gz", TD_LANGID_DIR, codes[i]);
        p[i] = srv_lidprof_load(path, codes[i], err, sizeof err);
        ck_assert_msg(p[i] != NULL, "%s: %s", path, err);
    }
    snprintf(path, sizeof path, "%s/langid_golden.jsonl", TD_TEST_DATA);
    json_error_t je;
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *row = json_loads(line, 0, &je);
        ck_assert_msg(row != NULL, "line %d: %s", n + 1, je.text);
        const char *text = json_string_value(json_object_get(row, "text"));
        int want_words = (int)json_integer_value(json_object_get(row, "words"));
        for (int i = 0; i < 2; i++) {
            int words = -1;
            double got = srv_lidprof_score(p[i], text, strlen(text), &words);
            double want = json_real_value(json_object_get(row, codes[i]));
            ck_assert_msg(words == want_words, "'%.60s': %d words, Python %d", text, words,
                          want_words);
            ck_assert_msg(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)),
                          "'%.60s' %s: %.12f, Python %.12f", text, codes[i], got, want);
        }
        json_decref(row);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 30);
    srv_lidprof_free(p[0]);
    srv_lidprof_free(p[1]);
}
END_TEST

/* Writes text gzip'd to path. */
static void write_gz(const char *path, const char *text)
{
    gzFile z = gzopen(path, "wb");
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(gzputs(z, text), (int)strlen(text));
    ck_assert_int_eq(gzclose(z), Z_OK);
}

START_TEST(test_bad_files)
{
    char dir[] = "/tmp/td_lidprof.XXXXXX", path[600], err[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/en.lid.gz", dir);
    /* none: no error */
    ck_assert_ptr_null(srv_lidprof_load(path, "en", err, sizeof err));
    ck_assert_str_eq(err, "");
    static const char *const bad[][2] = {
        {"transformerd-langid 1 de\nwords 5\nchars 5\ng 1 a\n", "line 1"},
        {"transformerd-langid 1 en\nwords 5\nchars 5\nx 1 a\n", "line 4"},
        {"transformerd-langid 1 en\nwords 5\nchars 5\ng 0 a\n", "line 4"},
        {"transformerd-langid 1 en\nwords 5\nchars 5\ng 1\n", "line 4"},
        {"transformerd-langid 1 en\nwords -5\n", "line 2"},
        {"transformerd-langid 1 en\ng 1 a\n", "no totals"},
        {"transformerd-langid 1 en\nwords 5\nchars 5\n", "no totals"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_gz(path, bad[i][0]);
        ck_assert_ptr_null(srv_lidprof_load(path, "en", err, sizeof err));
        ck_assert_msg(strstr(err, path) && strstr(err, bad[i][1]), "case %zu: %s", i, err);
    }
    /* not gzip'd at all: zlib reads it as it is, and it is still checked */
    FILE *f = fopen(path, "w");
    fputs("plain text\n", f);
    fclose(f);
    ck_assert_ptr_null(srv_lidprof_load(path, "en", err, sizeof err));
    ck_assert_msg(strstr(err, "line 1"), "%s", err);
    /* a good one */
    write_gz(path, "transformerd-langid 1 en\nwords 10\nchars 20\nw 3 ab\nc 3 Ab\ng 4 a\ng 4 b\n");
    srv_lidprof *p = srv_lidprof_load(path, "en", err, sizeof err);
    ck_assert_msg(p != NULL, "%s", err);
    int words = 0;
    srv_lidprof_score(p, "Ab, ab-ab 12", 12, &words);
    ck_assert_int_eq(words, 2); /* "Ab", "ab-ab" */
    srv_lidprof_free(p);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_detect_short)
{
    const char *codes[] = {"en", "de"};
    char err[1024];
    srv_langid *li = srv_langid_new(TD_TEXTCAT_DIR, codes, 2, err, sizeof err);
    ck_assert_ptr_nonnull(li);
    if (srv_langid_count(li) < 2) /* no libexttextcat-data: nothing to choose among */
        return;
    ck_assert_int_eq(srv_langid_load_profiles(li, TD_LANGID_DIR, err, sizeof err), 2);
    ck_assert_str_eq(err, "");
    static const char *const cases[][2] = {
        {"I am hungry.", "en"}, {"Hello", "en"}, {"Hallo", "de"}, {"Save the file", "en"},
        {"Datei speichern", "de"}, {"Thanks", "en"}, {"Danke", "de"}};
    srv_lang_score sc[4];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(srv_langid_detect_among(li, cases[i][0], strlen(cases[i][0]), codes, 2,
                                                 sc), 2);
        ck_assert_msg(!strcmp(sc[0].lang, cases[i][1]), "'%s': %s", cases[i][0], sc[0].lang);
        ck_assert(sc[0].confidence >= sc[1].confidence);
        ck_assert(fabs(sc[0].confidence + sc[1].confidence - 100.0) < 0.11);
    }
    /* "in" is both: no side near certainty */
    ck_assert_int_eq(srv_langid_detect_among(li, "in", 2, codes, 2, sc), 2);
    ck_assert_msg(sc[0].confidence < 90, "'in': %s %.1f", sc[0].lang, sc[0].confidence);
    /* a candidate without a profile (fr) takes part: the fingerprints
     * answer, as they do for a text without a word */
    const char *three[] = {"en", "de", "fr"};
    srv_langid *li3 = srv_langid_new(TD_TEXTCAT_DIR, three, 3, err, sizeof err);
    ck_assert_ptr_nonnull(li3);
    srv_langid_load_profiles(li3, TD_LANGID_DIR, err, sizeof err);
    srv_lang_score a[4], b[4];
    srv_langid *plain = srv_langid_new(TD_TEXTCAT_DIR, three, 3, err, sizeof err);
    int ka = srv_langid_detect_among(li3, "Hallo", 5, three, 3, a);
    int kb = srv_langid_detect_among(plain, "Hallo", 5, three, 3, b);
    ck_assert_int_eq(ka, kb);
    for (int i = 0; i < ka; i++)
        ck_assert(!strcmp(a[i].lang, b[i].lang) && a[i].confidence == b[i].confidence);
    ka = srv_langid_detect_among(li, "1234 + 56", 9, codes, 2, a);
    srv_langid *plain2 = srv_langid_new(TD_TEXTCAT_DIR, codes, 2, err, sizeof err);
    kb = srv_langid_detect_among(plain2, "1234 + 56", 9, codes, 2, b);
    ck_assert_int_eq(ka, kb);
    for (int i = 0; i < ka; i++)
        ck_assert(!strcmp(a[i].lang, b[i].lang) && a[i].confidence == b[i].confidence);
    srv_langid_free(plain2);
    srv_langid_free(plain);
    srv_langid_free(li3);
    srv_langid_free(li);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lidprof");
    TCase *tc = tcase_create("lidprof");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_detect_short);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
