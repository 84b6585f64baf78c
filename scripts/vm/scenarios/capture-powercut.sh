# Power cut (issue 6): the recordings live on an ext4 file system on a virtio disk (the host's
# image, attached with `run --disk`; 9p cannot model a power cut), reeld records the camera
# (320x180 at 10 fps: little CPU, so the pipeline keeps up with the camera) and the loopback for
# CUT_AT seconds, then the host SIGKILLs qemu (`run --kill-on REEL-POWER-CUT`):
# no sync, no unmount, the guest's page cache is lost. The host then checks the image
# (Tests/vm/test_faults_vm.py): e2fsck replays the journal, debugfs takes the .part out, and it
# must decode up to its last fragment. FSYNC=fragment|none is passed to reeld (--fsync) when set.
capture_setup
disk_mount $REC
record_from_devices powercut 320x180 10 --min-free-mb 50 ${FSYNC:+--fsync $FSYNC}
sleep_until "$(at "$T1" "${CUT_AT:-8}")"
timed status status --json > "$OUT/status.out"   # recordedNs, bracketed in times.txt
grep '^{' "$OUT/status.out" > "$OUT/status-before-cut.json"
ls -l $REC
power_cut
