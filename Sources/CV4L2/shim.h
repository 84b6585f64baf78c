#include <linux/videodev2.h>
#include <libv4l2.h>

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
/// Camera controls (V4L2Controls.swift).
static inline unsigned long creel_vidioc_queryctrl(void) { return VIDIOC_QUERYCTRL; }
static inline unsigned long creel_vidioc_query_ext_ctrl(void) { return VIDIOC_QUERY_EXT_CTRL; }
static inline unsigned long creel_vidioc_querymenu(void) { return VIDIOC_QUERYMENU; }
static inline unsigned long creel_vidioc_g_ext_ctrls(void) { return VIDIOC_G_EXT_CTRLS; }
static inline unsigned long creel_vidioc_s_ext_ctrls(void) { return VIDIOC_S_EXT_CTRLS; }
static inline unsigned long creel_vidioc_try_ext_ctrls(void) { return VIDIOC_TRY_EXT_CTRLS; }
