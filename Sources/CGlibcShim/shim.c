#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CGlibcShim.h"

int creel_accept_cloexec(int fd, int nonblocking) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0));
}

int creel_pipe_cloexec_nonblock(int fds[2]) { return pipe2(fds, O_CLOEXEC | O_NONBLOCK); }

int creel_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int creel_fix_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
