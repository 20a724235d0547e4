/*
 * test_documents.c - the documents table (server/service/documents.c)
 * without a model: which row an extension picks (case, .htm, unknown,
 * a prefix of one), the extensions in LibreTranslate's order, the content
 * types; a .txt file's lines (blanks around a line, CRLF, LF, a last line
 * without one, an empty file) and a subtitle file's pieces (numbers and
 * timings kept, cues translated) set in part and written back byte for
 * byte, a segment never set written as its source; a file of another
 * format refused as invalid. Each input is in a buffer of exactly its size
 * (ASan sees a read past its end).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "documents.h"
#include "office.h"

/* d parsed from in (n bytes, in a buffer of exactly n) as ext's row. */
static srv_document *parse(const char *ext, const char *in, size_t n, char **buf)
{
    char why[256];
    *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(*buf);
    memcpy(*buf, in, n);
    srv_document *d = NULL;
    const srv_doc_format *f = srv_doc_format_of(ext);
    ck_assert_ptr_nonnull(f);
    srv_err e = srv_doc_parse(f, ext, *buf, n, NULL, &d, why, sizeof why);
    ck_assert_msg(e == SRV_OK, "%s: %d %s", ext, e, why);
    return d;
}

static void check_render(srv_document *d, const char *want)
{
    char why[256];
    size_t n;
    char *out = srv_doc_render(d, &n, why, sizeof why);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_msg(!memcmp(out, want, n), "rendered '%.*s', want '%s'", (int)n, out, want);
    free(out);
}

START_TEST(test_rows)
{
    ck_assert_str_eq(srv_doc_format_of(".txt")->name, "text");
    ck_assert_str_eq(srv_doc_format_of(".TXT")->name, "text");
    ck_assert_str_eq(srv_doc_format_of(".htm")->name, "html");
    ck_assert_str_eq(srv_doc_format_of(".Markdown")->name, "markdown");
    ck_assert_str_eq(srv_doc_format_of(".pot")->name, "gettext");
    ck_assert_str_eq(srv_doc_format_of(".xliff")->name, "catalogue");
    ck_assert_str_eq(srv_doc_format_of(".epub")->name, "office");
    ck_assert_ptr_null(srv_doc_format_of(".sr"));   /* a prefix of .srt */
    ck_assert_ptr_null(srv_doc_format_of(".srtx")); /* .srt and more */
    ck_assert_ptr_null(srv_doc_format_of(".xyz"));
    ck_assert_ptr_null(srv_doc_format_of(""));
    ck_assert_ptr_null(srv_doc_format_of("txt"));   /* no dot */
    ck_assert_ptr_null(srv_doc_format_of(NULL));
    ck_assert(srv_doc_format_of(".docx")->binary && !srv_doc_format_of(".md")->binary);
    ck_assert_str_eq(srv_doc_ctype(srv_doc_format_of(".docx"), ".docx"), srv_office_mime(".docx"));
    ck_assert_str_eq(srv_doc_ctype(srv_doc_format_of(".vtt"), ".vtt"), "text/vtt; charset=utf-8");
    static const char *const want[] = {".txt", ".html", ".htm", ".srt", ".vtt", ".ts", ".xlf",
                                       ".xliff", ".po", ".pot", ".docx", ".pptx", ".odt",
                                       ".odp", ".epub", ".md", ".markdown", ".xhtml"};
    const char *got[64];
    int n = srv_doc_exts(got, 64);
    ck_assert_int_eq(n, 18);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(got[i], want[i]);
        ck_assert_ptr_nonnull(srv_doc_format_of(got[i])); /* every one has its row */
    }
    ck_assert_int_eq(srv_doc_exts(got, 3), 18); /* out holds 3, the count is all */
}
END_TEST

START_TEST(test_text_lines)
{
    static const char in[] = "  Hello.\t\r\n\nBye.  \nlast";
    char *buf;
    srv_document *d = parse(".txt", in, sizeof in - 1, &buf);
    ck_assert_int_eq(srv_doc_n(d), 4);
    static const char *const seg[] = {"Hello.", "", "Bye.", "last"};
    for (int i = 0; i < 4; i++) {
        size_t n;
        const char *t = srv_doc_seg(d, i, &n);
        ck_assert_uint_eq(n, strlen(seg[i]));
        ck_assert(!memcmp(t, seg[i], n));
        ck_assert(!srv_doc_keep(d, i) && !srv_doc_styled(d, i));
    }
    check_render(d, in); /* nothing set: the file as it was */
    ck_assert_int_eq(srv_doc_set(d, 0, "Hallo.", 6, NULL, 0), 0);
    ck_assert_int_eq(srv_doc_set(d, 3, "letzte", 6, NULL, 0), 0);
    check_render(d, "  Hallo.\t\r\n\nBye.  \nletzte");
    ck_assert_int_eq(srv_doc_set(d, 0, "Neu.", 4, NULL, 0), 0); /* set again: the last */
    check_render(d, "  Neu.\t\r\n\nBye.  \nletzte");
    ck_assert_int_eq(srv_doc_lost(d) + srv_doc_kept(d), 0);
    srv_doc_free(d);
    free(buf);
    d = parse(".txt", "", 0, &buf); /* an empty file: one empty line */
    ck_assert_int_eq(srv_doc_n(d), 1);
    check_render(d, "");
    srv_doc_free(d);
    free(buf);
}
END_TEST

START_TEST(test_subtitles)
{
    static const char in[] = "1\n00:00:01,000 --> 00:00:02,000\nHello there.\n\n"
                             "2\n00:00:03,000 --> 00:00:04,000\nGood bye.\n";
    char *buf;
    srv_document *d = parse(".srt", in, sizeof in - 1, &buf);
    int cues = 0, keep = 0, first = -1, second = -1;
    for (int i = 0; i < srv_doc_n(d); i++) {
        size_t n;
        const char *t = srv_doc_seg(d, i, &n);
        if (srv_doc_keep(d, i)) {
            keep++;
            continue;
        }
        cues++;
        if (n == 12 && !memcmp(t, "Hello there.", 12))
            first = i;
        if (n == 9 && !memcmp(t, "Good bye.", 9))
            second = i;
    }
    ck_assert_int_eq(cues, 2);
    ck_assert_int_gt(keep, 0);
    ck_assert(first >= 0 && second > first);
    check_render(d, in);
    ck_assert_int_eq(srv_doc_set(d, second, "Auf Wiedersehen.", 16, NULL, 0), 0);
    check_render(d, "1\n00:00:01,000 --> 00:00:02,000\nHello there.\n\n"
                    "2\n00:00:03,000 --> 00:00:04,000\nAuf Wiedersehen.\n");
    srv_doc_free(d);
    free(buf);
}
END_TEST

START_TEST(test_refused)
{
    char why[256] = "";
    static const char in[] = "no timing line here\n";
    char *buf = malloc(sizeof in - 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, in, sizeof in - 1);
    srv_document *d = (srv_document *)1;
    srv_err e = srv_doc_parse(srv_doc_format_of(".srt"), ".srt", buf, sizeof in - 1, NULL, &d,
                              why, sizeof why);
    ck_assert_int_eq(e, SRV_ERR_INVALID);
    ck_assert_ptr_null(d);
    ck_assert_msg(why[0], "no reason given");
    e = srv_doc_parse(srv_doc_format_of(".docx"), ".docx", buf, sizeof in - 1, NULL, &d, why,
                      sizeof why);
    ck_assert_int_eq(e, SRV_ERR_INVALID); /* no zip archive */
    ck_assert_ptr_null(d);
    srv_doc_free(NULL);
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("documents");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rows);
    tcase_add_test(tc, test_text_lines);
    tcase_add_test(tc, test_subtitles);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
