#ifndef CREELSHIM_H
#define CREELSHIM_H
#include <stdint.h>
#include <x264.h>
#include <libavutil/error.h>

/// x264_encoder_open is a macro naming a versioned symbol (x264_encoder_open_164).
x264_t *creel_x264_encoder_open(x264_param_t *param);

/// AVERROR(e) is a function-like macro.
static inline int creel_averror(int posix_errno) { return AVERROR(posix_errno); }
static inline int creel_averror_eof(void) { return AVERROR_EOF; }
static inline int creel_averror_eagain(void) { return AVERROR(EAGAIN); }
#endif
