# Real drivers: vivid's 'disconnect' button mid-recording. The file must be finished and
# playable, reeld must keep answering with the device named in lastError, and once the node
# is back (it returns when the last fd is closed; else vivid is reloaded) a new recording works.
capture_setup
record_from_devices before 640x360 30
sleep_until "$(at "$T1" 3.0)"
log "disconnecting $CAM"
echo "disconnect $(now) $(now) 0" >> "$OUT/times.txt"
v4l2-ctl -d $CAM --set-ctrl disconnect=1 || true
wait_state idle 20
reelctl status --json > "$OUT/status-after-disconnect.json"
cat "$OUT/status-after-disconnect.json"
ls -l /dev/video* 2>&1 || true
# The node returns when every fd on it is closed (reeld must have closed all of its fds).
if wait_for $CAM 5; then
    echo "node-returned" > "$OUT/recovery.txt"
else
    log "$CAM did not come back by itself: reloading vivid"
    echo "reloaded" > "$OUT/recovery.txt"
    rmmod vivid
    modprobe vivid n_devs=1 node_types=0x1 input_types=0x0
    wait_for $CAM 10
fi
record_again after
