#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <libavformat/avio.h>
#include <libavutil/mem.h>
#include "CFFmpegShim.h"

/// An AVIOContext of our own (the muxer's) over the file's own one (`inner`, from avio_open): every
/// write goes through, and `box` goes in right after the first box (ftyp). Positions the muxer sees
/// stay its own; the file's are `box_len` further once the box is in.
typedef struct {
    AVIOContext *inner;
    int64_t pos;          // the muxer's position
    int64_t first_end;    // end of the first box in the muxer's positions (-1: not known yet; -2: never)
    int injected;
    uint8_t box[16];
    int box_len;
    uint8_t head[8];      // the first box's header, gathered across writes
} creel_inject;

static int pass(creel_inject *s, const uint8_t *buf, int len) {
    avio_write(s->inner, buf, len);
    avio_flush(s->inner);
    return s->inner->error < 0 ? s->inner->error : 0;
}

static int inject_write(void *opaque, uint8_t *buf, int size) {
    creel_inject *s = opaque;
    int done = 0;
    while (done < size) {
        if (s->first_end == -1 && s->pos < 8) {
            int take = (int)(8 - s->pos) < size - done ? (int)(8 - s->pos) : size - done;
            memcpy(s->head + s->pos, buf + done, take);
            if (s->pos + take == 8) {
                int64_t n = (int64_t)s->head[0] << 24 | s->head[1] << 16 | s->head[2] << 8 | s->head[3];
                s->first_end = n >= 8 ? n : -2;
            }
        }
        int chunk = size - done;
        if (!s->injected && s->first_end > s->pos && s->first_end - s->pos < chunk) chunk = (int)(s->first_end - s->pos);
        int rc = pass(s, buf + done, chunk);
        if (rc < 0) return rc;
        s->pos += chunk;
        done += chunk;
        if (!s->injected && s->first_end == s->pos) {
            rc = pass(s, s->box, s->box_len);
            if (rc < 0) return rc;
            s->injected = 1;
        }
    }
    return size;
}

static int64_t inject_seek(void *opaque, int64_t offset, int whence) {
    creel_inject *s = opaque;
    int extra = s->injected ? s->box_len : 0;
    if ((whence & ~AVSEEK_FORCE) == AVSEEK_SIZE) {
        int64_t r = avio_size(s->inner);
        return r < 0 ? r : r - extra;
    }
    if ((whence & ~AVSEEK_FORCE) != SEEK_SET) return AVERROR(ENOSYS);
    int64_t r = avio_seek(s->inner, offset + (s->injected && offset >= s->first_end ? extra : 0), SEEK_SET);
    if (r < 0) return r;
    s->pos = offset;
    return offset;
}

int creel_avio_open_with_box(AVIOContext **pb, const char *url, const unsigned char *box, int len) {
    if (!pb || len <= 0 || len > 16) return AVERROR(EINVAL);
    creel_inject *s = av_mallocz(sizeof *s);
    if (!s) return AVERROR(ENOMEM);
    int rc = avio_open(&s->inner, url, AVIO_FLAG_WRITE);
    if (rc < 0) { av_free(s); return rc; }
    s->first_end = -1;
    memcpy(s->box, box, len);
    s->box_len = len;
    const int size = 32768;
    unsigned char *buffer = av_malloc(size);
    AVIOContext *outer = buffer ? avio_alloc_context(buffer, size, 1, s, NULL, inject_write, inject_seek) : NULL;
    if (!outer) { av_free(buffer); avio_closep(&s->inner); av_free(s); return AVERROR(ENOMEM); }
    *pb = outer;
    return 0;
}

int creel_avio_box_written(AVIOContext *pb) {
    if (!pb || pb->write_packet != inject_write) return 0;
    return ((creel_inject *)pb->opaque)->injected;
}

int creel_avio_closep(AVIOContext **pb) {
    if (!pb || !*pb) return 0;
    AVIOContext *outer = *pb;
    if (outer->write_packet != inject_write) return avio_closep(pb);
    avio_flush(outer);
    creel_inject *s = outer->opaque;
    int rc = outer->error < 0 ? outer->error : 0;
    int rc2 = avio_closep(&s->inner);
    av_freep(&outer->buffer);
    avio_context_free(pb);
    av_free(s);
    return rc < 0 ? rc : rc2;
}
