/*
 * prom.c - see prom.h.
 */
#include "prom.h"

#include <stdlib.h>
#include <string.h>

double prom_sum(const char *text, const char *name, const char *label)
{
    size_t nl = strlen(name);
    double sum = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        if (!strncmp(p, name, nl) && (p[nl] == ' ' || p[nl] == '{')) {
            const char *v = NULL;
            if (p[nl] == ' ') {
                v = label ? NULL : p + nl;
            } else {
                const char *close = strchr(p + nl, '}');
                if (close && (!eol || close < eol)) {
                    size_t ll = label ? strlen(label) : 0;
                    int has = !label;
                    for (const char *q = p + nl + 1; !has && q + ll <= close; q++)
                        has = !strncmp(q, label, ll);
                    v = has ? close + 1 : NULL;
                }
            }
            if (v)
                sum += atof(v);
        }
        p = eol ? eol + 1 : NULL;
    }
    return sum;
}
