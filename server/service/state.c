/*
 * state.c - readiness and the device-failed policy (state.h).
 *
 * Readiness reads atomics and walks the model set under its lock (held
 * only for pointer work, never across a load), so probes never wait on a
 * model; the failed state of a model is written once, by whichever thread reports the
 * first device error, and read by every thread after its flag is seen.
 */
#include <stdio.h>

#include "models.h"
#include "state.h"

srv_readiness srv_server_readiness(const srv_server *s, char *why, size_t why_len)
{
    if (atomic_load(&s->draining))
        return SRV_NOT_READY_DRAINING;
    if (!atomic_load(&s->ready))
        return SRV_NOT_READY_LOADING;
    /* the model set's lock, held for a walk of its list (never across a
     * load): every serving model counts */
    if (srv_models_failed(s->models, why, why_len))
        return SRV_NOT_READY_DEVICE;
    return SRV_READY;
}

void srv_model_engine_error(srv_model *sm, int engine_rc, const char *msg)
{
    /* Requests are validated against the worker's limits before they are
     * queued, so an engine failure is host memory (TD_EINVAL: that batch
     * fails, nothing else) or the device (TD_EDEVICE). */
    if (engine_rc != TD_EDEVICE)
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&sm->failed_claim, &expected, 1))
        return;
    snprintf(sm->failed_msg, sizeof sm->failed_msg, "%s", msg ? msg : "");
    atomic_store(&sm->failed, 1);
    srv_metrics_model_ready(sm->metrics, 0);
    if (sm->b)
        srv_batcher_halt(sm->b, TD_EDEVICE, sm->failed_msg);
    fprintf(stderr, "transformerd: model %s: device error, readiness is now 503: %s\n", sm->name,
            sm->failed_msg);
}

const char *srv_model_failed(const srv_model *sm)
{
    return atomic_load(&sm->failed) ? sm->failed_msg : NULL;
}
