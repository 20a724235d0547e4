/*
 * test_unescape.c - srv_html_unescape (server/service/html.c), what the
 * LibreTranslate API applies to its translations as LibreTranslate does
 * (Python's html.unescape), against the golden tests/data/html_unescape.jsonl
 * that tools/make_unescape_golden.py writes with Python's own function:
 * named, legacy and numeric references, invalid and forbidden code points,
 * windows-1252 in 0x80..0x9F, references that are not.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "html.h"

START_TEST(test_golden)
{
    char path[512];
    snprintf(path, sizeof path, "%s/html_unescape.jsonl", TD_TEST_DATA);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *c = json_loads(line, 0, &je);
        ck_assert_msg(json_is_array(c), "line %d: %s", n + 1, je.text);
        const char *in = json_string_value(json_array_get(c, 0));
        const char *want = json_string_value(json_array_get(c, 1));
        char *got = srv_html_unescape(in);
        ck_assert_ptr_nonnull(got);
        ck_assert_msg(!strcmp(got, want), "case %d: '%s' -> '%s', Python: '%s'", n + 1, in, got,
                      want);
        free(got);
        json_decref(c);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 30);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("unescape");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_golden);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
