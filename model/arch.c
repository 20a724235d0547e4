/*
 * arch.c - the table of architectures (arch.h): one row a model_type.
 */
#include <stdio.h>
#include <string.h>

#include "arch.h"

extern const td_arch td_arch_marian;
extern const td_arch td_arch_m2m100;
extern const td_arch td_arch_ct2; /* arch_ct2.c: described by model.bin (ct2_config.c) */

static const td_arch *const k_archs[] = {
    &td_arch_marian,
    &td_arch_m2m100,
    &td_arch_ct2,
};

#define N_ARCHS ((int)(sizeof k_archs / sizeof k_archs[0]))

const td_arch *td_arch_find(const char *model_type)
{
    for (int i = 0; i < N_ARCHS; i++)
        if (strcmp(k_archs[i]->model_type, model_type) == 0)
            return k_archs[i];
    return NULL;
}

const td_arch_defaults *td_arch_defaults_of(const td_arch *a)
{
    return a->defaults.activation ? &a->defaults : &td_arch_marian.defaults;
}

const char *td_arch_known(char *out, size_t n)
{
    size_t off = 0;
    if (n)
        out[0] = 0;
    for (int i = 0; i < N_ARCHS && off < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%s", i ? ", " : "", k_archs[i]->model_type);
    return out;
}

const char *td_role_name(td_role r)
{
    static const char *const names[] = {
#define TD_ROLE_STR(x) #x,
        TD_MODEL_ROLES(TD_ROLE_STR) TD_LAYER_ROLES(TD_ROLE_STR)
#undef TD_ROLE_STR
    };
    return (int)r >= 0 && r < TD_R_COUNT ? names[r] : "?";
}
