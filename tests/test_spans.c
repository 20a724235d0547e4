/*
 * test_spans.c - inline formatting carried by attention
 * (server/service/spans.c), with scripted alignments: a token a word, each
 * target word attending to the source words it is told to.
 *   - a bold word follows its aligned word, wherever the order puts it;
 *     a word linked both ways wins over one linked one way;
 *   - a span whose source is one run stays one run in the target, the
 *     spaces inside it with it, the spaces around it plain; never more
 *     runs of a style in the target than in the source (no duplicated
 *     link); the text's leading and trailing spaces plain;
 *   - a style no target word took goes the other way (its source word's
 *     strongest target word); one that finds nothing, or whose word a
 *     later style takes by a stronger link, is counted lost;
 *   - objects go before the target word of the source word after them
 *     (after the word before them when they touched it), at the start or
 *     the end when they were there, in their order, a space after one
 *     where the source had it;
 *   - a styled run's last full stop or comma is not styled, one inside it
 *     is ("DocBook: The Definitive Guide" stays one link); the space
 *     between two styles is the one of them the source gave it;
 *   - a segment's plain style, named, is the base: a word linked one way
 *     only stays plain rather than taking the link of most bytes;
 *   - the pieces cover the target exactly, in order;
 *   - several sentences (blocks), each aligned within itself.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spans.h"

typedef struct wd {
    size_t a, b;
} wd;

static int words(const char *t, wd *w)
{
    int n = 0;
    for (size_t i = 0; t[i];) {
        if (t[i] == ' ') {
            i++;
            continue;
        }
        size_t a = i;
        while (t[i] && t[i] != ' ')
            i++;
        w[n++] = (wd){a, i};
    }
    return n;
}

/* One block: a token a word; link[t] the source word target word t
 * attends to (weight 0.7, the rest spread evenly), -1: evenly. */
static srv_align block(const char *src, const char *tgt, const int *link)
{
    wd s[64], t[64];
    int ns = words(src, s), nt = words(tgt, t);
    srv_align a = {nt, ns, malloc(2 * (size_t)nt * sizeof(size_t)),
                   malloc(2 * (size_t)ns * sizeof(size_t)), malloc((size_t)(nt * ns) * sizeof(float))};
    for (int i = 0; i < nt; i++) {
        /* a piece's space is before it, as SentencePiece gives them */
        a.t_off[2 * i] = i ? t[i - 1].b : 0;
        a.t_off[2 * i + 1] = t[i].b;
        for (int j = 0; j < ns; j++)
            a.w[i * ns + j] = link[i] < 0 ? 1.0f / (float)ns
                              : j == link[i] ? 0.7f
                                             : 0.3f / (float)(ns > 1 ? ns - 1 : 1);
    }
    for (int j = 0; j < ns; j++) {
        a.s_off[2 * j] = j ? s[j - 1].b : 0;
        a.s_off[2 * j + 1] = s[j].b;
    }
    return a;
}

/* The target with each piece's style written as [style:text] and objects
 * as <id>; checks the pieces cover the target in order. */
static char *show(const char *tgt, const srv_span *o, int n)
{
    static char buf[1024];
    size_t at = 0, w = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_uint_eq(o[i].a, at);
        if (o[i].obj) {
            ck_assert_uint_eq(o[i].a, o[i].b);
            w += (size_t)snprintf(buf + w, sizeof buf - w, "<%d>", o[i].style);
            continue;
        }
        ck_assert_uint_gt(o[i].b, o[i].a);
        w += (size_t)snprintf(buf + w, sizeof buf - w, "[%d:%.*s]", o[i].style,
                              (int)(o[i].b - o[i].a), tgt + o[i].a);
        at = o[i].b;
    }
    ck_assert_uint_eq(at, strlen(tgt));
    return buf;
}

/* Maps src's pieces onto tgt by the blocks al (n_al, taken) and checks
 * the pieces (as show writes them) and the styles lost. */
static void check_map(const char *src, const srv_span *in, int n_in, const char *tgt,
                      srv_align *al, int n_al, const char *want, int want_lost)
{
    srv_span *o;
    int n, lost;
    char *txt;
    ck_assert_int_eq(srv_spans_map(src, strlen(src), in, n_in, tgt, strlen(tgt), al, n_al, &o, &n,
                                   &txt, &lost),
                     0);
    ck_assert_str_eq(show(txt, o, n), want);
    ck_assert_int_eq(lost, want_lost);
    free(o);
    free(txt);
    srv_align_free(al, n_al);
}

/* One block, a token a word (block). */
static srv_align *one_block(const char *src, const char *tgt, const int *link)
{
    srv_align *al = malloc(sizeof *al);
    al[0] = block(src, tgt, link);
    return al;
}

static void map1(const char *src, const srv_span *in, int n_in, const char *tgt, const int *link,
                 const char *want, int want_lost)
{
    check_map(src, in, n_in, tgt, one_block(src, tgt, link), 1, want, want_lost);
}

START_TEST(test_bold_word)
{
    const char *src = "Save the file before closing.";
    /* "Save the " plain, "file" bold (1), " before closing." plain */
    const srv_span in[] = {{0, 9, 0, 0}, {9, 13, 1, 0}, {13, 29, 0, 0}};
    const char *tgt = "Speichern Sie die Datei vor dem Schließen.";
    const int link[] = {0, 0, 1, 2, 3, 4, 4};
    map1(src, in, 3, tgt, link, "[0:Speichern Sie die ][1:Datei][0: vor dem Schließen.]", 0);
    /* the word order changed: the bold word moves with its word */
    const char *tgt2 = "Die Datei vor dem Schließen speichern.";
    const int link2[] = {1, 2, 3, 4, 4, 0};
    map1(src, in, 3, tgt2, link2, "[0:Die ][1:Datei][0: vor dem Schließen speichern.]", 0);
    /* "den" links to "Open" one way only; "Öffnen" both ways wins */
    const char *src3 = "Click the Open button";
    const srv_span in3[] = {{0, 10, 0, 0}, {10, 14, 1, 0}, {14, 21, 0, 0}};
    const char *tgt3 = "Klicken Sie auf den Knopf Öffnen";
    const int link3[] = {0, 0, 0, 2, 3, 2};
    srv_align *al = one_block(src3, tgt3, link3);
    al[0].w[5 * 4 + 2] = 0.8f;
    check_map(src3, in3, 3, tgt3, al, 1, "[0:Klicken Sie auf den Knopf ][1:Öffnen]", 0);
}
END_TEST

START_TEST(test_runs)
{
    /* "Please click the Open button now": "the Open button" a link (2) */
    const char *src = "Please click the Open button now";
    const srv_span in[] = {{0, 13, 0, 0}, {13, 28, 2, 0}, {28, 32, 0, 0}};
    const char *tgt = "Bitte klicken Sie jetzt auf den Knopf Öffnen";
    /* "den" attends to nothing in particular: the run is closed over it */
    const int link[] = {0, 1, 1, 5, 2, -1, 4, 3};
    map1(src, in, 3, tgt, link, "[0:Bitte klicken Sie jetzt ][2:auf den Knopf Öffnen]", 0);
    /* a run too spread out is not closed: "Bitte ... z" stays plain; and
     * the one link of the source is one link of the target, never two:
     * "den" and "Öffnen" both linked both ways, one word each, the first
     * kept (a texinfo line got a duplicate link so) */
    const char *tgt3 = "den Bitte klicken Sie jetzt x y z Öffnen";
    const int link3[] = {2, 0, 1, 1, 5, 0, 0, 0, 3};
    map1(src, in, 3, tgt3, link3, "[2:den][0: Bitte klicken Sie jetzt x y z Öffnen]", 0);
    /* two runs of a style in the source ("click", "Open") may be two in
     * the target */
    const srv_span in4[] = {{0, 7, 0, 0}, {7, 12, 2, 0}, {12, 17, 0, 0}, {17, 21, 2, 0},
                            {21, 32, 0, 0}};
    map1(src, in4, 5, tgt3, link3, "[0:den Bitte ][2:klicken][0: Sie jetzt x y z ][2:Öffnen]", 0);
    /* the spaces before the first word and after the last are plain: a
     * styled last word does not take them (a Markdown link around a space,
     * "[ ](CHANGELOG.md)", came so) */
    const char *src5 = "Open file";
    const srv_span in5[] = {{0, 5, 0, 0}, {5, 9, 1, 0}};
    const int link5[] = {0, 1};
    map1(src5, in5, 2, "Öffnen Datei ", link5, "[0:Öffnen ][1:Datei][0: ]", 0);
    /* the whole paragraph in one style */
    const srv_span all[] = {{0, 32, 5, 0}};
    map1(src, all, 1, tgt, link, "[5:Bitte klicken Sie jetzt auf den Knopf Öffnen]", 0);
}
END_TEST

START_TEST(test_fallback_and_lost)
{
    const char *src = "Save the file before closing.";
    const srv_span in[] = {{0, 9, 0, 0}, {9, 13, 1, 0}, {13, 29, 0, 0}};
    /* no target word takes "file" first, but "Datei" is the word "file"
     * weighs most with: weights 0.7 from "Datei" to "the" put "Datei" on
     * "the", and "file" gets "Datei" the other way */
    const char *tgt = "Speichern Sie die Datei vor dem Schließen.";
    const int link[] = {0, 0, 1, 1, 3, 4, 4};
    srv_align *al = one_block(src, tgt, link);
    /* "Datei" pays "file" more than any other target word does */
    al[0].w[3 * 5 + 2] = 0.29f;
    al[0].w[0 * 5 + 2] = 0.01f;
    al[0].w[1 * 5 + 2] = 0.01f;
    al[0].w[2 * 5 + 2] = 0.01f;
    check_map(src, in, 3, tgt, al, 1, "[0:Speichern Sie die ][1:Datei][0: vor dem Schließen.]", 0);
    /* "file manager" -> "Dateiverwaltung": bold takes the word the other
     * way, italic then takes it both ways; bold is lost */
    const char *src2 = "Open the file manager now.";
    const srv_span in2[] = {{0, 9, 0, 0}, {9, 13, 1, 0}, {13, 14, 0, 0}, {14, 21, 2, 0},
                            {21, 26, 0, 0}};
    const char *tgt2 = "Öffnen Sie nun die Dateiverwaltung.";
    const int link2[] = {0, 0, 4, 1, 3};
    al = one_block(src2, tgt2, link2);
    al[0].w[4 * 5 + 2] = 0.2f;
    check_map(src2, in2, 5, tgt2, al, 1, "[0:Öffnen Sie nun die ][2:Dateiverwaltung][0:.]", 1);
    /* no alignment at all: the style is lost, everything plain */
    check_map(src, in, 3, tgt, NULL, 0, "[0:Speichern Sie die Datei vor dem Schließen.]", 1);
}
END_TEST

START_TEST(test_objects)
{
    /* <7>Save the file<8> before closing.<9> */
    const char *src = "Save the file before closing.";
    const srv_span in[] = {{0, 0, 7, 1},   {0, 13, 0, 0},  {13, 13, 8, 1},
                           {13, 29, 0, 0}, {29, 29, 9, 1}};
    const char *tgt = "Speichern Sie die Datei vor dem Schließen.";
    const int link[] = {0, 0, 1, 2, 3, 4, 4};
    /* <8> touched "file": it goes after "Datei", before the space */
    map1(src, in, 5, tgt, link, "<7>[0:Speichern Sie die Datei]<8>[0: vor dem Schließen.]<9>", 0);
    /* "before"'s word earlier than an earlier object's: never reordered */
    const srv_span in2[] = {{0, 5, 0, 0}, {5, 5, 3, 1}, {5, 13, 0, 0}, {13, 13, 4, 1},
                            {13, 29, 0, 0}};
    const int link2[] = {0, 3, 1, 2, 3, 4, 4};
    /* <3> before "the"'s word "die"; <4> (touching "file") after "Sie",
     * the word linked with "before", which is before "die": <4> follows
     * <3>, and a space follows <4> as it did in the source */
    map1(src, in2, 5, tgt, link2, "[0:Speichern Sie ]<3><4>[0: die Datei vor dem Schließen.]", 0);
}
END_TEST

START_TEST(test_blocks)
{
    /* two sentences, each its own block with offsets into the paragraph */
    const char *src = "Open it. Save the file.";
    const srv_span in[] = {{0, 18, 0, 0}, {18, 22, 1, 0}, {22, 23, 0, 0}};
    const char *tgt = "Öffne es. Speichere die Datei.";
    srv_align *al = malloc(2 * sizeof *al);
    const int l1[] = {0, 1};
    al[0] = block("Open it.", "Öffne es.", l1);
    const int l2[] = {0, 1, 2};
    al[1] = block("Save the file.", "Speichere die Datei.", l2);
    for (int i = 0; i < 2 * al[1].ns; i++)
        al[1].s_off[i] += 8;
    for (int i = 0; i < 2 * al[1].nt; i++)
        al[1].t_off[i] += 9;
    check_map(src, in, 3, tgt, al, 2, "[0:Öffne es. Speichere die ][1:Datei][0:.]", 0);
}
END_TEST

/* [a, b) of src: the bytes of its first occurrence of piece. */
static srv_span piece_of(const char *src, const char *piece, int style)
{
    const char *at = strstr(src, piece);
    ck_assert_ptr_nonnull(at);
    return (srv_span){(size_t)(at - src), (size_t)(at - src) + strlen(piece), style, 0};
}

/* One element stays one: the punctuation inside a styled run stays in it
 * (only a run's edges give theirs to the base), and the space between two
 * styles is the style the source's space between them had. */
START_TEST(test_one_element)
{
    const char *src = "Please see DocBook: The Guide now and then.";
    const srv_span in[] = {{0, 11, 0, 0}, piece_of(src, "DocBook: The Guide", 1),
                           piece_of(src, " now and then.", 0)};
    const int link[] = {0, 1, 2, 3, 4, 5, 6, 7};
    map1(src, in, 3, "Bitte siehe DocBook: Die Anleitung, jetzt und dann.", link,
         "[0:Bitte siehe ][1:DocBook: Die Anleitung][0:, jetzt und dann.]", 0);
    /* libffi's "<span>Data type: </span><span><strong>ffi_type</strong><a>
     * ¶</a></span>": the space before the pilcrow is the link's */
    const char *src2 = "Data type: ffi_type \xc2\xb6";
    const srv_span in2[] = {{0, 11, 0, 0}, {11, 19, 1, 0}, {19, 22, 2, 0}};
    const int link2[] = {0, 1, 2, 3};
    map1(src2, in2, 3, "Daten typ: ffi_type \xc2\xb6", link2,
         "[0:Daten typ: ][1:ffi_type][2: \xc2\xb6]", 0);
}
END_TEST

/* A segment whose caller names its plain style (srv_seg's plain): that is
 * the base even with fewer bytes than a link, so a word attention links
 * one way only ("zum") stays plain instead of taking the link, which
 * would be a link in two places. */
START_TEST(test_plain_base)
{
    const char *text[] = {"Yes for example ", "xmlwrapp", ", see ", "the related pages about bindings"};
    const int id[] = {0, 1, 0, 3};
    srv_seg sg;
    ck_assert_int_eq(srv_seg_make(&sg, text, id, 4), 1);
    ck_assert_int_eq(sg.plain, -1);
    const char *tgt = "Ja, zum Beispiel xmlwrapp, siehe die entsprechenden Seiten \xc3\xbc" "ber Bindungen";
    const int link[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int plain = -1; plain <= 0; plain++) {
        srv_align *al = one_block(sg.src, tgt, link);
        al[0].w[2 * 10 + 1] = 0.75f; /* "Beispiel" pays "for" more than "zum" does */
        al[0].w[2 * 10 + 2] = 0.8f;
        sg.plain = plain;
        int lost = -1;
        ck_assert_int_eq(srv_seg_set(&sg, tgt, al, 1, &lost), 0);
        srv_align_free(al, 1);
        ck_assert_int_eq(lost, 0);
        const char *got = show(sg.tgt, sg.out, sg.n_out);
        if (plain < 0) { /* the link of most bytes the base: in more places than one */
            const char *first = strstr(got, "[3:");
            ck_assert_msg(first && strstr(first + 1, "[3:"), "%s", got);
            continue;
        }
        ck_assert_str_eq(got, "[0:Ja, zum Beispiel ][1:xmlwrapp][0:, siehe ]"
                              "[3:die entsprechenden Seiten \xc3\xbc" "ber Bindungen]");
    }
    srv_seg_free(&sg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spans");
    TCase *tc = tcase_create("spans");
    tcase_add_test(tc, test_bold_word);
    tcase_add_test(tc, test_runs);
    tcase_add_test(tc, test_fallback_and_lost);
    tcase_add_test(tc, test_objects);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_one_element);
    tcase_add_test(tc, test_plain_base);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
