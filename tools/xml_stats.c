/*
 * tools/xml_stats.c - what the XML readers' bounds (server/service/
 * xmllimits.h) count in real files, to choose and check the limits:
 * for each FILE (XML or HTML, or a zip archive: each of its .xml, .xhtml,
 * .html entries) its bytes, the deflate ratio (an entry's), the nodes and
 * the most attributes on one element as srv_xml_scan counts them (HTML:
 * as html.c's check replays its parser), and its text bytes.
 *
 *   cc -O2 -Iserver/service tools/xml_stats.c server/service/xmllimits.c \
 *      $(pkg-config --cflags --libs libxml-2.0 libzip) -o /tmp/xml_stats
 *   /tmp/xml_stats /usr/share/doc/nodejs/api/all.html some.docx ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <zip.h>

#include "xmllimits.h"

static size_t text_of(xmlNodePtr n)
{
    size_t t = 0;
    for (; n; n = n->next) {
        if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content)
            t += strlen((const char *)n->content);
        else if (n->type == XML_ELEMENT_NODE)
            t += text_of(n->children);
    }
    return t;
}

static void one(const char *name, const char *b, size_t n, double ratio)
{
    size_t l = strlen(name);
    int html = l > 5 && (!strcasecmp(name + l - 5, ".html") || !strcasecmp(name + l - 4, ".htm"));
    size_t nodes = 0;
    char err[256] = "";
    srv_xml_stats st;
    srv_xml_scan(b, n, &st);
    if (html) { /* the HTML count: through the check, limits aside */
        srv_xml_check(b, n, 1, name, &nodes, err, sizeof err);
        st.nodes = nodes;
    }
    xmlDocPtr doc = html ? htmlReadMemory(b, (int)n, NULL, "UTF-8",
                                          HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET)
                         : xmlReadMemory(b, (int)n, NULL, "UTF-8",
                                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    size_t text = doc ? text_of(xmlDocGetRootElement(doc)) : 0;
    xmlFreeDoc(doc);
    printf("%-60s %10zu B  ratio %5.1f  nodes %8zu  max attrs %3zu  text %9zu B%s%s\n", name, n,
           ratio, st.nodes, html ? (size_t)0 : st.max_attrs, text, err[0] ? "  " : "", err);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int ze;
        zip_t *z = zip_open(argv[i], ZIP_RDONLY, &ze);
        if (z) {
            for (zip_int64_t k = 0; k < zip_get_num_entries(z, 0); k++) {
                zip_stat_t st;
                zip_stat_index(z, (zip_uint64_t)k, 0, &st);
                size_t l = strlen(st.name);
                if (!(l > 4 && (!strcasecmp(st.name + l - 4, ".xml") ||
                                !strcasecmp(st.name + l - 6, ".xhtml") ||
                                !strcasecmp(st.name + l - 5, ".html"))))
                    continue;
                char *b = malloc(st.size + 1);
                zip_file_t *f = zip_fopen_index(z, (zip_uint64_t)k, 0);
                zip_int64_t got = f ? zip_fread(f, b, st.size) : -1;
                zip_fclose(f);
                char nm[512];
                snprintf(nm, sizeof nm, "%s:%s", argv[i], st.name);
                if (got == (zip_int64_t)st.size)
                    one(nm, b, st.size, st.comp_size ? (double)st.size / st.comp_size : 0);
                free(b);
            }
            zip_close(z);
            continue;
        }
        FILE *f = fopen(argv[i], "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        rewind(f);
        char *b = malloc((size_t)n + 1);
        if (fread(b, 1, (size_t)n, f) == (size_t)n)
            one(argv[i], b, (size_t)n, 0);
        fclose(f);
        free(b);
    }
    return 0;
}
