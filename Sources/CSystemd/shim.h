// Only the journal's native protocol (sd_journal_sendv), for the log handler; sd_notify and
// sd_listen_fds are spoken by their protocols without libsystemd (Notify.swift, Activation.swift).
#include <systemd/sd-journal.h>
