/* A virtual foot pedal for the VM test of reel-button (Tests/vm/test_button_vm.py,
 * scripts/vm/scenarios/button.sh), made with the kernel's uinput driver.
 *
 *   pedal NAME LOG < commands
 *
 * Commands, one a line on stdin (a FIFO the scenario writes):
 *   plug           create the device "NAME" (keys KEY_SPACE, KEY_BACKSPACE, KEY_ESC, BTN_0; LED
 *                  LED_MISC) and, as udev would, the link /dev/input/by-id/NAME -> ../eventN
 *   unplug         remove the link and destroy the device (what a USB unplug does)
 *   down KEY / up KEY   press / release KEY (SPACE, BACKSPACE, ESC or BTN_0)
 *   quit
 * LOG gets one line per action and per LED change the device is sent, each with CLOCK_MONOTONIC
 * ns: "down SPACE T0 T1" (before and after the write: the input event's own timestamp lies
 * between), "led MISC VALUE T" (T: the LED event's own timestamp, as uinput stamps it),
 * "plug T eventN", "unplug T0 T1" (before and after UI_DEV_DESTROY: the device is gone from T0
 * on for its readers, who see ENODEV while the kernel still tears it down). The host reads it back. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/uinput.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

static const char *name;
static FILE *logf;
static int ufd = -1;
static char link_path[256];

static const struct { const char *name; int code; } keys[] = {
    {"SPACE", KEY_SPACE}, {"BACKSPACE", KEY_BACKSPACE}, {"ESC", KEY_ESC}, {"BTN_0", BTN_0},
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(logf, "error %s: %s\n", what, strerror(errno));
    fflush(logf);
    fprintf(stderr, "pedal: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void emit(int type, int code, int value) {
    struct input_event ev = {0};
    ev.type = type;
    ev.code = code;
    ev.value = value;
    if (write(ufd, &ev, sizeof ev) != sizeof ev) die("write");
}

static void plug(void) {
    ufd = open("/dev/uinput", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (ufd < 0) die("open /dev/uinput");
    if (ioctl(ufd, UI_SET_EVBIT, EV_KEY) < 0 || ioctl(ufd, UI_SET_EVBIT, EV_LED) < 0) die("UI_SET_EVBIT");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (ioctl(ufd, UI_SET_KEYBIT, keys[i].code) < 0) die("UI_SET_KEYBIT");
    if (ioctl(ufd, UI_SET_LEDBIT, LED_MISC) < 0) die("UI_SET_LEDBIT");
    struct uinput_setup setup = {0};
    setup.id.bustype = BUS_USB;
    setup.id.vendor = 0x1234;
    setup.id.product = 0x5678;
    snprintf(setup.name, sizeof setup.name, "%s", name);
    if (ioctl(ufd, UI_DEV_SETUP, &setup) < 0) die("UI_DEV_SETUP");
    if (ioctl(ufd, UI_DEV_CREATE) < 0) die("UI_DEV_CREATE");
    char sysname[64] = {0};
    if (ioctl(ufd, UI_GET_SYSNAME(sizeof sysname), sysname) < 0) die("UI_GET_SYSNAME");
    /* The event node: /sys/devices/virtual/input/inputN/eventM, then /dev/input/eventM. */
    char dir[256], node[300] = {0};
    snprintf(dir, sizeof dir, "/sys/devices/virtual/input/%s", sysname);
    for (int tries = 0; tries < 200 && !node[0]; tries++) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, "event", 5) == 0) snprintf(node, sizeof node, "%s", e->d_name);
        if (d) closedir(d);
        char dev[340];
        snprintf(dev, sizeof dev, "/dev/input/%s", node);
        if (node[0] && access(dev, F_OK) != 0) node[0] = 0;
        if (!node[0]) usleep(10000);
    }
    if (!node[0]) { errno = ENOENT; die("no event node appeared"); }
    mkdir("/dev/input/by-id", 0755);
    char target[320];
    snprintf(target, sizeof target, "../%s", node);
    unlink(link_path);
    if (symlink(target, link_path) < 0) die("symlink");
    fprintf(logf, "plug %lld %s\n", (long long)now_ns(), node);
    fflush(logf);
}

static void unplug(void) {
    if (ufd < 0) return;
    unlink(link_path);
    int64_t t0 = now_ns();
    if (ioctl(ufd, UI_DEV_DESTROY) < 0) die("UI_DEV_DESTROY");
    close(ufd);
    ufd = -1;
    fprintf(logf, "unplug %lld %lld\n", (long long)t0, (long long)now_ns());
    fflush(logf);
}

static void key(const char *which, int value) {
    if (ufd < 0) { fprintf(logf, "ignored %s %s: unplugged\n", value ? "down" : "up", which); fflush(logf); return; }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(keys[i].name, which) != 0) continue;
        int64_t t0 = now_ns();
        emit(EV_KEY, keys[i].code, value);
        emit(EV_SYN, SYN_REPORT, 0);
        int64_t t1 = now_ns();
        fprintf(logf, "%s %s %lld %lld\n", value ? "down" : "up", which, (long long)t0, (long long)t1);
        fflush(logf);
        return;
    }
    fprintf(logf, "unknown key %s\n", which);
    fflush(logf);
}

static void read_leds(void) {
    struct input_event ev;
    while (read(ufd, &ev, sizeof ev) == sizeof ev) {
        if (ev.type != EV_LED) continue;
        int64_t t = (int64_t)ev.input_event_sec * 1000000000 + (int64_t)ev.input_event_usec * 1000;
        fprintf(logf, "led %s %d %lld\n", ev.code == LED_MISC ? "MISC" : "OTHER", ev.value, (long long)t);
    }
    fflush(logf);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: pedal NAME LOG < commands\n"); return 2; }
    name = argv[1];
    logf = fopen(argv[2], "a");
    if (!logf) { perror(argv[2]); return 1; }
    snprintf(link_path, sizeof link_path, "/dev/input/by-id/%s", name);
    char line[256];
    size_t have = 0;
    for (;;) {
        struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
        if (poll(fds, ufd >= 0 ? 2 : 1, -1) < 0) { if (errno == EINTR) continue; die("poll"); }
        if (ufd >= 0 && (fds[1].revents & POLLIN)) read_leds();
        if (!(fds[0].revents & (POLLIN | POLLHUP))) continue;
        ssize_t n = read(0, line + have, sizeof line - 1 - have);
        if (n <= 0) break;  /* the writer closed: done */
        have += n;
        line[have] = 0;
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            char cmd[32] = {0}, arg[32] = {0};
            sscanf(line, "%31s %31s", cmd, arg);
            if (!strcmp(cmd, "plug")) plug();
            else if (!strcmp(cmd, "unplug")) unplug();
            else if (!strcmp(cmd, "down")) key(arg, 1);
            else if (!strcmp(cmd, "up")) key(arg, 0);
            else if (!strcmp(cmd, "quit")) { unplug(); return 0; }
            else if (cmd[0]) { fprintf(logf, "unknown command %s\n", cmd); fflush(logf); }
            memmove(line, nl + 1, have - (nl + 1 - line) + 1);
            have -= nl + 1 - line;
        }
    }
    unplug();
    return 0;
}
