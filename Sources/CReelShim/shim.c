#include "CReelShim.h"

x264_t *creel_x264_encoder_open(x264_param_t *param) { return x264_encoder_open(param); }
