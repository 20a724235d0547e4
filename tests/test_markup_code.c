/*
 * test_markup_code.c - code is never sent to the model in (X)HTML:
 *   - a document (.html and .xhtml, as /translate_file reads them): a <pre>
 *     block is no segment and comes back byte for byte; an inline <code>,
 *     <kbd>, <samp>, <var> or <tt> is no text of its paragraph's segment
 *     (it is an object, kept whole) and comes back whole, with every
 *     segment set to a translation that has none of its words;
 *   - an empty anchor (<a name="...">, a table of contents' target) is
 *     kept in its heading after the heading is translated;
 *   - a translated .html document declares its UTF-8 (a <meta charset>
 *     added when it had none; one it had set to utf-8, never two);
 *   - LibreTranslate's format=html (html.c): the same elements' text is no
 *     segment, script and style's neither, and the rendered document keeps
 *     them byte for byte.
 * The example is libffi's manual's, whose `if` came back `falls`.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "office.h"

static const char k_page[] =
    "<html><head><title>Using libffi</title></head><body>\n"
    "<h1><a name=\"INTRODUCTION\"></a>Introduction</h1>\n"
    "<p>Call <code>ffi_prep_cif</code> and press <kbd>Enter</kbd> to see <samp>ok</samp> "
    "for <var>n</var> in <tt>/var/log</tt> files.</p>\n"
    "<pre class=\"example\">if (ffi_prep_cif(&amp;cif, FFI_DEFAULT_ABI, 1) == FFI_OK)\n"
    "  puts(\"ok\");</pre>\n"
    "<p>The function returns a status.</p>\n"
    "</body></html>\n";

static const char *const k_code[] = {"<code>ffi_prep_cif</code>", "<kbd>Enter</kbd>",
                                     "<samp>ok</samp>", "<var>n</var>", "<tt>/var/log</tt>",
                                     "if (ffi_prep_cif(&amp;cif, FFI_DEFAULT_ABI, 1) == FFI_OK)",
                                     "<h1><a name=\"INTRODUCTION\""}; /* XHTML writes it <a .../> */

static void check_document(const char *ext, const char *data)
{
    srv_office *d = NULL;
    char err[256] = "";
    ck_assert_msg(srv_office_parse(data, strlen(data), ext, &d, err, sizeof err) == 0, "%s: %s",
                  ext, err);
    int n = srv_office_n(d);
    ck_assert_int_ge(n, 4); /* the title, the heading and the two paragraphs */
    for (int i = 0; i < n; i++) {
        const char *s = srv_office_source(d, i);
        ck_assert_msg(!strstr(s, "ffi_prep_cif") && !strstr(s, "Enter") && !strstr(s, "/var") &&
                          !strstr(s, "FFI_OK") && !strstr(s, "puts"),
                      "%s: code sent to the model: '%s'", ext, s);
        ck_assert_int_eq(srv_office_set(d, i, "Etwas anderes.", NULL, 0), 0);
    }
    size_t len = 0;
    char *out = srv_office_render(d, &len, err, sizeof err);
    ck_assert_msg(out != NULL, "%s: %s", ext, err);
    for (size_t k = 0; k < sizeof k_code / sizeof k_code[0]; k++)
        ck_assert_msg(strstr(out, k_code[k]) != NULL, "%s: '%s' lost:\n%s", ext, k_code[k], out);
    ck_assert_msg(strstr(out, "  puts(\"ok\");</pre>") != NULL, "%s: the pre block changed:\n%s",
                  ext, out);
    free(out);
    srv_office_free(d);
}

START_TEST(test_html_document)
{
    check_document(".html", k_page);
}
END_TEST

START_TEST(test_xhtml_document)
{
    char x[4096];
    snprintf(x, sizeof x, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n%s", k_page);
    /* the XHTML namespace on the root */
    char *h = strstr(x, "<html>");
    ck_assert_ptr_nonnull(h);
    char y[4200];
    snprintf(y, sizeof y, "%.*s<html xmlns=\"http://www.w3.org/1999/xhtml\">%s", (int)(h - x), x,
             h + 6);
    check_document(".xhtml", y);
}
END_TEST

/* The .html document's rendering with every segment set to "Text". */
static char *render_html(const char *src)
{
    srv_office *d = NULL;
    char err[256] = "";
    ck_assert_msg(srv_office_parse(src, strlen(src), ".html", &d, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < srv_office_n(d); i++)
        ck_assert_int_eq(srv_office_set(d, i, "Text", NULL, 0), 0);
    size_t len = 0;
    char *out = srv_office_render(d, &len, err, sizeof err);
    ck_assert_msg(out != NULL, "%s", err);
    srv_office_free(d);
    return out;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++)
        n++;
    return n;
}

START_TEST(test_charset_declared)
{
    char *a = render_html(k_page); /* a <head>, no charset */
    ck_assert_msg(strstr(a, "<head><meta charset=\"utf-8\">"), "%s", a);
    free(a);
    a = render_html("<html><body><p>Hello world.</p></body></html>"); /* no <head> */
    ck_assert_msg(strstr(a, "<html><head><meta charset=\"utf-8\"></head><body>"), "%s", a);
    free(a);
    a = render_html("<html><head><meta charset=\"iso-8859-1\"><title>Hi</title></head>"
                    "<body><p>Hello world.</p></body></html>");
    ck_assert_msg(count(a, "charset") == 1 && strstr(a, "charset=\"utf-8\""), "%s", a);
    free(a);
    a = render_html("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; "
                    "charset=iso-8859-1\"></head><body><p>Hello world.</p></body></html>");
    ck_assert_msg(count(a, "charset") == 1 && strstr(a, "charset=utf-8"), "%s", a);
    free(a);
}
END_TEST

START_TEST(test_libre_html)
{
    srv_html *h = NULL;
    char err[256] = "";
    const char *frag = "<p>Run <code>make install</code> as <tt>root</tt>.</p>"
                       "<script>var a = 1;</script><pre>if x then y</pre><p>Done.</p>";
    ck_assert_msg(srv_html_parse(frag, strlen(frag), &h, err, sizeof err) == 0, "%s", err);
    int n = srv_html_n_segments(h);
    ck_assert_int_ge(n, 2);
    for (int i = 0; i < n; i++) {
        const char *s = srv_html_segment(h, i);
        ck_assert_msg(!strstr(s, "make") && !strstr(s, "root") && !strstr(s, "var a") &&
                          !strstr(s, "if x"),
                      "code sent to the model: '%s'", s);
        ck_assert_int_eq(srv_html_set(h, i, "Text"), 0);
    }
    char *out = srv_html_render(h);
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(strstr(out, "<code>make install</code>") && strstr(out, "<tt>root</tt>") &&
                      strstr(out, "<pre>if x then y</pre>"),
                  "%s", out);
    free(out);
    srv_html_free(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("markup-code");
    TCase *tc = tcase_create("code");
    tcase_add_test(tc, test_html_document);
    tcase_add_test(tc, test_xhtml_document);
    tcase_add_test(tc, test_charset_declared);
    tcase_add_test(tc, test_libre_html);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
