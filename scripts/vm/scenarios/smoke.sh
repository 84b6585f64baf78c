# The bed itself: modules, device nodes, tools, the share. No reeld needed.
log "kernel $(uname -r)"
lsmod | grep -E '^(vivid|snd_aloop)' 
ls -l /dev/video* /dev/snd/
v4l2-ctl -d /dev/video0 --info
aplay -l
arecord -l
echo hello > $OUT/hello.txt
