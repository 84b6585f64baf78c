#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "CX264Shim.h"

// --- x264's messages into reeld's log, each at its own level (LibraryLog.swift). ---
static _Atomic(creel_x264_log_sink) log_sink;

static void route_x264(void *priv, int level, const char *fmt, va_list vl) {
    (void)priv;
    creel_x264_log_sink sink = atomic_load(&log_sink);
    if (!sink) return;  // not installed unless a sink was (creel_x264_route_log)
    // The text x264's own logger prints: "x264 [warning]: ...".
    static const char *names[] = {"error", "warning", "info", "debug"};
    char line[1024];
    int k = snprintf(line, sizeof line, "x264 [%s]: ", level >= 0 && level <= 3 ? names[level] : "unknown");
    if (k < 0 || (size_t)k >= sizeof line) return;
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, vl);
    size_t len = strnlen(line, sizeof line);
    while (len > 0 && line[len - 1] == '\n') line[--len] = 0;
    sink(level, line);
}

void creel_x264_log_route(creel_x264_log_sink sink) { atomic_store(&log_sink, sink); }

void creel_x264_route_log(x264_param_t *param) {
    if (atomic_load(&log_sink)) param->pf_log = route_x264;
}
