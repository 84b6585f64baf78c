# `reeld record` on the real drivers (issue 22): SIGTERM 3 s into a --duration 3600 one-shot
# recording of the vivid camera and the loopback finishes the file at the next frame, as `stop`
# does for the daemon. times.txt 'sigterm T1 T2 RC': the signal sent at T1, reeld record's exit
# (status RC) seen at T2. A reeld record that ignored it is killed after 60 s (RC 137).
capture_setup

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
collect
