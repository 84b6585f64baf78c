# Real drivers: discovery lists vivid and the Loopback card; modes the camera does not
# offer are refused at start with the listing error; a missing device names the fix.
capture_setup

reeld --list-devices
reeld --list-devices --json > "$OUT/list-devices.json"
try_start() {  # NAME REELD-ARGS...: start must fail; its stderr goes to NAME.err
    _name=$1; shift
    reeld_start --output-dir $REC --audio none "$@"
    _rc=0; reelctl start --name "$_name" 2> "$OUT/$_name.err" || _rc=$?
    echo $_rc > "$OUT/$_name.rc"
    cat "$OUT/$_name.err"
    reelctl status --json > "$OUT/$_name.status.json"
    reeld_stop
}
try_start size --video $CAM --size 800x600 --fps 30 --pixel-format yuyv
try_start rate --video $CAM --size 1280x720 --fps 30 --pixel-format yuyv
try_start format --video $CAM --size 640x360 --fps 30 --pixel-format mjpeg
try_start nodev --video /dev/video7 --size 640x360 --fps 30
reeld_start --output-dir $REC --video $CAM --audio alsa:$MIC
ctl devices
reelctl devices --json > "$OUT/devices.json"
reeld_stop
collect
