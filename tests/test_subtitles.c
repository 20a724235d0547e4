/*
 * test_subtitles.c - .srt and .vtt files through LibreTranslate's
 * /translate_file (server/service/subtitles.c) on the bundled model:
 *   - cue numbers, timing lines (with their settings), the WEBVTT header,
 *     NOTE blocks and the blank lines between come back byte for byte, the
 *     cue count and the line endings (CRLF or LF) too;
 *   - a cue's lines are one text: its lines joined by spaces are
 *     /translate's answer for the joined text, broken over as many lines;
 *   - a whole-cue <i> is kept around the translation; a cue of speakers'
 *     lines ("- ...") is translated line by line, each dash kept;
 *   - cues without blank lines between them (a timing line after a cue's
 *     text ends it; a cue number before it goes with the next cue);
 *   - a file with no cue is refused, naming it;
 *   - cue markup (WebVTT's voices, classes, <i>/<b>/<u>, <ruby>, <lang>,
 *     karaoke timestamps, references; SubRip's <font>, <i>, {\an8}) never
 *     goes to the model: the tags of each cue come back (the same multiset
 *     unless lostSpans counts some lost), a voice first, every timing line
 *     byte for byte, the text between the tags the model's translation of
 *     the text alone; lostSpans answered.
 */
#include <check.h>
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

/* LibreTranslate's translation of q (English to German). */
static char *libre(const char *q)
{
    json_t *b = json_pack("{s:s,s:s,s:s}", "q", q, "source", "en", "target", "de");
    char *body = json_dumps(b, 0);
    json_decref(b);
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, "/translate", body, &r), 0);
    free(body);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    char *t = strdup(json_string_value(json_object_get(j, "translatedText")));
    json_decref(j);
    tc_resp_free(&r);
    return t;
}

/* name with data through /translate_file and /download_file; *lost: the
 * answer's lostSpans (-1 when absent) unless NULL. */
static char *round_trip_lost(const char *name, const char *data, long *lost)
{
    char body[16384];
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
    if (lost) {
        json_t *l = json_object_get(j, "lostSpans");
        *lost = json_is_integer(l) ? (long)json_integer_value(l) : -1;
    }
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

static char *round_trip(const char *name, const char *data)
{
    return round_trip_lost(name, data, NULL);
}

/* t's lines at nl (malloc'd array of malloc'd strings). */
static int split_lines(const char *t, const char *nl, char ***out)
{
    int n = 0, cap = 64;
    char **l = malloc((size_t)cap * sizeof *l);
    for (const char *p = t;;) {
        const char *e = strstr(p, nl);
        if (n == cap)
            l = realloc(l, (size_t)(cap *= 2) * sizeof *l);
        l[n++] = e ? strndup(p, (size_t)(e - p)) : strdup(p);
        if (!e)
            break;
        p = e + strlen(nl);
    }
    *out = l;
    return n;
}

/* src and its translation got, line by line (lines ending in nl): every
 * line up to and including a cue's timing line, and the blank lines, the
 * same; a cue's text lines as many, which joined by spaces are want[cue]. */
static void check(const char *src, const char *got, const char *nl, const char *const *want,
                  int cues)
{
    char **a, **b;
    int na = split_lines(src, nl, &a), nb = split_lines(got, nl, &b);
    ck_assert_msg(na == nb, "%d lines, the source has %d:\n%s", nb, na, got);
    int cue = 0, in_text = 0;
    char joined[4096] = "";
    for (int i = 0; i <= na; i++) {
        if (in_text && (i == na || !a[i][0])) {
            ck_assert_msg(cue < cues, "more cues than %d", cues);
            ck_assert_str_eq(joined, want[cue]);
            cue++;
            in_text = 0;
            joined[0] = 0;
        }
        if (i == na)
            break;
        if (in_text) {
            ck_assert_msg(b[i][0], "line %d of a cue is empty:\n%s", i, got);
            snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s",
                     joined[0] ? " " : "", b[i]);
            continue;
        }
        ck_assert_str_eq(b[i], a[i]);
        in_text = strstr(a[i], "-->") != NULL;
    }
    ck_assert_int_eq(cue, cues);
    for (int i = 0; i < na; i++)
        free(a[i]);
    for (int i = 0; i < nb; i++)
        free(b[i]);
    free(a);
    free(b);
}

START_TEST(test_srt)
{
    const char *srt = "1\r\n00:00:01,000 --> 00:00:03,500\r\nSave the file\r\nbefore closing "
                      "the window.\r\n\r\n2\r\n00:00:04,000 --> 00:00:06,000\r\n<i>Where is the "
                      "station?</i>\r\n\r\n3\r\n00:00:07,000 --> 00:00:09,000\r\n- Good "
                      "morning.\r\n- The disk is full.\r\n";
    char *t1 = libre("Save the file before closing the window.");
    char *t2 = libre("Where is the station?");
    char *t3 = libre("Good morning."), *t4 = libre("The disk is full.");
    char w2[512], w3[512];
    snprintf(w2, sizeof w2, "<i>%s</i>", t2);
    snprintf(w3, sizeof w3, "- %s - %s", t3, t4);
    const char *want[] = {t1, w2, w3};
    char *got = round_trip("film.srt", srt);
    check(srt, got, "\r\n", want, 3);
    /* the speakers' cue: each line its own translation, after its dash
     * (kept out of the model: it dropped it) */
    char lines[1024];
    snprintf(lines, sizeof lines, "\r\n- %s\r\n- %s\r\n", t3, t4);
    ck_assert_msg(strstr(got, lines) != NULL, "no lines '%s' / '%s' in:\n%s", t3, t4, got);
    free(got);
    free(t1);
    free(t2);
    free(t3);
    free(t4);
}
END_TEST

START_TEST(test_vtt)
{
    const char *vtt = "WEBVTT\n\nNOTE not a cue\n\nintro\n00:00.000 --> 00:02.000 align:start\n"
                      "Open the window\nand close the door.\n\n00:03.000 --> 00:05.000\nThe test "
                      "failed again.\n";
    char *t1 = libre("Open the window and close the door."), *t2 = libre("The test failed again.");
    const char *want[] = {t1, t2};
    char *got = round_trip("talk.vtt", vtt);
    check(vtt, got, "\n", want, 2);
    free(got);
    free(t1);
    free(t2);
}
END_TEST

/* Cues written without blank lines between them (youtube-dl writes such
 * WebVTT; SubRip files are found so too): a timing line after a cue's text
 * ends the cue (WebVTT's parsing algorithm), a cue number just before it
 * goes with the next cue; every timing line and number comes back byte for
 * byte, never through the model. */
START_TEST(test_no_blank_lines)
{
    const char *vtt = "WEBVTT\n\n00:00:01.000 --> 00:00:03.080\nOpen the window.\n"
                      "00:00:03.080 --> 00:05:05.069\nThe test failed again.\n"
                      "00:05:05.069 --> 00:05:07.000\nGood night.\n";
    char *a = libre("Open the window."), *b = libre("The test failed again."),
         *c = libre("Good night.");
    char want[2048];
    snprintf(want, sizeof want,
             "WEBVTT\n\n00:00:01.000 --> 00:00:03.080\n%s\n00:00:03.080 --> 00:05:05.069\n%s\n"
             "00:05:05.069 --> 00:05:07.000\n%s\n",
             a, b, c);
    char *got = round_trip("auto.vtt", vtt);
    ck_assert_str_eq(got, want);
    free(got);
    const char *srt = "1\n00:00:01,000 --> 00:00:03,080\nOpen the window.\n2\n"
                      "00:00:03,080 --> 00:00:05,000\nThe test failed again.\n";
    snprintf(want, sizeof want,
             "1\n00:00:01,000 --> 00:00:03,080\n%s\n2\n00:00:03,080 --> 00:00:05,000\n%s\n", a,
             b);
    got = round_trip("tight.srt", srt);
    ck_assert_str_eq(got, want);
    free(got);
    free(a);
    free(b);
    free(c);
}
END_TEST

START_TEST(test_no_cue)
{
    char body[2048], h[128];
    const char *kv[] = {"source", "en", "target", "de"};
    const char *bad = "no timing line here\n";
    size_t n = tc_multipart(body, sizeof body, kv, 2, "bad.srt", bad, strlen(bad));
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file", h, body, n, &r), 0);
    ck_assert_msg(r.status == 400 && strstr(r.body, "bad.srt") && strstr(r.body, "no subtitle cue"),
                  "%d %s", r.status, r.body);
    tc_resp_free(&r);
}
END_TEST

/* The tags of a cue's text t (<...> and {\...}) as one sorted list of
 * lines; its text without them, spaces collapsed, references read, in
 * text (size n). */
static char *tags_of(const char *t, char *text, size_t n)
{
    char *tags[256];
    int nt = 0;
    size_t w = 0;
    int sp = 1;
    for (const char *p = t; *p;) {
        const char *e = *p == '<' ? strchr(p, '>') : *p == '{' && p[1] == '\\' ? strchr(p, '}') : 0;
        if (e) {
            ck_assert_int_lt(nt, 256);
            tags[nt++] = strndup(p, (size_t)(e - p + 1));
            p = e + 1;
            continue;
        }
        if (*p == ' ' || *p == '\n' || *p == '\r') {
            if (!sp && w + 1 < n)
                text[w++] = ' ';
            sp = 1;
            p++;
            continue;
        }
        static const char *const refs[][2] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}};
        int k = 0;
        for (size_t r = 0; r < 3 && !k; r++)
            if (!strncmp(p, refs[r][0], strlen(refs[r][0]))) {
                if (w + 1 < n)
                    text[w++] = refs[r][1][0];
                p += strlen(refs[r][0]);
                k = 1;
            }
        if (!k && w + 1 < n)
            text[w++] = *p++;
        else if (!k)
            p++;
        sp = 0;
    }
    while (w && text[w - 1] == ' ')
        w--;
    text[w] = 0;
    for (int i = 0; i < nt; i++)
        for (int j = i + 1; j < nt; j++)
            if (strcmp(tags[j], tags[i]) < 0) {
                char *x = tags[i];
                tags[i] = tags[j];
                tags[j] = x;
            }
    size_t len = 1;
    for (int i = 0; i < nt; i++)
        len += strlen(tags[i]) + 1;
    char *out = calloc(1, len);
    for (int i = 0; i < nt; i++) {
        strcat(out, tags[i]);
        strcat(out, "\n");
        free(tags[i]);
    }
    return out;
}

/* src's translation got: the same lines up to each timing line, each cue
 * as many lines; its tags the same multiset (lost == 0) or fewer, by at
 * most lost; its first tag the source's when that was a voice or an
 * override; its text without tags the model's translation of the source's
 * text without them. */
static void check_markup(const char *src, const char *got, long lost, int cues)
{
    char **a, **b;
    int na = split_lines(src, "\n", &a), nb = split_lines(got, "\n", &b);
    ck_assert_msg(na == nb, "%d lines, the source has %d:\n%s", nb, na, got);
    int cue = 0, missing = 0;
    for (int i = 0; i < na;) {
        ck_assert_str_eq(b[i], a[i]);
        if (!strstr(a[i++], "-->"))
            continue;
        char cs[2048] = "", cg[2048] = "";
        for (; i < na && a[i][0]; i++) {
            ck_assert_msg(b[i][0], "line %d of a cue is empty:\n%s", i, got);
            snprintf(cs + strlen(cs), sizeof cs - strlen(cs), "%s%s", cs[0] ? "\n" : "", a[i]);
            snprintf(cg + strlen(cg), sizeof cg - strlen(cg), "%s%s", cg[0] ? "\n" : "", b[i]);
        }
        cue++;
        char ts[1024], tg[1024];
        char *ks = tags_of(cs, ts, sizeof ts), *kg = tags_of(cg, tg, sizeof tg);
        if (strcmp(ks, kg) != 0) {
            /* every tag out was in; the others lost */
            int in = 0, out = 0;
            for (const char *p = ks; *p; p++)
                in += *p == '\n';
            for (const char *p = kg; *p; p++)
                out += *p == '\n';
            ck_assert_msg(out < in, "cue %d: tags\n%s\nbecame\n%s", cue, ks, kg);
            missing++;
        }
        if (cs[0] == '<' && cs[1] == 'v')
            ck_assert_msg(!strncmp(cg, cs, strcspn(cs, ">") + 1), "the voice moved: %s", cg);
        if (cs[0] == '{')
            ck_assert_msg(!strncmp(cg, cs, strcspn(cs, "}") + 1), "the override moved: %s", cg);
        char *want = libre(ts);
        ck_assert_msg(!strcmp(tg, want), "cue %d: '%s' is not '%s' (of '%s')", cue, tg, want,
                      ts);
        free(want);
        free(ks);
        free(kg);
    }
    ck_assert_int_eq(cue, cues);
    ck_assert_msg(missing <= lost, "%d cues lost tags, lostSpans %ld", missing, lost);
    for (int i = 0; i < na; i++)
        free(a[i]);
    for (int i = 0; i < nb; i++)
        free(b[i]);
    free(a);
    free(b);
}

START_TEST(test_cue_markup)
{
    const char *vtt =
        "WEBVTT\n\nSTYLE\n::cue(.yellow) { color: yellow }\n\n"
        "1\n00:00:01.000 --> 00:00:03.000 line:0\n<v Roger Bingham>Save the file before "
        "closing the window.\n\n"
        "00:00:03.000 --> 00:00:05.000\n<v.loud Esme>Where is the <c.yellow>station</c>?</v>\n\n"
        "00:00:05.000 --> 00:00:07.000\nThe <i>disk</i> is <b>full</b>\nand the <u>test</u> "
        "failed.\n\n"
        "00:00:07.000 --> 00:00:09.000\n<lang de>Guten Tag</lang> means good "
        "<ruby>morning<rt>day</rt></ruby>.\n\n"
        "00:00:09.000 --> 00:00:11.000\n<00:00:09.000>Open <00:00:09.500>the "
        "<00:00:10.000>window.\n\n"
        "00:00:11.000 --> 00:00:13.000\n<i>Tom &amp; Jerry &lt;3 the house.</i>\n\n"
        "00:00:13.000 --> 00:00:15.000\n<v Ann>- Good morning.\n<v Bob>- The disk is full.\n";
    long lost = -2;
    char *got = round_trip_lost("markup.vtt", vtt, &lost);
    /* the bundled model loses one style here: <rt>, its word glued to the
     * ruby's base (one word to the model); tags placed without attention
     * would lose more */
    ck_assert_int_eq(lost, 1);
    check_markup(vtt, got, lost, 7);
    ck_assert_msg(strstr(got, "&amp;") && strstr(got, "&lt;3") && !strstr(got, "<3"),
                  "references not written again:\n%s", got);
    ck_assert_msg(strstr(got, "\n<v Ann>- ") && strstr(got, "\n<v Bob>- "),
                  "the speakers' voices and dashes:\n%s", got);
    free(got);
    const char *srt = "1\n00:00:01,000 --> 00:00:03,000\n<font color=\"#ffff00\">Where is the "
                      "station?</font>\n\n"
                      "2\n00:00:03,000 --> 00:00:05,000\n{\\an8}Save the <i>file</i> before "
                      "closing\nthe <font color=\"red\">window</font>.\n\n"
                      "3\n00:00:05,000 --> 00:00:07,000\n{\\an8}<i>The test failed "
                      "again.</i>\n\n"
                      "4\n00:00:07,000 --> 00:00:09,000\n<i>- Good morning.</i>\n<i>- The disk "
                      "is full.</i>\n";
    got = round_trip_lost("markup.srt", srt, &lost);
    ck_assert_int_eq(lost, 0);
    check_markup(srt, got, lost, 4);
    ck_assert_msg(strstr(got, "\n<i>- ") && strstr(got, ".</i>\n<i>- "),
                  "the speakers' dashes inside their <i>:\n%s", got);
    free(got);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_subtitles.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 300;
    const char *args[] = {"--workers", "1", NULL};
    pid_t pid;
    g_port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "subtitles", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("subtitles");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_srt);
    tcase_add_test(tc, test_vtt);
    tcase_add_test(tc, test_no_blank_lines);
    tcase_add_test(tc, test_no_cue);
    tcase_add_test(tc, test_cue_markup);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
