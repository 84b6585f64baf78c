# Real drivers: vivid drops 10 % of its buffers (percentage_of_dropped_buffers=10). The
# output must still follow capture time (duration = the recorded span) and status must
# count the drops.
capture_setup

v4l2-ctl -d $CAM --set-ctrl percentage_of_dropped_buffers=10
play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 640x360 --fps 30 --pixel-format yuyv --preset $PRESET
timed start start --name drops
t0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
sleep_until "$(at "$t0" 6.0)"
stop_and_collect
grep 'lost by the camera' "$OUT/reeld.log"
