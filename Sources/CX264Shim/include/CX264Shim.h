#ifndef CX264SHIM_H
#define CX264SHIM_H
#include <stdint.h>
#include <x264.h>

/// Where x264's messages go once routed: its own level (X264_LOG_*) and one line without its
/// newline, as x264 prints it ("x264 [warning]: ..."), valid during the call only.
typedef void (*creel_x264_log_sink)(int level, const char *line);
/// Installs `sink` for encoders whose parameters pass through creel_x264_route_log from now on;
/// NULL: they print to stderr as x264 does by default.
void creel_x264_log_route(creel_x264_log_sink sink);
/// Points x264's pf_log (a va_list callback, which Swift cannot be) at the sink, if one is installed.
void creel_x264_route_log(x264_param_t *param);
#endif
