/*
 * admin.h - the model administration API (docs/api.md, "Models"): GET
 * /v1/models, a run-time load (POST /v1/models), an unload (DELETE
 * /v1/models/NAME) and a reload (POST /v1/models/NAME/reload), the last two
 * handed to the model manager (models.h) while the call waits suspended.
 */
#ifndef SRV_ADMIN_H
#define SRV_ADMIN_H

#include <jansson.h>

#include "request.h"

/* The model administration's rows into out (up to max); returns how many there are. */
int srv_admin_routes(srv_route *out, int max);

/* One model as GET /v1/models lists it (also in a load's and a reload's
 * answer); NULL when out of memory. */
json_t *srv_admin_model_json(const srv_server *s, const srv_model *sm);

#endif /* SRV_ADMIN_H */
