# Real drivers: vivid's 'disconnect' button mid-recording. The file must be finished and
# playable, reeld must keep answering with the device named in lastError, and once the node
# is back (it returns when the last fd is closed; else vivid is reloaded) a new recording works.
capture_setup

play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 640x360 --fps 30 --pixel-format yuyv --preset $PRESET
timed start start --name before
t0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
sleep_until "$(at "$t0" 3.0)"
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
# A start may race the node's re-registration: retry for a few seconds (backoff).
n=0
until timed start2 start --name after; do
    n=$((n + 1)); [ $n -lt 5 ] || exit 1
    sleep $n
done
t1=$(awk '$1 == "start2" && $4 == 0 {print $2}' "$OUT/times.txt")
sleep_until "$(at "$t1" 3.0)"
stop_json stop stop-after
finish_capture
