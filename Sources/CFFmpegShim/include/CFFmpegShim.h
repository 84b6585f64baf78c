#ifndef CFFMPEGSHIM_H
#define CFFMPEGSHIM_H
#include <errno.h>
#include <libavutil/error.h>

/// AVERROR(e) is a function-like macro.
static inline int creel_averror(int posix_errno) { return AVERROR(posix_errno); }
static inline int creel_averror_eof(void) { return AVERROR_EOF; }
static inline int creel_averror_eagain(void) { return AVERROR(EAGAIN); }

/// av_log's callback takes a va_list, which Swift cannot receive: these collect the lines FFmpeg
/// logs at AV_LOG_ERROR or worse (what `ffmpeg -v error` prints) instead of printing them.
/// begin clears the buffer and installs the collector; end restores av_log_default_callback.
void creel_log_capture_begin(void);
void creel_log_capture_end(void);
/// Copies the collected lines ('\n'-separated, NUL-terminated, truncated to size) into buf.
void creel_log_captured(char *buf, int size);

/// Where FFmpeg's messages go once routed: its own level (AV_LOG_*) and one whole line without its
/// newline (valid during the call only).
typedef void (*creel_av_log_sink)(int level, const char *line);
/// Installs `sink` as FFmpeg's log callback (lines at or above av_log_get_level(), FFmpeg's pieces
/// joined into whole lines); NULL restores av_log_default_callback.
void creel_av_log_route(creel_av_log_sink sink);

#endif
