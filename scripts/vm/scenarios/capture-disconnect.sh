# Real drivers: vivid's 'disconnect' button mid-recording. The file must be finished and
# playable, reeld must keep answering with the device named in lastError, and once the node
# is back (it returns when the last fd is closed; else vivid is reloaded) a new recording works.
# Timing helpers (also in newer guest/lib.sh; defined here when missing).
command -v now >/dev/null 2>&1 || now() { awk '/^now at /{printf "%.6f\n", $3 / 1e9; exit}' /proc/timer_list; }
command -v at >/dev/null 2>&1 || at() { echo "$1 $2" | awk '{printf "%.6f\n", $1 + $2}'; }
command -v timed >/dev/null 2>&1 || timed() {
    _name=$1; shift
    _t0=$(now); _rc=0; ctl "$@" || _rc=$?; _t1=$(now)
    echo "$_name $_t0 $_t1 $_rc" >> "$OUT/times.txt"
    return $_rc
}
command -v sleep_until >/dev/null 2>&1 || sleep_until() {
    _d=$(echo "$1 $(now)" | awk '{d = $1 - $2; print (d > 0 ? d : 0)}')
    sleep "$_d"
}
# wait_state STATE SECONDS: until reelctl status says STATE.
wait_state() {
    _n=$(( $2 * 10 ))
    until reelctl status --json | grep -q "\"state\":\"$1\""; do
        _n=$((_n - 1)); [ $_n -gt 0 ] || { log "reeld did not reach state $1 within $2 s"; return 1; }
        sleep 0.1
    done
}
CAM=/dev/video0 MIC=hw:Loopback,1,0 SPEAKER=hw:Loopback,0,0
PRESET=${PRESET:-ultrafast}
# Recordings go to the guest's tmpfs (a capture box's local disk), not through 9p, whose
# synchronous writes under emulation stall the pipeline; collect copies them to /out.
REC=/tmp/rec
mkdir -p $REC
collect() { cp $REC/*.mp4* "$OUT"/ 2>/dev/null || true; }
# play: the host-made signal (/in/steps.wav, S16 48 kHz mono) into the loopback, in the background.
play() {
    echo "play $(now) $(now) 0" >> "$OUT/times.txt"
    aplay -q -D "$SPEAKER" /in/steps.wav &
    APLAY_PID=$!
}

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
timed stop stop --json > "$OUT/stop-after.out"
grep '^{' "$OUT/stop-after.out" > "$OUT/stop-after.json"
cat "$OUT/stop-after.json"
kill $APLAY_PID 2>/dev/null || true
reeld_stop
collect
