# A sound card whose clock is off (issue 5): snd-aloop's 'PCM Rate Shift 100000' = SHIFT on the
# cable from hw:Loopback,0,0 to hw:Loopback,1,0. The control is per cable, named by the cable's
# capture device: device=1 (the default, device=0, shifts the other cable, 1,0 -> 0,0). Both ends
# of the cable then run at 100000/SHIFT of the nominal rate: 100030 makes the card 300 ppm *slow*
# against CLOCK_MONOTONIC (not fast: snd-aloop divides the position by the shift; cardpos.txt
# measures it), like a card with a slow crystal.
# The steps signal plays through it while reeld records camera + loopback for RECORD_S seconds;
# DRIFT_LOCK=0 adds --no-drift-lock.
capture_setup
amixer -c Loopback cset "iface=PCM,name=PCM Rate Shift 100000,device=1,subdevice=0" "${SHIFT:-100030}"
play
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC --size 320x180 --fps 30 --pixel-format yuyv --sample-rate 48000 --channels 1 --preset $PRESET $( [ "${DRIFT_LOCK:-1}" = 0 ] && echo --no-drift-lock )
timed start start --name rateshift
t0=$(awk '$1 == "start" {print $3}' "$OUT/times.txt")
grep -A30 'Cable 0 substream 0' /proc/asound/Loopback/cable#0 | grep -E 'Playback|Capture|rate_shift' | tee "$OUT/cable0.txt"
# The card's own clock against CLOCK_MONOTONIC, independently of reeld: its capture position
# (hw_ptr, frames) every 2 s, 'T0 T1 HW_PTR' (T0/T1 bracket the read) in cardpos.txt.
# One awk reads the clock, the position, the clock: the bracket is a few ms, where two calls of
# now() around a separate reader took 20-60 ms under emulation.
cardpos() {
    awk 'function mono(  l, f) { f = "/proc/timer_list"
             while ((getline l < f) > 0) if (l ~ /^now at /) { split(l, w, " "); break }
             close(f); return w[3] / 1e9 }
         BEGIN { s = "/proc/asound/Loopback/pcm1c/sub0/status"; a = mono()
             while ((getline l < s) > 0) if (l ~ /^hw_ptr/) { split(l, v, " "); p = v[3] }
             close(s); b = mono(); printf "%.6f %.6f %s\n", a, b, p }' >> "$OUT/cardpos.txt"
}
cardpos
i=2
while [ $i -lt "${RECORD_S:-60}" ]; do sleep_until "$(at "$t0" $i)"; cardpos; i=$((i + 2)); done
sleep_until "$(at "$t0" "${RECORD_S:-60}")"
cardpos
stop_and_collect
