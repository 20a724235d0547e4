/*
 * test_html_text.c - the text of HTML as it comes back, on the bundled
 * model:
 *   - a non-breaking space (&nbsp;) between two links, or between two
 *     words, survives the translation (as U+00A0 or &nbsp;) while the words
 *     around it are translated: LibreTranslate's format=html (html.c) and
 *     .html and .xhtml files through /translate_file (office.c, spans.c);
 *     ones around a text (an indent) are kept as the other whitespace;
 *   - escaped markup stays escaped: format=html's &lt;script&gt; comes back
 *     &lt;script&gt;, never a live <script>; a daemon started with
 *     --libre-html-answer unescaped answers as LibreTranslate 1.x does (its
 *     html.unescape: <script>); format=text is unescaped either way.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;

#define NBSP "\xC2\xA0"

/* LibreTranslate's translatedText of q in format (English to German). */
static char *libre_on(int port, const char *q, const char *format)
{
    json_t *b = json_pack("{s:s,s:s,s:s,s:s}", "q", q, "source", "en", "target", "de", "format",
                          format);
    char *body = json_dumps(b, 0);
    json_decref(b);
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(port, "/translate", body, &r), 0);
    free(body);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    char *t = strdup(json_string_value(json_object_get(j, "translatedText")));
    json_decref(j);
    tc_resp_free(&r);
    return t;
}

/* A non-breaking space in t (U+00A0 or the entity) right after `after`. */
static int nbsp_after(const char *t, const char *after)
{
    char a[256], b[256];
    snprintf(a, sizeof a, "%s" NBSP, after);
    snprintf(b, sizeof b, "%s&nbsp;", after);
    return strstr(t, a) || strstr(t, b);
}

/* The checks of a page with the two shapes, translated as t. */
static void check_nbsp(const char *t)
{
    ck_assert_msg(nbsp_after(t, "</a>"), "the space between the links lost: %s", t);
    ck_assert_msg(nbsp_after(t, "10"), "the space in '10 seconds' lost: %s", t);
    /* the words around them translated */
    ck_assert_msg(!strstr(t, "Contact") && !strstr(t, "seconds") && strstr(t, "Kontakt") &&
                      strstr(t, "Sekunden"),
                  "not translated: %s", t);
    ck_assert_msg(strstr(t, "href=\"/a\"") && strstr(t, "href=\"/b\""), "a link lost: %s", t);
}

START_TEST(test_nbsp_format_html)
{
    char *t = libre_on(g_port,
                       "<p><a href=\"/a\">Home</a>&nbsp;<a href=\"/b\">Contact</a></p>"
                       "<p>Save the file in 10&nbsp;seconds.</p>",
                       "html");
    check_nbsp(t);
    free(t);
    /* around a text (an indent): kept as the other spaces there are */
    t = libre_on(g_port, "<p>&nbsp;&nbsp;Save the file.</p>", "html");
    ck_assert_msg(!strncmp(t, "<p>" NBSP NBSP, 7) || !strncmp(t, "<p>&nbsp;&nbsp;", 15),
                  "the indent lost: %s", t);
    ck_assert_msg(strstr(t, "Datei"), "not translated: %s", t);
    free(t);
}
END_TEST

/* name with data through /translate_file and /download_file. */
static char *round_trip(const char *name, const char *data)
{
    static char body[1 << 16];
    const char *kv[] = {"source", "en", "target", "de"};
    size_t n = tc_multipart(body, sizeof body, kv, 2, name, data, strlen(data));
    char h[128];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file", h, body, n, &r), 0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    const char *url = json_string_value(json_object_get(j, "translatedFileUrl"));
    ck_assert_ptr_nonnull(url);
    char path[512];
    snprintf(path, sizeof path, "%s", strstr(url, "/download_file/"));
    json_decref(j);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "GET", path, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    char *out = strndup(r.body, r.body_len);
    tc_resp_free(&r);
    return out;
}

START_TEST(test_nbsp_files)
{
    const char *html = "<html><body><p><a href=\"/a\">Home</a>&nbsp;<a href=\"/b\">Contact</a>"
                       "</p><p>Save the file in 10&nbsp;seconds.</p></body></html>\n";
    char *t = round_trip("page.html", html);
    check_nbsp(t);
    free(t);
    const char *xhtml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<html "
                        "xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>t</title></head>"
                        "<body><p><a href=\"/a\">Home</a>" NBSP "<a href=\"/b\">Contact</a></p>"
                        "<p>Save the file in 10" NBSP "seconds.</p></body></html>\n";
    t = round_trip("page.xhtml", xhtml);
    check_nbsp(t);
    free(t);
}
END_TEST

static const char k_script[] = "<p>Never run &lt;script&gt; tags from mail.</p>";

START_TEST(test_escaped_stays_escaped)
{
    char *t = libre_on(g_port, k_script, "html");
    ck_assert_msg(strstr(t, "&lt;script&gt;") && !strstr(t, "<script"), "live markup: %s", t);
    free(t);
    /* format=text: LibreTranslate's html.unescape, as before */
    t = libre_on(g_port, "Never run &lt;script&gt; tags from mail.", "text");
    ck_assert_msg(strstr(t, "<script>") && !strstr(t, "&lt;"), "text not unescaped: %s", t);
    free(t);
}
END_TEST

/* The LibreTranslate 1.x behaviour, asked for by --libre-html-answer. */
START_TEST(test_unescaped_switch)
{
    const char *args[] = {"--workers", "1", "--libre-html-answer", "unescaped", NULL};
    pid_t pid;
    int port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "unescaped", args, &pid);
    ck_assert_int_gt(port, 0);
    char *t = libre_on(port, k_script, "html");
    char *esc = libre_on(g_port, k_script, "html");
    ck_assert_msg(strstr(t, "<script>") && !strstr(t, "&lt;"), "not unescaped: %s", t);
    /* the same translation otherwise */
    char *p = strstr(esc, "&lt;script&gt;");
    ck_assert_ptr_nonnull(p);
    char want[1024];
    snprintf(want, sizeof want, "%.*s<script>%s", (int)(p - esc), esc,
             p + strlen("&lt;script&gt;"));
    ck_assert_str_eq(t, want);
    free(t);
    free(esc);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_html_text.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 300;
    const char *args[] = {"--workers", "1", NULL};
    pid_t pid;
    g_port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "html", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("html_text");
    TCase *tc = tcase_create("html");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_nbsp_format_html);
    tcase_add_test(tc, test_nbsp_files);
    tcase_add_test(tc, test_escaped_stays_escaped);
    tcase_add_test(tc, test_unescaped_switch);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
