/*
 * state.c - readiness (state.h); a model's device failure is models.c's.
 *
 * Readiness reads atomics and walks the model set under its lock (held
 * only for pointer work, never across a load), so probes never wait on a
 * model; the failed state of a model is written once, by whichever thread reports the
 * first device error, and read by every thread after its flag is seen.
 */

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
