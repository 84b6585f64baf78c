# /vm/lib.sh: helpers for scenarios (busybox sh). Sourced before the scenario runs, in the
# same shell; the scenario runs as root with cwd /out (the 9p share that reaches the host).
#   OUT=/out                 results for the host (anything written here comes back)
#   IN=/in                   files passed with `scripts/vm/run --file`
#   REEL_SOCKET              control socket of reeld_start's daemon
# Run under `set -e`: a failing command fails the scenario (exit status != 0).
set -e
OUT=/out
IN=/in
export REEL_SOCKET=/run/reel/reeld.sock
mkdir -p /run/reel

log() { echo "[scenario $(cut -d' ' -f1 /proc/uptime)] $*"; }

# wait_for PATH [SECONDS]: until PATH exists (a device node, a socket).
wait_for() {
    _n=$(( ${2:-10} * 10 ))
    while [ ! -e "$1" ]; do
        _n=$((_n - 1)); [ $_n -gt 0 ] || { log "timed out waiting for $1"; return 1; }
        sleep 0.1
    done
}

# copy_over SRC DST: copies the tree SRC over DST (cp -a), replacing what DST already has.
# busybox cp will not replace a file or link that exists ("File exists"), so each one is removed
# first: the systemd scenario's udev goes over a host root that may or may not have udev.
copy_over() {
    (cd "$1/" && find . ! -type d) | while IFS= read -r _f; do rm -f "$2/$_f"; done
    cp -a "$1/." "$2/"
}

# reeld_start ARGS...: start reeld in the background (log in $OUT/reeld.log, recordings in
# $OUT unless ARGS name another --output-dir) and wait until it answers `reelctl status`.
reeld_start() {
    reeld --socket "$REEL_SOCKET" --output-dir "$OUT" "$@" >>"$OUT/reeld.log" 2>&1 &
    REELD_PID=$!
    _n=200
    until reelctl status >/dev/null 2>&1; do
        kill -0 "$REELD_PID" 2>/dev/null || { log "reeld exited during startup"; tail -20 "$OUT/reeld.log"; return 1; }
        _n=$((_n - 1)); [ $_n -gt 0 ] || { log "reeld did not answer within 20 s"; return 1; }
        sleep 0.1
    done
    log "reeld ready (pid $REELD_PID)"
}

# reeld_stop: SIGTERM and wait (reeld finishes any recording on SIGTERM).
reeld_stop() {
    [ -n "${REELD_PID:-}" ] || return 0
    kill -TERM "$REELD_PID" 2>/dev/null || true
    _rc=0; wait "$REELD_PID" || _rc=$?
    log "reeld exited with status $_rc"; REELD_PID=
    return $_rc
}

# ctl ARGS...: reelctl with its command line and output in the scenario log.
ctl() {
    log "reelctl $*"
    reelctl "$@"
}

# now: CLOCK_MONOTONIC in seconds, microsecond resolution (busybox date has no %N; the
# kernel's /proc/timer_list starts with 'now at NS nsecs', read on the monotonic clock).
now() { awk '/^now at /{printf "%.6f\n", $3 / 1e9; exit}' /proc/timer_list; }

# at T0 DT: the instant DT seconds after T0 (both in now() seconds).
at() { echo "$1 $2" | awk '{printf "%.6f\n", $1 + $2}'; }

# timed NAME ARGS...: run `ctl ARGS...`, append 'NAME T0 T1 RC' to $OUT/times.txt (T0/T1
# bracket the call, so the host knows when it acted within (T1-T0)/2), print its output.
timed() {
    _name=$1; shift
    _t0=$(now); _rc=0; ctl "$@" || _rc=$?; _t1=$(now)
    echo "$_name $_t0 $_t1 $_rc" >> "$OUT/times.txt"
    return $_rc
}

# sleep_until T: sleep until now() reaches T (a value of now()).
sleep_until() {
    _d=$(echo "$1 $(now)" | awk '{d = $1 - $2; print (d > 0 ? d : 0)}')
    sleep "$_d"
}

# --- Real-driver capture scenarios (vivid + snd-aloop) ---
# wait_state STATE SECONDS: until reeld's state is STATE, read from its event stream: subscribed
# first, then the current state read once, so no change is missed. (It polled `reelctl status`
# every 0.1 s: under emulation each reelctl start costs ~0.5 s of a vCPU, which the recording it
# waited on then lacked.) SECONDS bounds the wait for each line of the stream.
wait_state() {
    _fifo=/tmp/wait_state.$$; rm -f "$_fifo"; mkfifo "$_fifo"
    reelctl events > "$_fifo" 2>>"$OUT/wait_state.log" &
    _evp=$!
    _rc=1
    while IFS= read -r -t "$2" _l; do
        case $_l in
            *'"subscribed":true'*) reelctl status --json | grep -q "\"state\":\"$1\"" && { _rc=0; break; } ;;
            *'"event":"state","state":"'"$1"'"'*) _rc=0; break ;;
        esac
    done < "$_fifo"
    kill "$_evp" 2>/dev/null || true; wait "$_evp" 2>/dev/null || true; rm -f "$_fifo"
    [ $_rc = 0 ] || { log "reeld did not reach state $1 within $2 s"; reelctl status --json || true; return 1; }
}
# wait_standby STANDBY SECONDS: until reelctl status says standby is STANDBY (warm, failed).
wait_standby() {
    _n=$(( $2 * 10 ))
    until reelctl status --json | grep -q "\"standby\":\"$1\""; do
        _n=$((_n - 1)); [ $_n -gt 0 ] || { log "standby did not become $1 within $2 s"; reelctl status --json; return 1; }
        sleep 0.1
    done
}
CAM=/dev/video0 MIC=hw:Loopback,1,0 SPEAKER=hw:Loopback,0,0
# capture_setup: recordings go to the guest's tmpfs (a capture box's local disk), not through
# 9p, whose synchronous writes under emulation stall the pipeline; collect copies them to /out.
capture_setup() {
    PRESET=${PRESET:-ultrafast}
    REC=/tmp/rec
    mkdir -p $REC
}
collect() { cp $REC/*.mp4* "$OUT"/ 2>/dev/null || true; }
# stop_json LABEL NAME: a timed `reelctl stop --json` (LABEL in times.txt), its JSON reply in
# $OUT/NAME.json.
stop_json() {
    timed "$1" stop --json > "$OUT/$2.out"
    grep '^{' "$OUT/$2.out" > "$OUT/$2.json"
    cat "$OUT/$2.json"
}
# The end of a capture scenario: the player, reeld; then the recordings to $OUT.
finish_capture() {
    kill $APLAY_PID 2>/dev/null || true
    reeld_stop
    collect
}
# record_from_devices NAME SIZE FPS [REELD ARGS...]: the played signal, reeld on the camera and
# the loopback (yuyv, $PRESET, plus ARGS), and recording NAME started; T0: when the start was
# sent (times.txt 'start'), T1: when its reply came (the recording runs from between the two; under
# TCG a cold start's reply can take 2 s, so a fault meant to hit N s into the recording is timed from T1).
record_from_devices() {
    _name=$1 _size=$2 _fps=$3; shift 3
    play
    reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size "$_size" --fps "$_fps" --pixel-format yuyv --preset $PRESET "$@"
    timed start start --name "$_name"
    T0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
    T1=$(awk '$1 == "start" {print $3}' "$OUT/times.txt")
}
# record_again NAME: after a device came back, a new recording NAME (the start may race the
# device's re-registration: retried with backoff, 'start2' in times.txt), 3 s of it, then stop
# (its reply in $OUT/stop-after.json) and finish_capture.
record_again() {
    _n=0
    until timed start2 start --name "$1"; do
        _n=$((_n + 1)); [ $_n -lt 5 ] || return 1
        sleep $_n
    done
    _t1=$(awk '$1 == "start2" && $4 == 0 {print $2}' "$OUT/times.txt")
    sleep_until "$(at "$_t1" 3.0)"
    stop_json stop stop-after
    finish_capture
}
# The usual end: stop (its reply in $OUT/stop.json), then finish_capture.
stop_and_collect() {
    stop_json stop stop
    finish_capture
}
# play: the host-made signal (/in/steps.wav, S16 48 kHz mono) into the loopback, in the background.
play() {
    echo "play $(now) $(now) 0" >> "$OUT/times.txt"
    aplay -q -D "$SPEAKER" /in/steps.wav &
    APLAY_PID=$!
}
# disk_mount DIR: mount the disk `run --disk IMG` attached (/dev/vda, ext4, made on the host) on
# DIR, with the kernel's defaults (data=ordered, 5 s journal commit, delayed allocation).
disk_mount() {
    modprobe virtio_blk
    modprobe ext4
    wait_for /dev/vda 10
    mkdir -p "$1"
    mount -t ext4 /dev/vda "$1"
    log "mounted: $(grep '^/dev/vda ' /proc/mounts)"
}
# power_cut: note the instant in $OUT/times.txt ('cut T T 0', on the 9p share, so it reaches the
# host) and print the marker the host's `run --kill-on REEL-POWER-CUT` waits for; the host then
# SIGKILLs the VM. Never returns.
power_cut() {
    _t=$(now)
    echo "cut $_t $_t 0" >> "$OUT/times.txt"
    echo "REEL-POWER-CUT at $_t" > /dev/console
    while :; do sleep 1; done
}
