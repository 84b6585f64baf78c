# The disk fails mid-recording: the recordings live on ext4 on a device-mapper device over the
# host's image (`run --disk`); FAIL_AT seconds into a camera + loopback recording its table is
# switched to dm's `error` target, so every read and write from then on ends in EIO, as when a
# USB disk dies or its cable comes out. (Suspended with --nolockfs: no freeze, so nothing is
# synced on the way; what reeld had not synced itself stays in the page cache and is lost.)
# reeld must notice, say so, stay up and refuse a new recording clearly; the host then reads
# the image as a repaired disk would be read (Tests/vm/test_faults_vm.py: e2fsck, debugfs,
# reeld's start-up recovery) and checks what was kept.
capture_setup
modprobe virtio_blk
modprobe ext4
modprobe dm-mod
wait_for /dev/vda 10
SECTORS=$(cat /sys/block/vda/size)
dmsetup create rec --noudevsync --table "0 $SECTORS linear /dev/vda 0"
dmsetup mknodes rec
wait_for /dev/mapper/rec 10
mount -t ext4 /dev/mapper/rec $REC
log "mounted: $(grep " $REC " /proc/mounts)"
record_from_devices ioerror 320x180 10 --min-free-mb 50
sleep_until "$(at "$T1" "${FAIL_AT:-8}")"
timed status status --json > "$OUT/status.out"
grep '^{' "$OUT/status.out" > "$OUT/status-before-fail.json"
ls -l $REC

_f0=$(now)
dmsetup suspend --nolockfs rec
dmsetup load rec --table "0 $SECTORS error"
dmsetup resume rec
echo "fail $_f0 $(now) 0" >> "$OUT/times.txt"
log "the disk under $REC now fails every request (dm error target)"

# reeld notices at its next sync (fsync = fragment: every 0.5 s of media) and ends the recording.
wait_state idle 30
echo "noticed $(now) $(now) 0" >> "$OUT/times.txt"
reelctl status --json | grep '^{' > "$OUT/status-after-fail.json"
cat "$OUT/status-after-fail.json"
# A new recording on the dead disk is refused with a reason, and reeld stays up.
_rc=0; timed again start --name again > "$OUT/again.out" 2>&1 || _rc=$?
cat "$OUT/again.out"
[ $_rc != 0 ] || { log "a recording started on a disk that fails every write"; exit 1; }
kill -0 "$REELD_PID" || { log "reeld died after the disk failed"; exit 1; }
reelctl status > /dev/null
kill $APLAY_PID 2>/dev/null || true
reeld_stop
dmesg | grep -i -E "dm-0|ext4|I/O error" | tail -20 > "$OUT/dmesg.txt" || true
