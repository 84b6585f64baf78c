# Real drivers: vivid webcam 640x360 YUYV 30 fps + snd-aloop 48 kHz, start, two pauses of
# different lengths (the second followed by a take that is undone), stop. The host (Tests/vm/test_capture_vm.py) checks durations against
# the segments, the played pitch steps against the pauses, and decodes with -xerror.
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
