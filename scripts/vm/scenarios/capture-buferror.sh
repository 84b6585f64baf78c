# Errored camera buffers (issue 6). vivid's button inject_v4l2_buf_flag_error makes the next
# buffer it completes come back with V4L2_BUF_FLAG_ERROR. A recording at 320x180, 10 fps, with a
# pause gets three of them before the pause and two after: each must be dropped (counted, never
# encoded), leaving its slot of the frame grid empty, and the file must decode clean with the
# recorded and paused spans right. So that the host can find the errored frames in the file, each
# press also flips vivid's picture between black and white in the same call (one
# VIDIOC_S_EXT_CTRLS, the error first): the errored frame is the last of the old picture or the
# first of the new one, so in the file an empty slot must touch every black/white change (10 fps:
# timestamp jitter under emulation cannot move a frame by a slot, as it can at 30).
# Then inject_fatal_streaming_error (vb2_queue_error: every later DQBUF fails with EIO) on a
# second recording: it must end as a playable file with lastError naming the camera, and a third
# recording must work.
capture_setup

# inject CONTROLS NAME: set vivid controls (C=V,...); 'NAME T0 T1 0' in times.txt brackets it.
inject() {
    _t0=$(now); v4l2-ctl -d $CAM --set-ctrl "$1"; _t1=$(now)
    echo "$2 $_t0 $_t1 0" >> "$OUT/times.txt"
    log "set $1"
}
BLACK=5 WHITE=6   # vivid test_pattern: 100% Black, 100% White
v4l2-ctl -d $CAM --set-ctrl test_pattern=$BLACK
last() { awk -v n="$1" '$1 == n {t = $3} END {print t}' "$OUT/times.txt"; }   # when NAME returned

play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 320x180 --fps 10 --pixel-format yuyv --preset $PRESET
timed start start --name errored
t=$(last start)
p=$WHITE
for dt in 0.5 1.1 1.7; do
    sleep_until "$(at "$t" $dt)"; inject inject_v4l2_buf_flag_error=1,test_pattern=$p inject
    p=$((BLACK + WHITE - p))
done
sleep_until "$(at "$t" 2.5)"; timed pause pause
sleep_until "$(at "$(last pause)" 1.0)"; timed resume resume
t=$(last resume)
for dt in 0.5 1.1; do
    sleep_until "$(at "$t" $dt)"; inject inject_v4l2_buf_flag_error=1,test_pattern=$p inject
    p=$((BLACK + WHITE - p))
done
sleep_until "$(at "$t" 2.5)"
stop_json stop stop

timed start2 start --name fatal
sleep_until "$(at "$(last start2)" 2.0)"
inject inject_fatal_streaming_error=1 fatal
wait_state idle 20
reelctl status --json > "$OUT/status-after-fatal.json"
cat "$OUT/status-after-fatal.json"

timed start3 start --name after
sleep_until "$(at "$(last start3)" 2.0)"
stop_json stop3 stop-after
finish_capture
grep -E 'errored|failed' "$OUT/reeld.log"
