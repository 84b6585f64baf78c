#!/bin/bash
# Runs under systemd as PID 1 in the test-bed guest (reel-vm-test.service, set up by
# scenarios/systemd-unit.sh) on the host's root with a tmpfs overlay. Installs reeld exactly as
# README's "Install on a capture box" says, then drives it through systemd and reelctl:
# socket, notify, watchdog, user and sandbox, reload, `systemctl stop` mid-recording, socket
# activation, and a hung reeld killed by the watchdog and restarted. Facts go to /out/facts.txt
# (KEY=VALUE) and the files and journal to /out for Tests/vm/test_systemd_vm.py; a step that
# fails ends the test with its reason. Ends with /out/exit-status and a forced power-off (qemu
# -no-reboot then exits).
set -uo pipefail
exec > >(tee -a /out/inside.log) 2>&1
REPO=$VM_HOST_REPO BIN=$VM_HOST_BIN

collect() {
    journalctl -u reeld -u reeld.socket -o json --no-pager > /out/journal.json 2>/dev/null
    # The finished files, as README's journal query finds them (reeld's fields: RecordingLog.swift).
    journalctl -u reeld REEL_EVENT=finished -o json --no-pager > /out/finished.json 2>/dev/null
    journalctl -b -o short-monotonic --no-pager > /out/journal-all.txt 2>/dev/null
    systemctl show reeld --no-pager > /out/show-reeld.txt 2>/dev/null
    systemd-analyze security reeld --no-pager > /out/security.txt 2>&1
    ls -la /var/lib/reel /run/reel /dev/video0 /dev/snd > /out/ls.txt 2>&1
    cp /var/lib/reel/*.mp4 /out/ 2>/dev/null
}
. "$REPO/scripts/vm/guest/systemd-lib.sh"

# mainpid: reeld's main PID (0 when not running).
mainpid() { systemctl show -p MainPID --value reeld; }

log "systemd $(systemctl --version | head -1); repo $REPO; binaries $BIN"
: > /out/facts.txt
fact system_state "$(systemctl is-system-running 2>/dev/null)"

# udev has applied its rules to the nodes vivid and snd-aloop made at boot (coldplug).
run udevadm settle --timeout=60
fact video_node "$(stat -c '%a %U:%G' /dev/video0)"
fact snd_node "$(stat -c '%a %U:%G' /dev/snd/pcmC0D1c)"

# 1. Install, as README says (make install = build + install-files; the build is the host's).
run make -s -C "$REPO" install-files BIN_SRC="$BIN"
# The box's settings: vivid's webcam and the loopback's capture side; the rest is the default
# but the picture: 320x180 at 10 fps, as the other VM tests record (docs/TESTBED.md). Under TCG
# the default 640x360 at 30 fps is more than the guest can encode: 862 of 1800 frames dropped,
# 3 s of recording took 25 s to reach, and the scenario ran 205 s.
run sed -i -e 's|^audio = .*|audio = "alsa:hw:Loopback,1,0"|' -e 's|^min_free_mb = .*|min_free_mb = 100|' \
    -e 's|^size = .*|size = "320x180"|' -e 's|^fps = .*|fps = "10"|' /etc/reel/reeld.toml
run systemd-sysusers
run systemd-tmpfiles --create reel.conf
run reeld --check-config
run systemctl daemon-reload
# A tone on the loopback, so the recording's audio is not silence (speaker-test: alsa-utils).
speaker-test -D hw:Loopback,0,0 -c 1 -r 48000 -F S16_LE -t sine -f 1000 -l 0 >/dev/null 2>&1 &
run systemctl enable --now reeld.socket reeld.service
wait_state reeld active          # Type=notify: active only once reeld said READY=1
pid=$(mainpid)
fact main_pid "$pid"
fact user "$(stat -c %U /proc/$pid)"
fact groups "$(id -Gn "$(stat -c %U /proc/$pid)" | tr ' ' ',')"
fact nice "$(awk '{print $19}' /proc/$pid/stat)"
fact socket_mode "$(stat -c '%a %U:%G' /run/reel/reeld.sock)"
fact statedir_mode "$(stat -c '%a %U:%G' /var/lib/reel)"
# Someone outside group reel is refused by the socket's permissions, and told so.
if out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups reelctl status 2>&1); then
    die "user nobody could use the control socket: $out"
fi
fact nobody_refused "$(echo "$out" | head -1)"
# A member of group reel may (README: usermod -aG reel "$USER"); reeld checks SO_PEERCRED too.
run useradd --no-create-home --groups reel alice
fact member_status_rc "$(setpriv --reuid=alice --regid=alice --init-groups reelctl status >/dev/null 2>&1; echo $?)"

# 2. A recording with a pause, long enough that the watchdog (WatchdogSec=10s) must have been fed.
run reelctl start --name one
wait_recorded 3
run reelctl pause
sleep 1                          # the pause's length (not synchronisation)
run reelctl resume
wait_recorded 12
fact status_text_recording "$(systemctl show -p StatusText --value reeld)"
run reelctl stop
[ -f /var/lib/reel/one.mp4 ] || die "reelctl stop returned but /var/lib/reel/one.mp4 does not exist"

# 3. Reload (SIGHUP) between recordings: same process, still active.
run systemctl reload reeld
wait_state reeld active
fact pid_after_reload "$(mainpid)"

# 4. `systemctl stop` during a recording: SIGTERM, the file is finished, the unit stops cleanly.
run reelctl start --name two
wait_recorded 3
run systemctl stop reeld
fact two_exists "$([ -f /var/lib/reel/two.mp4 ] && echo yes || echo no)"
fact two_part_left "$(ls /var/lib/reel/two.mp4.part 2>/dev/null | wc -l)"
fact stop_result "$(systemctl show -p Result --value reeld)"
fact stop_exit_status "$(systemctl show -p ExecMainStatus --value reeld)"
fact socket_after_stop "$(systemctl is-active reeld.socket)"

# 5. Socket activation: the socket outlived reeld; the next reelctl starts it again.
run reelctl status
wait_state reeld active
fact activated_pid "$(mainpid)"
fact n_restarts "$(systemctl show -p NRestarts --value reeld)"
fact final_state "$(systemctl is-active reeld)"

# 6. A hung reeld: a capture thread stuck (the test hook freezes it, like a driver stuck in a
# read) stops the watchdog pings; systemd kills reeld after WatchdogSec, Restart=on-failure
# starts it again, and its start-up recovery makes the interrupted recording playable.
mkdir -p /etc/systemd/system/reeld.service.d
printf '[Service]\nEnvironment=REEL_TEST_FREEZE_CAPTURE=/run/reel/freeze\n' > /etc/systemd/system/reeld.service.d/test-freeze.conf
run systemctl daemon-reload
run systemctl restart reeld
wait_state reeld active
hung_pid=$(mainpid)
run reelctl start --name hung
wait_recorded 4
touch /run/reel/freeze
frozen_at=$(cut -d' ' -f1 /proc/uptime)
log "capture frozen; waiting for the watchdog"
n=900
until [ "$(systemctl show -p NRestarts --value reeld)" = 1 ]; do
    n=$((n - 1)); [ $n -gt 0 ] || die "reeld was not restarted within 90 s of its capture thread freezing"
    sleep 0.1
done
fact hung_restart_s "$(awk -v t0="$frozen_at" '{print $1 - t0}' /proc/uptime)"
rm -f /run/reel/freeze /etc/systemd/system/reeld.service.d/test-freeze.conf
wait_state reeld active
run reelctl status               # answers once start-up recovery is done
fact hung_restarted "$([ "$(mainpid)" != "$hung_pid" ] && echo yes || echo no)"
fact hung_recovered "$([ -f /var/lib/reel/hung.mp4 ] && echo yes || echo no)"
fact hung_part_left "$(ls /var/lib/reel/hung.mp4.part 2>/dev/null | wc -l)"
fact systemd_inside done
done_or_next
