#ifndef CREELSHIM_H
#define CREELSHIM_H
#include <stdint.h>
#include <x264.h>
#include <libavutil/error.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

/// x264_encoder_open is a macro naming a versioned symbol (x264_encoder_open_164).
x264_t *creel_x264_encoder_open(x264_param_t *param);

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

/// Where FFmpeg's and x264's messages go once routed: the library, its own level (AV_LOG_* or
/// X264_LOG_*) and one line of text without its newline (valid during the call only).
enum { CREEL_LOG_FFMPEG = 0, CREEL_LOG_X264 = 1 };
typedef void (*creel_log_sink)(int library, int level, const char *line);
/// Installs `sink` as FFmpeg's log callback (lines at or above av_log_get_level(), FFmpeg's
/// pieces joined into whole lines); NULL restores av_log_default_callback.
void creel_log_route(creel_log_sink sink);
/// Points x264's pf_log at the sink, if one is installed (else x264 keeps printing to stderr).
void creel_x264_route_log(x264_param_t *param);

/// v4l2_open and v4l2_ioctl are variadic (Swift cannot call them); the ioctl request numbers
/// VIDIOC_* are function-like macros (_IOWR(...)). Re-exported with fixed signatures.
static inline int creel_v4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int creel_v4l2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline unsigned long creel_vidioc_querycap(void) { return VIDIOC_QUERYCAP; }
static inline unsigned long creel_vidioc_enum_fmt(void) { return VIDIOC_ENUM_FMT; }
static inline unsigned long creel_vidioc_enum_framesizes(void) { return VIDIOC_ENUM_FRAMESIZES; }
static inline unsigned long creel_vidioc_enum_frameintervals(void) { return VIDIOC_ENUM_FRAMEINTERVALS; }
static inline unsigned long creel_vidioc_g_fmt(void) { return VIDIOC_G_FMT; }
static inline unsigned long creel_vidioc_s_fmt(void) { return VIDIOC_S_FMT; }
static inline unsigned long creel_vidioc_g_parm(void) { return VIDIOC_G_PARM; }
static inline unsigned long creel_vidioc_s_parm(void) { return VIDIOC_S_PARM; }
static inline unsigned long creel_vidioc_reqbufs(void) { return VIDIOC_REQBUFS; }
static inline unsigned long creel_vidioc_querybuf(void) { return VIDIOC_QUERYBUF; }
static inline unsigned long creel_vidioc_qbuf(void) { return VIDIOC_QBUF; }
static inline unsigned long creel_vidioc_dqbuf(void) { return VIDIOC_DQBUF; }
static inline unsigned long creel_vidioc_streamon(void) { return VIDIOC_STREAMON; }
static inline unsigned long creel_vidioc_streamoff(void) { return VIDIOC_STREAMOFF; }
#endif
