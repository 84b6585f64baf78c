# reeld inside the guest records its synthetic sources with two pauses; the host checks the
# file with scripts/reel_verify.py against the call times in times.txt.
# Env (scripts/vm/run --env): SIZE (320x180), FPS (10), PRESET (superfast: the cheapest
# preset that still gives High profile), RATE (48000). Under TCG the guest is slow (AAC and
# the synthetic audio are float-heavy; x264 runs at a fraction of native speed).
SIZE=${SIZE:-320x180} FPS=${FPS:-10} PRESET=${PRESET:-superfast} RATE=${RATE:-48000}
reeld_start --video test --audio test --size "$SIZE" --fps "$FPS" --preset "$PRESET" --sample-rate "$RATE"
timed start start --name synth
t0=$(awk '{print $2}' "$OUT/times.txt")
sleep_until "$(at "$t0" 2.0)";  timed pause pause
sleep_until "$(at "$t0" 3.0)";  timed resume resume
sleep_until "$(at "$t0" 4.5)";  timed pause pause
sleep_until "$(at "$t0" 6.0)";  timed resume resume
sleep_until "$(at "$t0" 7.0)";  reelctl status --json > "$OUT/status-during.json"
sleep_until "$(at "$t0" 8.0)";  timed stop stop
reelctl status --json > "$OUT/status-after.json"
reeld_stop
