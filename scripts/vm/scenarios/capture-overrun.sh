# Real drivers: reeld is frozen (SIGSTOP) for 1.5 s mid-recording, longer than the ALSA
# buffer (0.5 s), so the capture overruns. The source must recover (snd_pcm_recover), skip the
# lost span in its sample index so the pipeline fills it with silence, and keep sync: the
# played signal must sit at the same offset before and after the gap.
capture_setup

play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 640x360 --fps 30 --pixel-format yuyv --preset $PRESET
timed start start --name overrun
t0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
sleep_until "$(at "$t0" 2.5)"
echo "freeze $(now) $(now) 0" >> "$OUT/times.txt"
kill -STOP $REELD_PID
sleep 1.5   # the fault being injected: reeld frozen, the devices keep capturing
kill -CONT $REELD_PID
echo "thaw $(now) $(now) 0" >> "$OUT/times.txt"
sleep_until "$(at "$t0" 7.0)"
stop_and_collect
grep -E 'overrun|lost by the camera' "$OUT/reeld.log"
