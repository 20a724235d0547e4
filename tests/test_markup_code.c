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
 *     them byte for byte;
 *   - formatting by attention (scripted alignments) writes each source
 *     element at most once: two that look the same are two, each placed
 *     alone, one no word takes counted in lostSpans; a part that attention
 *     moves away from the rest of its element is written without it, not
 *     in a copy; the plain text is the base, not the link of most bytes.
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

/* ---- formatting by attention: each source element at most once ---- */

/* An alignment of src and tgt (a token a word, split at spaces): target
 * word t attends 0.6 to source word t (when there is one) and nothing
 * else, then set[k] = {t, s, weight} overrides. */
static srv_align *align(const char *src, const char *tgt, const float (*set)[3], int n_set)
{
    size_t so[64][2], to[64][2];
    int ns = 0, nt = 0;
    for (int side = 0; side < 2; side++) {
        const char *t = side ? tgt : src;
        size_t(*o)[2] = side ? to : so;
        int *n = side ? &nt : &ns;
        for (size_t i = 0; t[i];) {
            if (t[i] == ' ') {
                i++;
                continue;
            }
            size_t a = i;
            while (t[i] && t[i] != ' ')
                i++;
            o[*n][0] = *n ? o[*n - 1][1] : 0; /* a piece's space is before it */
            o[(*n)++][1] = i;
            (void)a;
        }
    }
    srv_align *al = calloc(1, sizeof *al);
    *al = (srv_align){nt, ns, malloc(2 * (size_t)nt * sizeof(size_t)),
                      malloc(2 * (size_t)ns * sizeof(size_t)), calloc((size_t)(nt * ns), sizeof(float))};
    for (int i = 0; i < nt; i++) {
        al->t_off[2 * i] = to[i][0];
        al->t_off[2 * i + 1] = to[i][1];
        if (i < ns)
            al->w[i * ns + i] = 0.6f;
    }
    for (int j = 0; j < ns; j++) {
        al->s_off[2 * j] = so[j][0];
        al->s_off[2 * j + 1] = so[j][1];
    }
    for (int k = 0; k < n_set; k++)
        al->w[(int)set[k][0] * ns + (int)set[k][1]] = set[k][2];
    return al;
}

/* The .html page with its one segment translated as tgt by the alignment
 * (set: align's overrides); *lost: the answer's lostSpans. */
static char *translate_para(const char *page, const char *want_src, const char *tgt,
                            const float (*set)[3], int n_set, int *lost)
{
    srv_office *d = NULL;
    char err[256] = "";
    ck_assert_msg(srv_office_parse(page, strlen(page), ".html", &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(srv_office_n(d), 1);
    const char *src = srv_office_source(d, 0);
    ck_assert_str_eq(src, want_src);
    ck_assert_int_eq(srv_office_styled(d, 0), 1);
    srv_align *al = align(src, tgt, set, n_set);
    ck_assert_int_eq(srv_office_set(d, 0, tgt, al, 1), 0);
    srv_align_free(al, 1);
    *lost = srv_office_lost(d);
    size_t len = 0;
    char *out = srv_office_render(d, &len, err, sizeof err);
    ck_assert_msg(out != NULL, "%s", err);
    srv_office_free(d);
    return out;
}

/* Two elements that look the same (base-passwd's "<b class="COMMAND">pon</b>,
 * and <b class="COMMAND">poff</b>") are two, each carried alone: "poff"'s
 * word linked one way only still takes its own element while "pon" is
 * linked both ways; one that no word takes is counted in lostSpans. */
START_TEST(test_same_look_elements)
{
    static const char page[] = "<html><body><p>Use <b class=\"C\">pon</b>, and <b class=\"C\">poff"
                               "</b> now.</p></body></html>";
    /* "jetzt." pays "poff" more than "poff" does: "poff" links one way */
    static const float one_way[][3] = {{4, 3, 0.65f}, {4, 4, 0.7f}};
    int lost = -1;
    char *out = translate_para(page, "Use pon, and poff now.", "Nutze pon und poff jetzt.",
                               one_way, 2, &lost);
    ck_assert_msg(strstr(out, "<p>Nutze <b class=\"C\">pon</b> und <b class=\"C\">poff</b> jetzt.</p>") &&
                      lost == 0,
                  "lost %d: %s", lost, out);
    free(out);
    /* "poff" dropped by the model: its element is lost, and said so */
    static const float dropped[][3] = {{3, 3, 0.0f}, {3, 4, 0.7f}};
    out = translate_para(page, "Use pon, and poff now.", "Nutze pon und jetzt.", dropped, 2, &lost);
    ck_assert_msg(count(out, "<b class=\"C\">") == 1 && lost == 1, "lost %d: %s", lost, out);
    free(out);
}
END_TEST

/* libffi's "<dt><span class="category">Data type: </span><span><strong>
 * ffi_type</strong><a> ¶</a></span></dt>" with its words reordered: the
 * second span is not copied again when attention puts the category between
 * its two parts (the pilcrow's link is written without it). */
START_TEST(test_element_once)
{
    static const char page[] =
        "<html><body><dl><dt><span class=\"category\">Data type: </span><span><strong>ffi_type"
        "</strong><a href=\"#x\" class=\"copiable-anchor\"> \xc2\xb6</a></span></dt></dl>"
        "</body></html>";
    static const float moved[][3] = {{0, 0, 0.0f}, {0, 2, 0.6f}, {1, 1, 0.6f}, {2, 2, 0.0f},
                                     {2, 3, 0.6f}};
    int lost = -1;
    char *out = translate_para(page, "Data type: ffi_type \xc2\xb6", "ffi_type Datentyp: \xc2\xb6",
                               moved, 5, &lost);
    ck_assert_msg(count(out, "<span") == 2 && count(out, "<strong>") == 1 &&
                      count(out, "<a ") == 1 && strstr(out, "<strong>ffi_type</strong>") &&
                      strstr(out, "Datentyp:") && strstr(out, "\xc2\xb6</a>") && lost == 0,
                  "lost %d: %s", lost, out);
    free(out);
    /* in their order: as the source was, the space before the pilcrow the
     * link's (the source's space between the two) */
    static const float kept[][3] = {{0, 0, 0.0f}, {0, 1, 0.6f}, {1, 1, 0.0f}, {1, 2, 0.6f},
                                    {2, 2, 0.0f}, {2, 3, 0.6f}};
    out = translate_para(page, "Data type: ffi_type \xc2\xb6", "Datentyp: ffi_type \xc2\xb6", kept, 6,
                         &lost);
    ck_assert_msg(strstr(out, "<dt><span class=\"category\">Datentyp: </span><span><strong>ffi_type"
                              "</strong><a href=\"#x\" class=\"copiable-anchor\"> \xc2\xb6</a></span></dt>"),
                  "%s", out);
    free(out);
}
END_TEST

/* The plain text of a paragraph is the base even when a link has more
 * bytes (libxslt's FAQ: "Yes for example <a>xmlwrapp</a>, see <a>the
 * related pages about bindings</a>"): "zum", linked one way, stays plain
 * and the link holds its own words, once. */
START_TEST(test_plain_is_base)
{
    static const char page[] = "<html><body><p>Yes for example <a href=\"x\">xmlwrapp</a>, see "
                               "<a href=\"p.html\">the related pages about bindings</a></p>"
                               "</body></html>";
    static const float set[][3] = {{2, 1, 0.65f}, {2, 2, 0.7f}};
    int lost = -1;
    char *out = translate_para(page, "Yes for example xmlwrapp, see the related pages about bindings",
                               "Ja, zum Beispiel xmlwrapp, siehe die entsprechenden Seiten zu Bindungen",
                               set, 2, &lost);
    ck_assert_msg(strstr(out, "<p>Ja, zum Beispiel <a href=\"x\">xmlwrapp</a>, siehe <a href=\"p.html\">"
                              "die entsprechenden Seiten zu Bindungen</a></p>") &&
                      lost == 0,
                  "lost %d: %s", lost, out);
    free(out);
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
    TCase *te = tcase_create("elements");
    tcase_add_test(te, test_same_look_elements);
    tcase_add_test(te, test_element_once);
    tcase_add_test(te, test_plain_is_base);
    suite_add_tcase(s, te);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
