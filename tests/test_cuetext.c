/*
 * test_cuetext.c - a subtitle cue's markup (server/service/cuetext.c) without
 * a model:
 *   - the text the model is given: every tag out, WebVTT's character
 *     references read (&amp; &lt; &gt; &lrm; &rlm; &nbsp;, numeric),
 *     SubRip's '<' before a name that is no tag of its kept as text, line
 *     breaks one space;
 *   - the head (a voice, a whole-cue tag, an override, a speaker's dash)
 *     and the tail, byte for byte;
 *   - the render of the model's text itself, aligned word to word, gives
 *     the cue back byte for byte: tags inside the text (<c.yellow>,
 *     <font color>, <ruby>/<rt>, <lang>), karaoke timestamps and
 *     overrides at their places, references written again;
 *   - a translation that swaps two words carries each word's tags with it;
 *     a style no word takes is counted lost and its tags are not written.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cuetext.h"

/* An alignment of t with itself (or with its words swapped by perm):
 * one token a word, all the attention on its own word. */
static srv_align *word_align(const char *src, const char *tgt, const int *perm)
{
    size_t sw[64][2], tw[64][2];
    int ns = 0, nt = 0;
    for (size_t i = 0; src[i];) {
        if (src[i] == ' ') {
            i++;
            continue;
        }
        sw[ns][0] = i;
        while (src[i] && src[i] != ' ')
            i++;
        sw[ns++][1] = i;
    }
    for (size_t i = 0; tgt[i];) {
        if (tgt[i] == ' ') {
            i++;
            continue;
        }
        tw[nt][0] = i;
        while (tgt[i] && tgt[i] != ' ')
            i++;
        tw[nt++][1] = i;
    }
    ck_assert_int_eq(ns, nt);
    srv_align *al = calloc(1, sizeof *al);
    al->ns = ns;
    al->nt = nt;
    al->s_off = malloc(2 * (size_t)ns * sizeof(size_t));
    al->t_off = malloc(2 * (size_t)nt * sizeof(size_t));
    al->w = calloc((size_t)ns * (size_t)nt, sizeof(float));
    for (int k = 0; k < ns; k++) {
        al->s_off[2 * k] = sw[k][0];
        al->s_off[2 * k + 1] = sw[k][1];
        al->t_off[2 * k] = tw[k][0];
        al->t_off[2 * k + 1] = tw[k][1];
    }
    for (int t = 0; t < nt; t++)
        al->w[t * ns + (perm ? perm[t] : t)] = 1.0f;
    return al;
}

/* cue parsed (vtt or not): its model text is want; rendered with that
 * text aligned to itself it is the cue again. */
static void round_trip(const char *cue, int vtt, srv_cue_dash dash, const char *want)
{
    srv_cue c;
    ck_assert_int_eq(srv_cue_parse(&c, cue, cue + strlen(cue), vtt, dash), 1);
    size_t n;
    const char *t = srv_cue_text(&c, &n);
    ck_assert_str_eq(t, want);
    ck_assert_uint_eq(n, strlen(want));
    char *copy = strdup(t);
    srv_align *al = srv_cue_styled(&c) ? word_align(copy, copy, NULL) : NULL;
    int lost = -1;
    char *out = srv_cue_render(&c, copy, n, al, al ? 1 : 0, 1, "\n", &lost);
    ck_assert_msg(out && !strcmp(out, cue), "'%s' came back as '%s'", cue, out);
    ck_assert_int_eq(lost, 0);
    free(out);
    free(copy);
    srv_align_free(al, al ? 1 : 0);
    srv_cue_free(&c);
}

START_TEST(test_vtt_shapes)
{
    round_trip("<v Roger Bingham>We are in New York City", 1, SRV_CUE_NO_DASH,
               "We are in New York City");
    round_trip("<v.loud Esme>It's a <c.yellow.bg_blue>blue</c> apple.</v>", 1, SRV_CUE_NO_DASH,
               "It's a blue apple.");
    round_trip("<i>Where is the <b>station</b> now?</i>", 1, SRV_CUE_NO_DASH,
               "Where is the station now?");
    round_trip("Never <u>drink</u> and <i>drive</i>.", 1, SRV_CUE_NO_DASH,
               "Never drink and drive.");
    round_trip("She said <lang fr>bonjour</lang> twice", 1, SRV_CUE_NO_DASH,
               "She said bonjour twice");
    round_trip("<00:00:01.000>Never <00:00:01.500>drink <00:00:02.000>liquid", 1,
               SRV_CUE_NO_DASH, "Never drink liquid");
    round_trip("Never <i>drink</i> and <i>drive</i> fast", 1, SRV_CUE_NO_DASH,
               "Never drink and drive fast");
    round_trip("Tom &amp; Jerry &lt;3 &gt; all&nbsp;others", 1, SRV_CUE_NO_DASH,
               "Tom & Jerry <3 > all\xC2\xA0others");
    round_trip("&lrm;Left and &rlm;right", 1, SRV_CUE_NO_DASH,
               "\xE2\x80\x8ELeft and \xE2\x80\x8Fright");
    round_trip("<b>Salt &amp; <i>pepper</i></b> please", 1, SRV_CUE_NO_DASH,
               "Salt & pepper please");
    round_trip("Visit <ruby>Tokyo <rt>capital</rt></ruby> today", 1, SRV_CUE_NO_DASH,
               "Visit Tokyo capital today");
}
END_TEST

START_TEST(test_srt_shapes)
{
    round_trip("<font color=\"#ffff00\">Where is the station?</font>", 0, SRV_CUE_NO_DASH,
               "Where is the station?");
    round_trip("{\\an8}Open the <font color=\"red\">window</font> now", 0, SRV_CUE_NO_DASH,
               "Open the window now");
    round_trip("{\\an8}<i>Good morning.</i>", 0, SRV_CUE_NO_DASH, "Good morning.");
    round_trip("The <I>disk</I> is full", 0, SRV_CUE_NO_DASH, "The disk is full");
    /* SubRip has no references and no other tags: text */
    round_trip("a <3 b &amp; c <x> d", 0, SRV_CUE_NO_DASH, "a <3 b &amp; c <x> d");
    round_trip("<i>- Good morning.</i>", 0, SRV_CUE_DASH, "Good morning.");
    round_trip("- <i>Good</i> morning.", 0, SRV_CUE_DASH, "Good morning.");
}
END_TEST

/* The head and the tail, and lines joined. */
START_TEST(test_head_tail)
{
    const char *cue = "{\\an8}<v Bob><i>Open the\nwindow <b>now</b></i></v>";
    srv_cue c;
    ck_assert_int_eq(srv_cue_parse(&c, cue, cue + strlen(cue), 1, SRV_CUE_NO_DASH), 1);
    ck_assert_str_eq(c.head, "{\\an8}<v Bob><i>");
    ck_assert_str_eq(c.tail, "</i></v>");
    size_t n;
    ck_assert_str_eq(srv_cue_text(&c, &n), "Open the window now");
    ck_assert(srv_cue_styled(&c));
    srv_cue_free(&c);
    /* a voice left open is the head too */
    const char *v = "<v Roger>We are <i>here</i> now";
    ck_assert_int_eq(srv_cue_parse(&c, v, v + strlen(v), 1, SRV_CUE_NO_DASH), 1);
    ck_assert_str_eq(c.head, "<v Roger>");
    ck_assert_str_eq(c.tail, "");
    srv_cue_free(&c);
    /* markup and spaces alone: nothing for the model */
    const char *none = "<i> </i>{\\an8}";
    ck_assert_int_eq(srv_cue_parse(&c, none, none + strlen(none), 1, SRV_CUE_NO_DASH), 0);
    srv_cue_free(&c);
}
END_TEST

/* Words that change places take their tags with them; a style no word
 * takes is lost and counted. */
START_TEST(test_moved_and_lost)
{
    const char *cue = "<v Ann>The <i>red</i> <b>car</b> stops";
    srv_cue c;
    ck_assert_int_eq(srv_cue_parse(&c, cue, cue + strlen(cue), 1, SRV_CUE_NO_DASH), 1);
    size_t n;
    const char *src = srv_cue_text(&c, &n);
    ck_assert_str_eq(src, "The red car stops");
    const char *tgt = "Das Auto rote stoppt";
    const int perm[] = {0, 2, 1, 3}; /* Auto <- car, rote <- red */
    srv_align *al = word_align(src, tgt, perm);
    int lost = -1;
    char *out = srv_cue_render(&c, tgt, strlen(tgt), al, 1, 1, "\n", &lost);
    ck_assert_str_eq(out, "<v Ann>Das <b>Auto</b> <i>rote</i> stoppt");
    ck_assert_int_eq(lost, 0);
    free(out);
    srv_align_free(al, 1);
    /* both styled words to one target word: one style kept, one lost */
    const char *one = "Das Rotauto stoppt x";
    const int perm2[] = {0, 1, 3, 3};
    srv_align *a2 = word_align(src, one, perm2);
    a2->w[1 * a2->ns + 2] = 0.5f; /* Rotauto <- car, more weakly */
    out = srv_cue_render(&c, one, strlen(one), a2, 1, 1, "\n", &lost);
    ck_assert_int_eq(lost, 1);
    int tags = (strstr(out, "<i>") != NULL) + (strstr(out, "<b>") != NULL);
    ck_assert_msg(tags == 1, "one style kept: %s", out);
    ck_assert_msg(!!strstr(out, "</i>") == !!strstr(out, "<i>") &&
                      !!strstr(out, "</b>") == !!strstr(out, "<b>"),
                  "unbalanced: %s", out);
    free(out);
    srv_align_free(a2, 1);
    srv_cue_free(&c);
}
END_TEST

/* A translation broken over two lines never inside a tag. */
START_TEST(test_lines)
{
    const char *cue = "<c.yellow>One two</c> three four five six";
    srv_cue c;
    ck_assert_int_eq(srv_cue_parse(&c, cue, cue + strlen(cue), 1, SRV_CUE_NO_DASH), 1);
    size_t n;
    char *src = strdup(srv_cue_text(&c, &n));
    srv_align *al = word_align(src, src, NULL);
    int lost;
    char *out = srv_cue_render(&c, src, n, al, 1, 2, "\r\n", &lost);
    ck_assert_str_eq(out, "<c.yellow>One two</c> three\r\nfour five six");
    free(out);
    srv_align_free(al, 1);
    free(src);
    srv_cue_free(&c);
    /* a space in a tag is no place for a line break */
    cue = "<font color=\"a b c d e f g h\">x</font> y z";
    ck_assert_int_eq(srv_cue_parse(&c, cue, cue + strlen(cue), 0, SRV_CUE_NO_DASH), 1);
    src = strdup(srv_cue_text(&c, &n));
    al = word_align(src, src, NULL);
    out = srv_cue_render(&c, src, n, al, 1, 2, "\n", &lost);
    ck_assert_str_eq(out, "<font color=\"a b c d e f g h\">x</font>\ny z");
    free(out);
    srv_align_free(al, 1);
    free(src);
    srv_cue_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuetext");
    TCase *tc = tcase_create("cue");
    tcase_add_test(tc, test_vtt_shapes);
    tcase_add_test(tc, test_srt_shapes);
    tcase_add_test(tc, test_head_tail);
    tcase_add_test(tc, test_moved_and_lost);
    tcase_add_test(tc, test_lines);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
