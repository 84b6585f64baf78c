#include "CFFmpegShim.h"

#include <pthread.h>
#include <string.h>
#include <libavutil/log.h>

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static char capture_buf[16384];
static size_t capture_len;

static void capture_callback(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > AV_LOG_ERROR) return;
    char line[1024];
    int prefix = 1;
    if (av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix) < 0) return;
    size_t n = strnlen(line, sizeof line);
    pthread_mutex_lock(&capture_lock);
    if (capture_len + n + 1 < sizeof capture_buf) {
        memcpy(capture_buf + capture_len, line, n);
        capture_len += n;
        if (n == 0 || line[n - 1] != '\n') capture_buf[capture_len++] = '\n';
        capture_buf[capture_len] = 0;
    }
    pthread_mutex_unlock(&capture_lock);
}

void creel_log_capture_begin(void) {
    pthread_mutex_lock(&capture_lock);
    capture_len = 0;
    capture_buf[0] = 0;
    pthread_mutex_unlock(&capture_lock);
    av_log_set_callback(capture_callback);
}

void creel_log_capture_end(void) { av_log_set_callback(av_log_default_callback); }

void creel_log_captured(char *buf, int size) {
    if (size <= 0) return;
    pthread_mutex_lock(&capture_lock);
    size_t n = capture_len < (size_t)size - 1 ? capture_len : (size_t)size - 1;
    memcpy(buf, capture_buf, n);
    buf[n] = 0;
    pthread_mutex_unlock(&capture_lock);
}

// --- FFmpeg's messages into reeld's log, each at its own level (LibraryLog.swift). ---
#include <stdatomic.h>

static _Atomic(creel_av_log_sink) log_sink;

static void route_av(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > av_log_get_level()) return;
    creel_av_log_sink sink = atomic_load(&log_sink);
    if (!sink) { av_log_default_callback(avcl, level, fmt, vl); return; }
    // FFmpeg may log one line in pieces (the last one ends with '\n'): collect them per thread,
    // at the most severe level among them, and hand over whole lines.
    static _Thread_local char line[1024];
    static _Thread_local size_t len;
    static _Thread_local int print_prefix = 1;
    static _Thread_local int line_level = 1 << 30;
    char piece[1024];
    if (av_log_format_line2(avcl, level, fmt, vl, piece, sizeof piece, &print_prefix) < 0) return;
    size_t n = strnlen(piece, sizeof piece);
    if (n > sizeof line - 1 - len) n = sizeof line - 1 - len;  // an overlong line is truncated
    memcpy(line + len, piece, n);
    len += n;
    line[len] = 0;
    if (level < line_level) line_level = level;
    if (len == 0 || (line[len - 1] != '\n' && len < sizeof line - 1)) return;
    while (len > 0 && line[len - 1] == '\n') line[--len] = 0;
    if (len > 0) sink(line_level, line);
    len = 0;
    line_level = 1 << 30;
}

void creel_av_log_route(creel_av_log_sink sink) {
    atomic_store(&log_sink, sink);
    av_log_set_callback(sink ? route_av : av_log_default_callback);
}
