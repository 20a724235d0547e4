/*
 * test_markdown.c - Markdown files' paragraphs and where their
 * translations go (server/service/markdown.c), without a model: segment i
 * is set to "T<i>" (no alignment: plain text) and the whole file written
 * back is compared byte for byte, so a translation written over another
 * block, a block cut short or lost, a line ending or a byte kept changed,
 * each fails. Each input is given in a buffer of exactly its size (ASan
 * sees a read past the file's end):
 *   - lines ended by CR alone, by CR, LF and CRLF mixed, an LF then a CR
 *     (a blank line between): cmark ends a line at each;
 *   - NUL bytes (cmark reads U+FFFD, 3 bytes a column each) in a paragraph
 *     followed straight by a heading, in an ATX and a setext heading;
 *   - a setext heading followed by a paragraph with no blank line between
 *     (cmark ends the heading on the next line), in LF and CR files;
 *   - a UTF-8 BOM (cmark skips it before column 1) kept;
 *   - a front matter closed at the end of the file with no line ending,
 *     closed by "..." in CRLF, in CR;
 *   - a hard line break written with the block's own line ending (CRLF);
 *   - a GFM table kept as it is;
 *   - paragraphs in a quote and a list around a fenced code block, each
 *     translation in its own place for every line ending, with NULs too;
 *   - nothing set: the file comes back byte for byte.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markdown.h"

/* Parses in (n bytes, in a buffer of exactly n), checks the segments'
 * sources (want, n_want), renders with nothing set (the same bytes), sets
 * segment i to "T<i>" and checks the file is out. */
static void check_md(const char *in, size_t n, const char *const *want, int n_want,
                     const char *out, size_t out_n)
{
    char err[256] = "";
    char *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, in, n);
    srv_md *m = NULL;
    ck_assert_msg(srv_md_parse(buf, n, &m, err, sizeof err) == 0, "parse: %s", err);
    ck_assert_int_eq(srv_md_n(m), n_want);
    for (int i = 0; i < n_want; i++)
        ck_assert_str_eq(srv_md_source(m, i), want[i]);
    /* nothing set: the file as it was (a copy: render is once) */
    srv_md *m0 = NULL;
    ck_assert_int_eq(srv_md_parse(buf, n, &m0, err, sizeof err), 0);
    size_t len = 0;
    char *same = srv_md_render(m0, &len, err, sizeof err);
    ck_assert_msg(same != NULL, "render: %s", err);
    ck_assert_int_eq(len, n);
    ck_assert(memcmp(same, in, n) == 0);
    free(same);
    srv_md_free(m0);
    for (int i = 0; i < n_want; i++) {
        char t[16];
        snprintf(t, sizeof t, "T%d", i);
        int lost = 0;
        ck_assert_int_eq(srv_md_set(m, i, t, NULL, 0, &lost), 0);
    }
    char *got = srv_md_render(m, &len, err, sizeof err);
    ck_assert_msg(got != NULL, "render: %s", err);
    ck_assert_msg(len == out_n && memcmp(got, out, out_n) == 0, "got %zu bytes \"%s\", want \"%s\"",
                  len, got, out);
    free(got);
    srv_md_free(m);
    free(buf);
}

#define S(lit) lit, sizeof lit - 1
#define W(...) (const char *const[]){__VA_ARGS__}, (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

START_TEST(test_cr_lines)
{
    check_md(S("One two.\rThree four.\r\rFive six.\r"), W("One two. Three four.", "Five six."),
             S("T0\r\rT1\r"));
    /* a paragraph then an ATX heading on the next CR line */
    check_md(S("Para one\r# Heading\rPara two\r"), W("Para one", "Heading", "Para two"),
             S("T0\r# T1\rT2\r"));
}
END_TEST

START_TEST(test_mixed_lines)
{
    check_md(S("# Head\r\nPara one\rstill one\n\rPara two\r\n\r\nPara three"),
             W("Head", "Para one still one", "Para two", "Para three"),
             S("# T0\r\nT1\n\rT2\r\n\r\nT3"));
    /* 70 bytes of the report's kind: CR-ended paragraphs between LF ones */
    check_md(S("A first paragraph.\rA heading\r===\rSecond one.\n\nThird\rone.\n# Last\n"),
             W("A first paragraph. A heading", "Second one.", "Third one.", "Last"),
             S("T0\r===\rT1\n\nT2\n# T3\n"));
}
END_TEST

START_TEST(test_nul)
{
    /* a paragraph's NULs (3 columns each) then a heading on the next line */
    check_md(S("Para\0\0\0graph one.\n# Heading\n\nLast one.\n"),
             W("Para\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdgraph one.", "Heading", "Last one."),
             S("T0\n# T1\n\nT2\n"));
    /* an ATX heading (its closing sequence kept), a setext one */
    check_md(S("# Ti\0tle\0 #\nText \0\0here.\n\nSub\0\0title\n---\nNext\0.\n"),
             W("Ti\xef\xbf\xbdtle\xef\xbf\xbd", "Text \xef\xbf\xbd\xef\xbf\xbdhere.",
               "Sub\xef\xbf\xbd\xef\xbf\xbdtitle", "Next\xef\xbf\xbd."),
             S("# T0 #\nT1\n\nT2\n---\nT3\n"));
    /* a NUL at the very end */
    check_md(S("Hello\n\nworld\0"), W("Hello", "world\xef\xbf\xbd"), S("T0\n\nT1"));
}
END_TEST

START_TEST(test_setext_then_text)
{
    check_md(S("Title\n=====\nPara\n"), W("Title", "Para"), S("T0\n=====\nT1\n"));
    check_md(S("Title\r===\rPara\r"), W("Title", "Para"), S("T0\r===\rT1\r"));
    check_md(S("Two\nlines\n---\n\n\n"), W("Two lines"), S("T0\n---\n\n\n"));
    check_md(S("At the end\n==="), W("At the end"), S("T0\n==="));
    check_md(S("At the end\r===\r"), W("At the end"), S("T0\r===\r"));
}
END_TEST

START_TEST(test_bom)
{
    check_md(S("\xef\xbb\xbfHello world.\n\n# Title\n"), W("Hello world.", "Title"),
             S("\xef\xbb\xbfT0\n\n# T1\n"));
}
END_TEST

START_TEST(test_front_matter)
{
    check_md(S("---\ntitle: x\n---"), NULL, 0, S("---\ntitle: x\n---"));
    check_md(S("---\ntitle: x\n..."), NULL, 0, S("---\ntitle: x\n..."));
    check_md(S("---\r\ntitle: x\r\n...\r\n\r\nHello world.\r\n"), W("Hello world."),
             S("---\r\ntitle: x\r\n...\r\n\r\nT0\r\n"));
    check_md(S("---\rtitle: x\r---\rHello\r"), W("Hello"), S("---\rtitle: x\r---\rT0\r"));
    /* not closed: no front matter ("---" a thematic break) */
    check_md(S("---\ntitle\n\nText ---\n"), W("title", "Text ---"), S("---\nT0\n\nT1\n"));
    check_md(S("---"), NULL, 0, S("---"));
}
END_TEST

START_TEST(test_hard_break)
{
    check_md(S("Line one\\\r\nline two\r\n\r\nNext\r\n"), W("Line one", "line two", "Next"),
             S("T0  \r\nT1\r\n\r\nT2\r\n"));
    check_md(S("Line one  \rline two\r"), W("Line one", "line two"), S("T0  \rT1\r"));
}
END_TEST

START_TEST(test_table_kept)
{
    /* a GFM table (a paragraph of '|' lines to cmark) is left as it is */
    check_md(S("| a | b |\r\n|---|---|\r\n| Hello | world |\r\n\r\nText\r\n"), W("Text"),
             S("| a | b |\r\n|---|---|\r\n| Hello | world |\r\n\r\nT0\r\n"));
}
END_TEST

/* Several blocks in containers: each translation in its own place, for
 * each line ending, with and without a NUL. */
START_TEST(test_each_in_place)
{
    const char *eols[] = {"\n", "\r", "\r\n"};
    for (int e = 0; e < 3; e++)
        for (int nul = 0; nul < 2; nul++) {
            const char *l = eols[e];
            char in[512], out[512];
            const char *x = nul ? "\0\0" : "";
            size_t xn = nul ? 2 : 0;
            size_t n = 0, o = 0;
#define ADD(buf, k, s, sn) (memcpy(buf + k, s, sn), k += sn)
#define ADDS(buf, k, s) ADD(buf, k, s, strlen(s))
            ADDS(in, n, "# Title");
            ADDS(in, n, l);
            ADDS(in, n, "First");
            ADD(in, n, x, xn);
            ADDS(in, n, " para.");
            ADDS(in, n, l);
            ADDS(in, n, "> Quoted");
            ADD(in, n, x, xn);
            ADDS(in, n, " one.");
            ADDS(in, n, l);
            ADDS(in, n, l);
            ADDS(in, n, "- Item one");
            ADDS(in, n, l);
            ADDS(in, n, "- Item");
            ADD(in, n, x, xn);
            ADDS(in, n, " two");
            ADDS(in, n, l);
            ADDS(in, n, l);
            ADDS(in, n, "```");
            ADDS(in, n, l);
            ADDS(in, n, "code");
            ADD(in, n, x, xn);
            ADDS(in, n, l);
            ADDS(in, n, "```");
            ADDS(in, n, l);
            ADDS(in, n, "Last");
            ADD(in, n, x, xn);
            ADDS(in, n, l);
            const char *r = nul ? "\xef\xbf\xbd\xef\xbf\xbd" : "";
            char s1[32], s2[32], s3[32], s4[32];
            snprintf(s1, sizeof s1, "First%s para.", r);
            snprintf(s2, sizeof s2, "Quoted%s one.", r);
            snprintf(s3, sizeof s3, "Item%s two", r);
            snprintf(s4, sizeof s4, "Last%s", r);
            const char *want[] = {"Title", s1, s2, "Item one", s3, s4};
            const char *parts[] = {"# T0", "T1", "> T2", "", "- T3", "- T4", "", "```", "code",
                                   "```", "T5"};
            for (int k = 0; k < 11; k++) {
                ADDS(out, o, parts[k]);
                if (k == 8)
                    ADD(out, o, x, xn);
                ADDS(out, o, l);
            }
            check_md(in, n, want, 6, out, o);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("markdown");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cr_lines);
    tcase_add_test(tc, test_mixed_lines);
    tcase_add_test(tc, test_nul);
    tcase_add_test(tc, test_setext_then_text);
    tcase_add_test(tc, test_bom);
    tcase_add_test(tc, test_front_matter);
    tcase_add_test(tc, test_hard_break);
    tcase_add_test(tc, test_table_kept);
    tcase_add_test(tc, test_each_in_place);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
