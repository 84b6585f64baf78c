# The microphone is pulled out mid-recording. snd-aloop cannot be unplugged, but unbinding its
# platform device does what a USB sound card's disconnect does (snd_card_disconnect: every open
# PCM fails with ENODEV; the card is freed once the last file on it is closed, so the unbind
# itself waits until reeld and aplay have let go). The file must be finished and playable,
# reeld must keep answering with the device named in lastError, and once the card is back
# (bind again) a new recording works.
capture_setup
dev=$(ls /sys/bus/platform/drivers/snd_aloop/ | grep '^snd_aloop' | head -1)
[ -n "$dev" ] || { log "no snd_aloop platform device"; exit 1; }
record_from_devices before 640x360 30
sleep_until "$(at "$T1" 4.0)"
log "unplugging the sound card ($dev)"
_u0=$(now)
echo "$dev" > /sys/bus/platform/drivers/snd_aloop/unbind
echo "unplug $_u0 $(now) 0" >> "$OUT/times.txt"
log "card gone: $(ls /dev/snd 2>&1 | tr '\n' ' ')"
wait_state idle 20
reelctl status --json | grep '^{' > "$OUT/status-after-unplug.json"
cat "$OUT/status-after-unplug.json"
reelctl devices --json | grep '^{' > "$OUT/devices-unplugged.json" || true

log "plugging it back"
echo "$dev" > /sys/bus/platform/drivers/snd_aloop/bind
wait_for /dev/snd/pcmC0D1c 10
play
record_again after
