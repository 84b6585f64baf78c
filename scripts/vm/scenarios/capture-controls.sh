# Camera controls on vivid (Tests/vm/test_controls_vm.py): brightness, contrast, saturation
# and hue from [camera.controls], an idle `reelctl set` that must win over the config at the
# next open, then live `reelctl set`s while recording, each held PHASE seconds, so the host can
# measure in the decoded frames that the picture changed as asked; errors for an out-of-range
# value and an unknown name (while recording); then a config naming an unknown control: `start`
# fails naming the file and line while `controls` still works.
capture_setup
PHASE=${PHASE:-5}
cat > /tmp/controls.toml <<'TOML'
[camera.controls]
brightness = 100
contrast = 128
saturation = 128
hue = 0
TOML
reeld_start --config /tmp/controls.toml --output-dir $REC --video $CAM --audio none --size 320x180 --fps 10 --pixel-format yuyv --preset $PRESET
reelctl controls --json > "$OUT/controls-idle.json"
ctl controls > "$OUT/controls-idle.txt"
reelctl set hue=20 > "$OUT/set-idle.txt"
timed start start --name controls
t0=$(awk '$1 == "start" {print $2}' "$OUT/times.txt")
reelctl controls --json > "$OUT/controls-recording.json"
sleep_until "$(at "$t0" "$PHASE")"
timed bright set brightness=160
sleep_until "$(at "$t0" "$((PHASE * 2))")"
timed desat set saturation=0
sleep_until "$(at "$t0" "$((PHASE * 3))")"
timed flat set contrast=40
# Refused while recording: the recording must go on untouched.
_rc=0; reelctl set brightness=999 2> "$OUT/range.err" || _rc=$?; echo $_rc > "$OUT/range.rc"
_rc=0; reelctl set brightnes=1 2> "$OUT/unknown.err" || _rc=$?; echo $_rc > "$OUT/unknown.rc"
cat "$OUT/range.err" "$OUT/unknown.err"
sleep_until "$(at "$t0" "$((PHASE * 4))")"
timed reset set brightness=128 contrast=128 saturation=128 hue=0
sleep_until "$(at "$t0" "$((PHASE * 5))")"
reelctl status --json > "$OUT/status-during.json"
stop_json stop stop
reeld_stop
collect

# An unknown control in the config: reeld serves, `start` fails naming it, `controls` works.
printf '[camera.controls]\nbrightnes = 1\n' > /tmp/bad.toml
reeld_start --config /tmp/bad.toml --output-dir $REC --video $CAM --audio none --size 320x180 --fps 10 --pixel-format yuyv
_rc=0; reelctl start --name bad 2> "$OUT/badconfig.err" || _rc=$?; echo $_rc > "$OUT/badconfig.rc"
cat "$OUT/badconfig.err"
ctl controls > "$OUT/controls-badconfig.txt"
reelctl status --json > "$OUT/status-badconfig.json"
reeld_stop
