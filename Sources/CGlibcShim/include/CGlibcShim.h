#ifndef CGLIBCSHIM_H
#define CGLIBCSHIM_H
#include <spawn.h>

/// Glibc's Swift module exports neither accept4 nor pipe2 nor posix_spawn's closefrom action
/// (they are _GNU_SOURCE declarations), nor mallopt (malloc.h), nor pthread_setname_np and
/// SCHED_IDLE; shim.c calls them.

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0)): the client's
/// descriptor is close-on-exec from its first instant, so a hook spawned meanwhile cannot inherit it.
int creel_accept_cloexec(int fd, int nonblocking);
/// pipe2(fds, O_CLOEXEC | O_NONBLOCK).
int creel_pipe_cloexec_nonblock(int fds[2]);
/// posix_spawn_file_actions_addclosefrom_np(actions, from): the child closes every descriptor >= from.
int creel_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);
/// mallopt(M_MMAP_THRESHOLD, bytes): a fixed threshold, which also turns glibc's dynamic one off. 1 on success.
int creel_fix_mmap_threshold(int bytes);
/// pthread_setname_np(pthread_self(), name), `name` cut to the kernel's 15 bytes: 0 or the errno.
int creel_name_this_thread(const char *name);
/// sched_setscheduler(0, SCHED_IDLE): the calling thread runs only on CPU time no other thread
/// wants. 0 or the errno.
int creel_run_this_thread_when_idle(void);
/// renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE): fails with EEXIST rather than
/// replace `to`. 0 or -1 with errno (EINVAL where the file system cannot do it).
int creel_rename_noreplace(const char *from, const char *to);
#endif
