#include <stdint.h>
#include <x264.h>

/// x264_encoder_open is a macro naming a versioned symbol (x264_encoder_open_164).
static inline x264_t *creel_x264_encoder_open(x264_param_t *param) { return x264_encoder_open(param); }
