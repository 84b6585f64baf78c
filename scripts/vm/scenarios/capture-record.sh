# Real drivers: vivid webcam 640x360 YUYV 30 fps + snd-aloop 48 kHz, start, two pauses of
# different lengths (the second followed by a take that is undone), stop. The host (Tests/vm/test_capture_vm.py) checks durations against
# the segments, the played pitch steps against the pauses, and decodes with -xerror.
# Then, on the same boot, `reeld record` on the same devices ended by SIGTERM (issue 22): 3 s into
# a --duration 3600 one-shot recording it finishes the file at the next frame, as `stop` does for
# the daemon. times.txt 'sigterm T1 T2 RC': the signal sent at T1, reeld record's exit (status RC)
# seen at T2. A reeld record that ignored it is killed after 60 s (RC 137).
# Last, the sound of the joins (issue 23): /in/joins.wav (three channels: a 347 Hz tone, pink
# noise, espeak-ng's speech) into the loopback, recorded in three channels: joins.mp4 with a pause/resume, a take undone while
# recording, a take undone while paused and a stop while paused; joins-cap.mp4 with a pause/resume
# and the length cap ending its second take. times.txt names these j*.
capture_setup

play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 640x360 --fps 30 --pixel-format yuyv --sample-rate 48000 --channels 1 --preset $PRESET
timed start start --name record
t0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
sleep_until "$(at "$t0" 3.0)";  timed pause pause
sleep_until "$(at "$t0" 4.0)";  timed resume resume
sleep_until "$(at "$t0" 6.5)";  timed pause pause
sleep_until "$(at "$t0" 8.5)";  timed resume-undone resume --label undone
# A retake: the take begun at 8.5 is undone while recording (the recording pauses), and the
# next resume continues right after the second take: the host finds none of 8.5..10.0.
sleep_until "$(at "$t0" 10.0)"; timed undo undo
sleep_until "$(at "$t0" 10.6)"; timed resume resume
sleep_until "$(at "$t0" 12.6)"; reelctl status --json > "$OUT/status-during.json"
stop_and_collect

play
reeld record --video $CAM --audio alsa:$MIC --size 640x360 --fps 30 --pixel-format yuyv --preset $PRESET \
    --sample-rate 48000 --channels 1 --duration 3600 --output $REC/signal.mp4 >>"$OUT/reeld.log" 2>&1 &
PID=$!
_n=300
until grep -q 'recording .*signal.mp4.part' "$OUT/reeld.log"; do
    kill -0 $PID 2>/dev/null || { log "reeld record exited before it recorded"; tail -20 "$OUT/reeld.log"; exit 1; }
    _n=$((_n - 1)); [ $_n -gt 0 ] || { log "reeld record did not start within 30 s"; exit 1; }
    sleep 0.1
done
t0=$(now)
sleep_until "$(at "$t0" 3.0)"
( sleep 60; kill -KILL $PID 2>/dev/null ) &
GUARD=$!
t1=$(now)
kill -TERM $PID
rc=0; wait $PID || rc=$?
t2=$(now)
kill $GUARD 2>/dev/null || true
echo "sigterm $t1 $t2 $rc" >> "$OUT/times.txt"
log "reeld record exited with status $rc $(echo "$t2 $t1" | awk '{printf "%.2f", $1 - $2}') s after SIGTERM"
kill $APLAY_PID 2>/dev/null || true
# The loopback's playback side is free again only once that player has exited: a player started
# while it still held it got EBUSY and the joins were recorded silent (once in two runs).
wait $APLAY_PID 2>/dev/null || true

# play NAME: start the joins' source into the loopback for the part NAME; end_play NAME: stop it,
# writing 'player-NAME T T RAN_OUT' to times.txt: 1 if it had already ended (a zombie or gone)
# before the part was over (the test names that cause), 0 if it was still playing. Each part gets
# its own player from the source's start: one player for both parts ran out during the cap under a
# slow CI host, and the cap's recording was silent. (aplay exits 0 on SIGTERM too, so its status
# cannot tell.)
play() {
    echo "play-$1 $(now) $(now) 0" >> "$OUT/times.txt"
    aplay -q -D "$SPEAKER" "$IN/joins.wav" 2>>"$OUT/aplay-$1.log" &
    APLAY_PID=$!
}
end_play() {
    _state=$(cut -d' ' -f3 "/proc/$APLAY_PID/stat" 2>/dev/null || echo gone)
    _out=0; case $_state in Z|gone) _out=1 ;; esac
    kill $APLAY_PID 2>/dev/null || true; wait $APLAY_PID 2>/dev/null || true
    echo "player-$1 $(now) $(now) $_out" >> "$OUT/times.txt"
}
play joins
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 320x180 --fps 10 --pixel-format yuyv --preset $PRESET \
    --sample-rate 48000 --channels 3 --audio-bitrate 288000
# Each step waits for the previous reply, then this long (reelctl takes 0.4-4 s under TCG on a
# busy host: a schedule in absolute times fell behind and let the cap end the recording early).
step() { sleep "$1"; shift; timed "$@"; }
timed jstart start --name joins
step 1.0 jpause pause
step 0.5 jresume resume --label b
step 1.0 jpause pause
step 0.5 jresume resume --label undone-recording
step 1.0 jundo undo
step 0.5 jresume resume --label c
step 1.0 jpause pause
step 0.5 jresume resume --label undone-paused
step 1.0 jpause pause
step 0.5 jundo undo
step 0.5 jresume resume --label d
step 1.0 jpause pause
step 0.3 jstop stop --json > "$OUT/joins-stop.out"
grep '^{' "$OUT/joins-stop.out" > "$OUT/joins-status.json"
end_play joins
play joins-cap
# The cap: take 1 lasts the pause's round trip, the cap ends the second take.
timed jstart start --name joins-cap --max-duration 5
timed jpause pause
step 0.3 jresume resume --label capped
wait_state idle 30
reelctl status --json > "$OUT/joins-cap-status.json"
end_play joins-cap
reeld_stop
collect
