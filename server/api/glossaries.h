/*
 * glossaries.h - the glossary routes (DeepL's /v2/glossaries, /v3/glossaries
 * and /v2/glossary-language-pairs), shared by every dialect: a
 * translation names a glossary by its id (translate.h,
 * srv_api_use_glossary).
 */
#ifndef SRV_GLOSSARIES_H
#define SRV_GLOSSARIES_H

#include "request.h"

/* The rows (routes.c's list): n, as srv_routes_copy. */
int srv_glossary_routes(srv_route *out, int max);

#endif
