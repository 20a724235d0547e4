/*
 * activation.h - the activation functions, written once for the CPU and the
 * GPU backends (the GPU op is checked against the CPU op, so they must be
 * the same formulas). C11 and CUDA: under nvcc the function is also a
 * __device__ function.
 */
#ifndef TD_ACTIVATION_H
#define TD_ACTIVATION_H

#include <math.h>

/* The activation of the feed-forward blocks (config.json's
 * activation_function). Here rather than in backend.h so that config.h can
 * name it without the op table. */
typedef enum td_activation {
    TD_ACT_NONE = 0,
    TD_ACT_RELU,
    TD_ACT_GELU,      /* exact erf form (torch.nn.functional.gelu) */
    TD_ACT_GELU_NEW,  /* tanh approximation (transformers' NewGELUActivation) */
    TD_ACT_SILU,      /* x * sigmoid(x); transformers' "swish" and "silu" */
} td_activation;

#ifdef __CUDACC__
#define TD_ACT_FN static __host__ __device__ __forceinline__
#else
#define TD_ACT_FN static inline
#endif

/* act(v) as transformers' ACT2FN computes it in float32. */
TD_ACT_FN float td_act(float v, td_activation act)
{
    switch (act) {
    case TD_ACT_RELU:
        return v > 0.0f ? v : 0.0f;
    case TD_ACT_GELU: /* torch.nn.functional.gelu, approximate='none' */
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case TD_ACT_GELU_NEW: { /* transformers' NewGELUActivation */
        const float k = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
    case TD_ACT_SILU: /* "swish" and "silu" */
        return v / (1.0f + expf(-v));
    case TD_ACT_NONE:
    default:
        return v;
    }
}

#endif /* TD_ACTIVATION_H */
