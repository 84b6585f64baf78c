# Real drivers: discovery lists vivid and the Loopback card; modes the camera does not
# offer are refused at start with the listing error; a missing device names the fix.
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

reeld --list-devices
reeld --list-devices --json > "$OUT/list-devices.json"
try_start() {  # NAME REELD-ARGS...: start must fail; its stderr goes to NAME.err
    _name=$1; shift
    reeld_start --output-dir $REC --audio none "$@"
    _rc=0; reelctl start --name "$_name" 2> "$OUT/$_name.err" || _rc=$?
    echo $_rc > "$OUT/$_name.rc"
    cat "$OUT/$_name.err"
    reelctl status --json > "$OUT/$_name.status.json"
    reeld_stop
}
try_start size --video $CAM --size 800x600 --fps 30 --pixel-format yuyv
try_start rate --video $CAM --size 1280x720 --fps 30 --pixel-format yuyv
try_start format --video $CAM --size 640x360 --fps 30 --pixel-format mjpeg
try_start nodev --video /dev/video7 --size 640x360 --fps 30
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC
ctl devices
reelctl devices --json > "$OUT/devices.json"
reeld_stop
collect
