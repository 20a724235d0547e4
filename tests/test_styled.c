/*
 * test_styled.c - a document's paragraphs as styled pieces
 * (server/service/styled.c), through a toy format of its own: a node is a
 * name (an element) or a text, the written paragraph printed as
 * "<b>text</b>". The expected values are worked out by hand from
 * styled.h's contract.
 *   - styles: a text piece takes the first text piece of its formatting
 *     (by the format's callback, or by the same chain of elements);
 *   - segments: cut at separators, only those with a letter kept, each
 *     its pieces' range; the bound on their number; the base style of a
 *     segment, the text outside any element when asked;
 *   - writing: a paragraph with no translated segment is not to be
 *     written; pieces not translated as they were, a translated segment
 *     as its translation, separators moved back; consecutive pieces of one
 *     chain share its copies; with `once`, an element closed is never
 *     opened again.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "styled.h"

typedef struct tnode {
    const char *name; /* NULL: a text */
    char text[64];
    struct tnode *parent;
    struct tnode *kid[16];
    int nk;
} tnode;

static tnode g_pool[128];
static int g_n;

static tnode *node(const char *name, const char *text)
{
    ck_assert_int_lt(g_n, 128);
    tnode *n = &g_pool[g_n++];
    memset(n, 0, sizeof *n);
    n->name = name;
    if (text)
        snprintf(n->text, sizeof n->text, "%s", text);
    return n;
}

static void append(tnode *parent, tnode *c)
{
    if (c->parent) { /* unlinked first */
        tnode *p = c->parent;
        int j = 0;
        for (int i = 0; i < p->nk; i++)
            if (p->kid[i] != c)
                p->kid[j++] = p->kid[i];
        p->nk = j;
    }
    ck_assert_int_lt(parent->nk, 16);
    parent->kid[parent->nk++] = c;
    c->parent = parent;
}

static void print(const tnode *n, char *out, size_t cap)
{
    size_t at = strlen(out);
    if (!n->name) {
        snprintf(out + at, cap - at, "%s", n->text);
        return;
    }
    if (!n->nk) {
        snprintf(out + at, cap - at, "<%s/>", n->name);
        return;
    }
    snprintf(out + at, cap - at, "<%s>", n->name);
    for (int i = 0; i < n->nk; i++)
        print(n->kid[i], out, cap);
    at = strlen(out);
    snprintf(out + at, cap - at, "</%s>", n->name);
}

/* srv_styled_out's callbacks; ctx counts the elements opened */
static void *t_open(void *ctx, void *parent, void *e)
{
    tnode *c = node(((tnode *)e)->name, NULL);
    append(parent, c);
    ++*(int *)ctx;
    return c;
}

static int t_text(void *ctx, void *parent, const srv_piece *pc, const char *t, size_t n)
{
    char buf[64];
    (void)ctx;
    (void)pc;
    snprintf(buf, sizeof buf, "%.*s", (int)n, t);
    append(parent, node(NULL, buf));
    return 0;
}

static int t_move(void *ctx, void *parent, const srv_piece *pc)
{
    (void)ctx;
    append(parent, pc->node);
    return 0;
}

/* Writes pieces p of paragraph para (segments d) into a new root; the
 * printed paragraph in out, the elements opened in *opens. */
static void write_para(const srv_styled *d, int para, const srv_pieces *p, int once, char *out,
                  size_t cap, int *opens)
{
    tnode *root = node("p", NULL);
    *opens = 0;
    srv_styled_out o = {.root = root, .once = once, .open = t_open, .text = t_text,
                        .move = t_move, .ctx = opens};
    ck_assert_int_eq(srv_styled_write(d, para, p, &o), 0);
    out[0] = 0;
    for (int i = 0; i < root->nk; i++)
        print(root->kid[i], out, cap);
}

static void add(srv_pieces *p, int kind, tnode *n, const char *text, tnode *c0, tnode *c1)
{
    void *chain[2] = {c0, c1};
    ck_assert_int_eq(srv_pieces_add(p, kind, n, text, chain, c1 ? 2 : c0 ? 1 : 0), 0);
}

static int same_name(const srv_pieces *p, int j, int k, void *ctx)
{
    const srv_piece *x = &p->pc[j], *y = &p->pc[k];
    (void)ctx;
    if (x->depth != y->depth)
        return 0;
    for (int d = 0; d < x->depth; d++)
        if (strcmp(((tnode *)x->chain[d])->name, ((tnode *)y->chain[d])->name))
            return 0;
    return 1;
}

START_TEST(test_styles)
{
    g_n = 0;
    tnode *b1 = node("b", NULL), *b2 = node("b", NULL), *img = node("img", NULL);
    srv_pieces p = {0};
    add(&p, SRV_PIECE_TEXT, NULL, "Save the ", NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "file", b1, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, " or ", NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "folder", b2, NULL);
    add(&p, SRV_PIECE_OBJECT, img, NULL, NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "now", b1, NULL);
    ck_assert_str_eq(p.pc[1].text, "file");
    ck_assert_ptr_eq(p.pc[5].chain[0], b1);
    /* by the chain of elements: b1 and b2 are two */
    srv_pieces_style(&p, NULL, NULL);
    const int by_chain[] = {0, 1, 0, 3, 4, 1};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(p.pc[k].style, by_chain[k]);
    /* by the format's look (the elements' names): one */
    srv_pieces_style(&p, same_name, NULL);
    const int by_look[] = {0, 1, 0, 1, 4, 1};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(p.pc[k].style, by_look[k]);
    srv_pieces_free(&p);
    ck_assert_int_eq(p.n, 0);
}
END_TEST

START_TEST(test_segments)
{
    g_n = 0;
    tnode *br1 = node("br", NULL), *br2 = node("br", NULL);
    srv_pieces p = {0}, q = {0};
    add(&p, SRV_PIECE_TEXT, NULL, "One.", NULL, NULL);
    add(&p, SRV_PIECE_SEP, br1, NULL, NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "  ", NULL, NULL);
    add(&p, SRV_PIECE_SEP, br2, NULL, NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "Two.", NULL, NULL);
    srv_pieces_style(&p, NULL, NULL);
    add(&q, SRV_PIECE_TEXT, NULL, "Three", NULL, NULL);
    srv_pieces_style(&q, NULL, NULL);
    srv_styled d = {0};
    ck_assert_int_eq(srv_styled_cut(&d, 0, &p, 0), 2); /* "  " has no letter */
    ck_assert_int_eq(srv_styled_cut(&d, 1, &q, 0), 1);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.sg[0].para, 0);
    ck_assert_int_eq(d.sg[0].p0, 0);
    ck_assert_int_eq(d.sg[0].p1, 1);
    ck_assert_int_eq(d.sg[1].p0, 4);
    ck_assert_int_eq(d.sg[1].p1, 5);
    ck_assert_int_eq(d.sg[2].para, 1);
    ck_assert_str_eq(srv_styled_source(&d, 0), "One.");
    ck_assert_str_eq(srv_styled_source(&d, 1), "Two.");
    ck_assert_str_eq(srv_styled_source(&d, 2), "Three");
    ck_assert_int_eq(srv_styled_styled(&d, 0), 0);
    ck_assert(!srv_styled_translated(&d, 0) && !srv_styled_translated(&d, 1));
    int lost = -1;
    ck_assert_int_eq(srv_styled_set(&d, 2, "Drei", NULL, 0, &lost), 0);
    ck_assert_int_eq(lost, 0);
    ck_assert(!srv_styled_translated(&d, 0) && srv_styled_translated(&d, 1));
    srv_styled_free(&d);
    ck_assert_int_eq(d.n, 0);
    /* the bound: the second segment refused, the first kept */
    srv_styled b = {.max = 1};
    ck_assert_int_eq(srv_styled_cut(&b, 0, &p, 0), -2);
    ck_assert_int_eq(b.n, 1);
    srv_styled_free(&b);
    srv_pieces_free(&p);
    srv_pieces_free(&q);
}
END_TEST

/* A segment's base: the text outside any element when asked, else the
 * style of most bytes (srv_seg_make's -1). */
START_TEST(test_plain_outside)
{
    g_n = 0;
    tnode *a = node("a", NULL);
    srv_pieces p = {0}, q = {0};
    add(&p, SRV_PIECE_TEXT, NULL, "see ", NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "the manual pages", a, NULL);
    srv_pieces_style(&p, NULL, NULL);
    add(&q, SRV_PIECE_TEXT, NULL, "the manual pages", a, NULL);
    srv_pieces_style(&q, NULL, NULL);
    srv_styled d = {0};
    ck_assert_int_eq(srv_styled_cut(&d, 0, &p, 1), 1);
    ck_assert_int_eq(srv_styled_cut(&d, 1, &p, 0), 1);
    ck_assert_int_eq(srv_styled_cut(&d, 2, &q, 1), 1);
    ck_assert_int_eq(d.sg[0].s.plain, 0);
    ck_assert_int_eq(d.sg[1].s.plain, -1);
    ck_assert_int_eq(d.sg[2].s.plain, -1); /* no text outside */
    srv_styled_free(&d);
    srv_pieces_free(&p);
    srv_pieces_free(&q);
}
END_TEST

START_TEST(test_write)
{
    g_n = 0;
    tnode *old = node("p", NULL), *br = node("br", NULL), *b = node("b", NULL);
    append(old, br);
    srv_pieces p = {0};
    add(&p, SRV_PIECE_TEXT, NULL, "One.", NULL, NULL);
    add(&p, SRV_PIECE_SEP, br, NULL, NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "Two ", NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "words", b, NULL);
    srv_pieces_style(&p, NULL, NULL);
    srv_styled d = {0};
    ck_assert_int_eq(srv_styled_cut(&d, 0, &p, 0), 2);
    ck_assert_int_eq(srv_styled_styled(&d, 1), 1);
    int lost = 0, opens = 0;
    ck_assert_int_eq(srv_styled_set(&d, 0, "Eins.", NULL, 0, &lost), 0);
    char out[256];
    write_para(&d, 0, &p, 0, out, sizeof out, &opens);
    ck_assert_str_eq(out, "Eins.<br/>Two <b>words</b>");
    ck_assert_int_eq(opens, 1);
    ck_assert_int_eq(old->nk, 0); /* the separator moved */
    srv_styled_free(&d);
    srv_pieces_free(&p);
}
END_TEST

/* Consecutive pieces of one chain share its copies; with once, an element
 * closed is left out of a later piece's chain. */
START_TEST(test_once)
{
    g_n = 0;
    tnode *x = node("x", NULL), *y = node("y", NULL);
    srv_pieces p = {0};
    add(&p, SRV_PIECE_TEXT, NULL, "a", x, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "b", NULL, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "c", x, NULL);
    add(&p, SRV_PIECE_TEXT, NULL, "d", x, y);
    srv_styled d = {0};
    char out[256];
    int opens = 0;
    write_para(&d, 0, &p, 0, out, sizeof out, &opens);
    ck_assert_str_eq(out, "<x>a</x>b<x>c<y>d</y></x>");
    ck_assert_int_eq(opens, 3);
    write_para(&d, 0, &p, 1, out, sizeof out, &opens);
    ck_assert_str_eq(out, "<x>a</x>bc<y>d</y>");
    ck_assert_int_eq(opens, 2);
    srv_pieces_free(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("styled");
    TCase *tc = tcase_create("styled");
    tcase_add_test(tc, test_styles);
    tcase_add_test(tc, test_segments);
    tcase_add_test(tc, test_plain_outside);
    tcase_add_test(tc, test_write);
    tcase_add_test(tc, test_once);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
