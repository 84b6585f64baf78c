#!/bin/bash
# The upload units under a real systemd (issue 26): runs as PID 1's reel-vm-test.service in the
# test-bed guest, after systemd-inside.sh in the same boot (scenarios/systemd-unit.sh with
# VM_INSIDE_NEXT=upload-inside.sh), or alone (SYSTEMD_INSIDE=upload-inside.sh).
# Installs Reel as README says (make install-files, sysusers, tmpfiles), gives the box an
# rclone.conf whose remote [reel] is `type = local` (/srv/fleet, writable through a drop-in as
# README says for a local or NFS remote), enables reeld and reel-upload.path and .timer, and
# records: reel-upload.path must start the upload when the finished recording's link appears
# in the outbox (the timer is stopped meanwhile, so it cannot be the timer). Then a missing
# rclone.conf must fail the unit with its message. Facts (/out/upload-facts.txt) and journals go to /out for
# Tests/vm/test_upload_vm.py.
set -uo pipefail
exec > >(tee -a /out/inside.log) 2>&1
REPO=$VM_HOST_REPO BIN=$VM_HOST_BIN
OUTBOX=/var/lib/reel/outbox FLEET=/srv/fleet

collect() {
    journalctl -u reel-upload.service -u reel-upload.path -u reel-upload.timer -o json --no-pager > /out/upload-journal.json 2>/dev/null
    journalctl -b -o short-monotonic --no-pager > /out/journal-all.txt 2>/dev/null
    systemd-analyze security reel-upload.service --no-pager > /out/upload-security.txt 2>&1
    ls -laR /var/lib/reel $FLEET > /out/upload-ls.txt 2>&1
}
FACTS=/out/upload-facts.txt
. "$REPO/scripts/vm/guest/systemd-lib.sh"

log "systemd $(systemctl --version | head -1); repo $REPO; binaries $BIN"
: > "$FACTS"

# 1. Install, as README says; reeld records the synthetic sources (no devices needed here).
run make -s -C "$REPO" install-files BIN_SRC="$BIN"
run sed -i -e 's|^video = .*|video = "test"|' -e 's|^audio = .*|audio = "test"|' -e 's|^min_free_mb = .*|min_free_mb = 100|' \
    -e 's|^size = .*|size = "160x90"|' -e 's|^fps = .*|fps = "10"|' /etc/reel/reeld.toml
# reeld's outbox (issue 26, branch outbox): set it when this reeld has it; otherwise this
# script makes the link itself, exactly as reeld would, and says so (fact linked_by).
if reeld --help 2>&1 | grep -q -- --outbox-dir; then
    if grep -q '^outbox_dir = ' /etc/reel/reeld.toml; then
        run sed -i "s|^outbox_dir = .*|outbox_dir = \"$OUTBOX\"|" /etc/reel/reeld.toml
    else
        run sed -i "1i outbox_dir = \"$OUTBOX\"" /etc/reel/reeld.toml
    fi
    linked_by=reeld
else
    linked_by=scenario
fi
fact linked_by $linked_by
run systemd-sysusers
run systemd-tmpfiles --create reel.conf
if [ -d $OUTBOX ]; then fact outbox_made_by tmpfiles; else
    fact outbox_made_by scenario
    run install -d -m 2770 -o reel -g reel $OUTBOX
fi
fact outbox_mode "$(stat -c '%a %U:%G' $OUTBOX)"
run reeld --check-config

# The remote: a local folder, group reel, writable by the unit through a drop-in.
run install -d -m 2770 -o root -g reel $FLEET
printf '[reel]\ntype = local\n' > /etc/reel/rclone.conf
run chgrp reel /etc/reel/rclone.conf
run chmod 0640 /etc/reel/rclone.conf
echo "REEL_UPLOAD_PATH=$FLEET/booth" >> /etc/reel/upload.env
mkdir -p /etc/systemd/system/reel-upload.service.d
printf '[Service]\nReadWritePaths=%s\n' $FLEET > /etc/systemd/system/reel-upload.service.d/local-remote.conf
run systemctl daemon-reload
# The installed units verify here too (systemd-analyze verify: the test's own check).
fact verify "$(systemd-analyze verify /usr/local/lib/systemd/system/reel-upload.{service,path,timer} 2>&1 | tr '\n' ' ')"

run systemctl enable --now reeld.socket reeld.service reel-upload.path reel-upload.timer
# After systemd-inside.sh in the same boot reeld is running already: the settings above need a restart.
run systemctl restart reeld.service
wait_state reeld active
fact path_state "$(systemctl is-active reel-upload.path)"
# Only the path unit may start the upload in what follows (the timer may have fired already:
# OnBootSec=2min can pass during the set-up under TCG; it must not fire again).
run systemctl stop reel-upload.timer
fact timer_last_before "$(systemctl show -p LastTriggerUSecMonotonic --value reel-upload.timer)"

# 2. A recording; when it finishes, its link appears and reel-upload.path starts the upload.
run reelctl start --name take
wait_recorded 2
run reelctl stop
[ -f /var/lib/reel/take.mp4 ] || die "reelctl stop returned but /var/lib/reel/take.mp4 does not exist"
if [ $linked_by = scenario ]; then
    run ln /var/lib/reel/take.mp4 $OUTBOX/take.mp4
else
    # reeld links after the rename, before on_finish: the link (or the upload it started
    # already) within 10 s of stop's answer.
    n=100
    until [ -e $OUTBOX/take.mp4 ] || [ -e $FLEET/booth/take.mp4 ] || [ $n -eq 0 ]; do n=$((n - 1)); sleep 0.1; done
    fact linked_by_reeld "$([ $n -gt 0 ] && echo yes || echo no)"
fi
linked_at=$(cut -d' ' -f1 /proc/uptime)
n=1200    # 24 s seen under TCG on a busy host (rclone's start is slow there)
until [ -f $FLEET/booth/take.mp4 ] && [ -z "$(ls -A $OUTBOX)" ] && [ "$(systemctl is-active reel-upload.service)" != activating ]; do
    n=$((n - 1)); [ $n -gt 0 ] || die "take.mp4 did not reach $FLEET/booth within 120 s of its link (outbox: $(ls -A $OUTBOX))"
    sleep 0.1
done
fact upload_after_s "$(awk -v t0="$linked_at" '{print $1 - t0}' /proc/uptime)"
fact same_sha256 "$([ "$(sha256sum < /var/lib/reel/take.mp4)" = "$(sha256sum < $FLEET/booth/take.mp4)" ] && echo yes || echo no)"
fact outbox_left "$(ls -A $OUTBOX | wc -l)"
fact recording_kept "$([ -f /var/lib/reel/take.mp4 ] && echo yes || echo no)"
fact upload_result "$(systemctl show -p Result --value reel-upload.service)"
fact uploaded_owner "$(stat -c '%u %G' $FLEET/booth/take.mp4)"
fact timer_last_after "$(systemctl show -p LastTriggerUSecMonotonic --value reel-upload.timer)"

# 3. No rclone.conf: the unit fails, and its journal names the file, the remote and the fix.
# (Before the timer is started again: a timer whose OnBootSec= is past elapses at once when
# started, and that run, begun before the file went, would answer this start instead.)
run mv /etc/reel/rclone.conf /etc/reel/rclone.conf.away
systemctl start reel-upload.service && die "reel-upload.service started without /etc/reel/rclone.conf"
fact missing_conf_result "$(systemctl show -p Result --value reel-upload.service)"
fact missing_conf_status "$(systemctl show -p ExecMainStatus --value reel-upload.service)"

run systemctl start reel-upload.timer
fact timer_state "$(systemctl is-active reel-upload.timer)"
end 0
