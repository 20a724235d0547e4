/*
 * po_helper.h - `transformerd po-helper`: gettext catalogues read and
 * written by libgettextpo for the daemon, in a process of their own
 * (po_helper.c; server/service/po.c runs it).
 */
#ifndef PO_HELPER_H
#define PO_HELPER_H

/* The arguments after "po-helper"; 0, 2 (usage) or 3 (the catalogue
 * refused, libgettextpo's message on stderr). */
int cli_po_helper(int argc, char **argv);

#endif
