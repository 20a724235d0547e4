/*
 * test_xmlbound.c - the XML readers' bounds in work (server/service/
 * xmllimits.h) through the readers themselves, without a model:
 *   - srv_xml_scan's counts: attributes between two '<', as character
 *     references in an entity value; HTML's attribute loop replayed
 *     (unquoted, valueless, '<' in a quoted value, a tag inside a comment);
 *   - refused at once, naming the limit: an element with 40,000 attributes
 *     (.xhtml, a .ts, format=html; 38-63 s of CPU before), one with 201,
 *     too many nodes, too much text (an entity used 2,000 times), too many
 *     paragraphs, segments and units, a DTD with attribute defaults or
 *     parameter entities, a zip entry inflating more than 100 times;
 *   - an internal entity of plain text is translated where it stands (it
 *     was kept as an object and moved to the front of its paragraph); an
 *     external one is never read; a billion laughs does not expand.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zip.h>

#include "catalog.h"
#include "html.h"
#include "office.h"
#include "xmllimits.h"

/* A growing string. */
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

static void put(sb *b, const char *t)
{
    size_t l = strlen(t);
    if (b->n + l + 1 > b->cap) {
        b->cap = (b->n + l + 1) * 2;
        b->s = realloc(b->s, b->cap);
        ck_assert_ptr_nonnull(b->s);
    }
    memcpy(b->s + b->n, t, l + 1);
    b->n += l;
}

static const char k_xhtml0[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
static const char k_html[] = "<html xmlns=\"http://www.w3.org/1999/xhtml\"><body>";

/* An .xhtml document: DOCTYPE (or NULL), then body between <body> tags. */
static void xhtml(sb *b, const char *doctype, const char *body)
{
    put(b, k_xhtml0);
    if (doctype)
        put(b, doctype);
    put(b, k_html);
    if (body)
        put(b, body);
}

static void xhtml_end(sb *b)
{
    put(b, "</body></html>\n");
}

/* srv_office_parse's answer for an .xhtml (or ext) file; err out. */
static int office(const sb *b, const char *ext, srv_office **d, char *err)
{
    err[0] = 0;
    int rc = srv_office_parse(b->s, b->n, ext, d, err, 256);
    if (rc != 0)
        ck_assert_ptr_null(*d);
    return rc;
}

static void refused(const sb *b, const char *ext, const char *why)
{
    srv_office *d = NULL;
    char err[256];
    int rc = office(b, ext, &d, err);
    ck_assert_msg(rc == -2, "%s: rc %d (%s)", why, rc, err);
    ck_assert_msg(strstr(err, why), "'%s' not in '%s'", why, err);
}

static void attrs(sb *b, int n, int quoted)
{
    char a[32];
    for (int i = 0; i < n; i++) {
        snprintf(a, sizeof a, quoted ? " a%d=\"\"" : " a%d", i);
        put(b, a);
    }
}

START_TEST(test_scan)
{
    srv_xml_stats st;
    const char *x = "<a x='1' y = \"2\"><b z='3'/>t=1 a='x'</a>";
    srv_xml_scan(x, strlen(x), &st);
    ck_assert_uint_eq(st.max_attrs, 2); /* b's z and the text's "='": an overestimate */
    ck_assert_uint_eq(st.nodes, 3 + 4);
    /* an entity's value writes '=' and quotes as references */
    x = "<!DOCTYPE a [<!ENTITY e \"&#60;b p&#61;&#39;1&#39; q&#x3D;&#x22;2&#x22;/>\">]><a>&e;&amp;</a>";
    srv_xml_scan(x, strlen(x), &st);
    ck_assert_uint_eq(st.max_attrs, 2);
    ck_assert_uint_eq(st.nodes, 4 + 1 + 2 + 1); /* '<' 4, &#60; 1, attributes 2, &e; 1 */
    ck_assert(!st.attlist && !st.pe);
    x = "<!DOCTYPE a [<!ATTLIST a b CDATA 'c'>]><a/>";
    srv_xml_scan(x, strlen(x), &st);
    ck_assert(st.attlist);
    x = "<!DOCTYPE a [<!ENTITY  % p 'x'>]><a/>";
    srv_xml_scan(x, strlen(x), &st);
    ck_assert(st.pe);

    /* HTML: the parser's own attribute loop */
    size_t nodes = 0;
    char err[256];
    sb b = {0};
    put(&b, "<p");
    attrs(&b, 200, 0);
    put(&b, ">x</p>");
    ck_assert_int_eq(srv_xml_check(b.s, b.n, 1, "h", &nodes, err, sizeof err), 0);
    ck_assert_uint_eq(nodes, 2 + 200);
    b.n = 0;
    put(&b, "<p");
    attrs(&b, 201, 0);
    put(&b, ">");
    ck_assert_int_eq(srv_xml_check(b.s, b.n, 1, "h", &nodes, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "more than 200 attributes"), "%s", err);
    /* values holding '<' and '>' (HTML allows them), no blank between */
    b.n = 0;
    put(&b, "<p ");
    for (int i = 0; i < 201; i++) {
        char a[32];
        snprintf(a, sizeof a, "a%d=\"<b>\"", i);
        put(&b, a);
    }
    put(&b, ">");
    ck_assert_int_eq(srv_xml_check(b.s, b.n, 1, "h", &nodes, err, sizeof err), -2);
    /* a tag whose quote a comment opens: the real tag is counted too */
    b.n = 0;
    put(&b, "<!-- <a title=\" --><p");
    attrs(&b, 201, 0);
    put(&b, "> \" -->");
    ck_assert_int_eq(srv_xml_check(b.s, b.n, 1, "h", &nodes, err, sizeof err), -2);
    /* unquoted values, a name longer than the parser's 100 characters */
    b.n = 0;
    put(&b, "<p a=1 b=2 c d>");
    nodes = 0;
    ck_assert_int_eq(srv_xml_check(b.s, b.n, 1, "h", &nodes, err, sizeof err), 0);
    ck_assert_uint_eq(nodes, 1 + 4);
    free(b.s);
}
END_TEST

START_TEST(test_attributes)
{
    /* 40,000 attributes on a paragraph: 38-63 s of CPU in libxml2 before */
    sb b = {0};
    xhtml(&b, NULL, "<p");
    attrs(&b, 40000, 1);
    put(&b, ">Hello world.</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "more than 200 attributes (the limit on attributes per element)");
    /* 201 refused, 200 read */
    b.n = 0;
    xhtml(&b, NULL, "<p");
    attrs(&b, 201, 1);
    put(&b, ">Hello world.</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "more than 200 attributes");
    b.n = 0;
    xhtml(&b, NULL, "<p");
    attrs(&b, 200, 1);
    put(&b, ">Hello world.</p>");
    xhtml_end(&b);
    srv_office *d = NULL;
    char err[256];
    ck_assert_int_eq(office(&b, ".xhtml", &d, err), 0);
    ck_assert_int_eq(srv_office_n(d), 1);
    srv_office_free(d);
    /* the same through the HTML parser (.html, format=html) and a .ts */
    b.n = 0;
    put(&b, "<p");
    attrs(&b, 40000, 0);
    put(&b, ">Hello world.</p>");
    refused(&b, ".html", "more than 200 attributes");
    srv_html *h = NULL;
    ck_assert_int_eq(srv_html_parse(b.s, b.n, &h, err, sizeof err), -2);
    ck_assert_ptr_null(h);
    b.n = 0;
    put(&b, "<TS version=\"2.1\"><context><message");
    attrs(&b, 40000, 1);
    put(&b, "><source>Hello</source></message></context></TS>");
    srv_catalog *c = NULL;
    ck_assert_int_eq(srv_catalog_parse(b.s, b.n, 0, &c, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "attributes per element"), "%s", err);
    free(b.s);
}
END_TEST

START_TEST(test_dtd)
{
    sb b = {0};
    xhtml(&b, "<!DOCTYPE html [<!ATTLIST p a CDATA 'x'>]>\n", "<p>Hello.</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "attribute defaults (<!ATTLIST>)");
    b.n = 0;
    xhtml(&b, "<!DOCTYPE html [<!ENTITY % p '<!ENTITY x \"y\">'> %p;]>\n", "<p>Hello.</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "parameter entities");
    free(b.s);
}
END_TEST

START_TEST(test_nodes)
{
    /* 2,000,001 empty elements: counted before the parser sees them */
    sb b = {0};
    xhtml(&b, NULL, "<p>a");
    for (int i = 0; i < SRV_XML_MAX_NODES / 8 + 1; i++)
        put(&b, "<b/><b/><b/><b/><b/><b/><b/><b/>");
    put(&b, "</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "the limit on nodes per document");
    free(b.s);
}
END_TEST

START_TEST(test_text)
{
    /* a 10 KB entity used 2,000 times: 20 MB of text from 36 KB */
    sb b = {0};
    put(&b, "<!DOCTYPE html [<!ENTITY w \"");
    for (int i = 0; i < 1000; i++)
        put(&b, "word word ");
    put(&b, "\">]>\n");
    char *dt = strdup(b.s);
    b.n = 0;
    xhtml(&b, dt, NULL);
    for (int i = 0; i < 2000; i++)
        put(&b, "<p>&w;</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "the limit on text per document");
    /* 1,600 of them pass */
    b.n = 0;
    xhtml(&b, dt, NULL);
    for (int i = 0; i < 1600; i++)
        put(&b, "<p>&w;</p>");
    xhtml_end(&b);
    srv_office *d = NULL;
    char err[256];
    ck_assert_int_eq(office(&b, ".xhtml", &d, err), 0);
    ck_assert_int_eq(srv_office_n(d), 1600);
    ck_assert_uint_eq(strlen(srv_office_source(d, 0)), 10000 - 1);
    srv_office_free(d);
    free(dt);
    free(b.s);
}
END_TEST

START_TEST(test_paragraphs)
{
    /* 200,001 paragraphs without a letter: refused, not kept */
    sb b = {0};
    xhtml(&b, NULL, NULL);
    for (int i = 0; i < SRV_XML_MAX_PARAS + 1; i++)
        put(&b, "<p>1</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "more than 200000 paragraphs (the limit per document)");
    /* 100,001 paragraphs of two segments */
    b.n = 0;
    xhtml(&b, NULL, NULL);
    for (int i = 0; i < SRV_XML_MAX_SEGMENTS / 2 + 1; i++)
        put(&b, "<p>a<br/>b</p>");
    xhtml_end(&b);
    refused(&b, ".xhtml", "more than 200000 segments");
    /* units of a catalogue */
    b.n = 0;
    put(&b, "<TS version=\"2.1\"><context>");
    for (int i = 0; i < SRV_XML_MAX_PARAS + 1; i++)
        put(&b, "<message><source>a</source></message>");
    put(&b, "</context></TS>");
    srv_catalog *c = NULL;
    char err[256];
    ck_assert_int_eq(srv_catalog_parse(b.s, b.n, 0, &c, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "more than 200000 units"), "%s", err);
    free(b.s);
}
END_TEST

/* An in-memory .docx of one word/document.xml (body), deflated. */
static char *docx(const char *body, size_t n, size_t *len)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *out = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *z = zip_open_from_source(out, ZIP_TRUNCATE, &ze);
    ck_assert_ptr_nonnull(z);
    zip_source_keep(out);
    zip_source_t *s = zip_source_buffer(z, body, n, 0);
    ck_assert_int_ge(zip_file_add(z, "word/document.xml", s, 0), 0);
    ck_assert_int_eq(zip_close(z), 0);
    zip_stat_t st;
    ck_assert_int_eq(zip_source_open(out), 0);
    ck_assert_int_eq(zip_source_stat(out, &st), 0);
    char *buf = malloc(st.size);
    ck_assert_int_eq(zip_source_read(out, buf, st.size), (zip_int64_t)st.size);
    zip_source_close(out);
    zip_source_free(out);
    zip_error_fini(&ze);
    *len = st.size;
    return buf;
}

START_TEST(test_ratio)
{
    /* 8 MB of digit-only paragraphs deflate ~300 times: refused before
     * they are inflated */
    sb b = {0};
    put(&b, "<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/"
            "main\"><w:body>");
    size_t head = b.n;
    for (int i = 0; i < 230000; i++)
        put(&b, "<w:p><w:r><w:t>1</w:t></w:r></w:p>");
    put(&b, "</w:body></w:document>");
    size_t len;
    char *z = docx(b.s, b.n, &len);
    srv_office *d = NULL;
    char err[256];
    ck_assert_int_eq(srv_office_parse(z, len, ".docx", &d, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "more than 100 times (the limit on an entry's ratio)"), "%s", err);
    free(z);
    /* under 1 MiB inflated: any ratio */
    b.n = head;
    for (int i = 0; i < 20000; i++)
        put(&b, "<w:p><w:r><w:t>1</w:t></w:r></w:p>");
    put(&b, "<w:p><w:r><w:t>Hello.</w:t></w:r></w:p></w:body></w:document>");
    z = docx(b.s, b.n, &len);
    ck_assert_int_eq(srv_office_parse(z, len, ".docx", &d, err, sizeof err), 0);
    ck_assert_int_eq(srv_office_n(d), 1);
    srv_office_free(d);
    free(z);
    free(b.s);
}
END_TEST

START_TEST(test_entities)
{
    /* an internal entity: its text translated where it stands */
    sb b = {0};
    xhtml(&b, "<!DOCTYPE html [<!ENTITY prod \"the file manager\">]>\n",
          "<p>Open &prod; before <b>closing</b>.</p>");
    xhtml_end(&b);
    srv_office *d = NULL;
    char err[256];
    ck_assert_int_eq(office(&b, ".xhtml", &d, err), 0);
    ck_assert_int_eq(srv_office_n(d), 1);
    ck_assert_str_eq(srv_office_source(d, 0), "Open the file manager before closing.");
    ck_assert_int_eq(srv_office_set(d, 0, "Öffnen Sie den Dateimanager vor dem Schließen.", NULL, 0),
                     0);
    size_t n;
    char *out = srv_office_render(d, &n, err, sizeof err);
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(strstr(out, "<p>Öffnen Sie den Dateimanager vor dem Schließen.</p>"), "%s", out);
    free(out);
    srv_office_free(d);
    /* an external one is never read: /etc/hostname's text is nowhere */
    b.n = 0;
    xhtml(&b, "<!DOCTYPE html [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n",
          "<p>Root: &x; here.</p>");
    xhtml_end(&b);
    ck_assert_int_eq(office(&b, ".xhtml", &d, err), 0);
    ck_assert_int_eq(srv_office_n(d), 1);
    ck_assert_msg(!strstr(srv_office_source(d, 0), "root:"), "%s", srv_office_source(d, 0));
    out = srv_office_render(d, &n, err, sizeof err);
    ck_assert_msg(out && !strstr(out, "root:") && strstr(out, "&x;"), "%s", out);
    free(out);
    srv_office_free(d);
    /* a billion laughs: refused, or its references kept */
    b.n = 0;
    char lol[4096];
    size_t k = (size_t)snprintf(lol, sizeof lol, "<!DOCTYPE html [<!ENTITY l0 \"lol\">");
    for (int i = 1; i < 10; i++)
        k += (size_t)snprintf(lol + k, sizeof lol - k,
                              "<!ENTITY l%d \"&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;\">",
                              i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
                              i - 1);
    snprintf(lol + k, sizeof lol - k, "]>\n");
    xhtml(&b, lol, "<p>Ha &l9; ha.</p>");
    xhtml_end(&b);
    int rc = office(&b, ".xhtml", &d, err);
    ck_assert(rc == 0 || rc == -2);
    if (rc == 0) {
        for (int i = 0; i < srv_office_n(d); i++)
            ck_assert_uint_lt(strlen(srv_office_source(d, i)), 1000);
        srv_office_free(d);
    }
    /* a catalogue's source: the entity's text is the unit's */
    b.n = 0;
    put(&b, "<?xml version=\"1.0\"?><!DOCTYPE TS [<!ENTITY app \"Files\">]><TS version=\"2.1\">"
            "<context><message><source>Quit &app;?</source></message></context></TS>");
    srv_catalog *c = NULL;
    ck_assert_int_eq(srv_catalog_parse(b.s, b.n, 0, &c, err, sizeof err), 0);
    ck_assert_int_eq(srv_catalog_n(c), 1);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Quit Files?");
    srv_catalog_free(c);
    free(b.s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("xmlbound");
    TCase *tc = tcase_create("xmlbound");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_scan);
    tcase_add_test(tc, test_attributes);
    tcase_add_test(tc, test_dtd);
    tcase_add_test(tc, test_nodes);
    tcase_add_test(tc, test_text);
    tcase_add_test(tc, test_paragraphs);
    tcase_add_test(tc, test_ratio);
    tcase_add_test(tc, test_entities);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
