#define _GNU_SOURCE
#include <fcntl.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

int creel_name_this_thread(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = 0;
    return pthread_setname_np(pthread_self(), cut);
}

int creel_run_this_thread_when_idle(void) {
    struct sched_param param = { .sched_priority = 0 };
    return sched_setscheduler(0, SCHED_IDLE, &param) == 0 ? 0 : errno;
}

int creel_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int creel_default_scheduling_for_children(void) {
    struct sched_param param = { .sched_priority = 0 };
    int failed = 0;
    if (sched_getscheduler(0) != SCHED_OTHER && sched_setscheduler(0, SCHED_OTHER, &param) != 0) failed = errno;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && nice < 0 && setpriority(PRIO_PROCESS, 0, 0) != 0 && failed == 0) failed = errno;
    return failed;
}

int creel_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
