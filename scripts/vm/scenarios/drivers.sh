# Driver-level checks, no reeld: what vivid and snd-aloop offer inside the guest, that they
# stream, that vivid's error injection works, and that a tone played into the loopback comes
# back. The host (Tests/vm/test_drivers.py) judges the files; this script only collects them
# and fails only when a tool cannot run at all.
# Needs: --file tone.wav (played with aplay).
DEV=/dev/video0

# --- vivid: formats, controls, a short capture, dropped buffers, disconnect
v4l2-ctl -d $DEV --info > $OUT/v4l2-info.txt
v4l2-ctl -d $DEV --list-formats-ext > $OUT/v4l2-formats.txt
v4l2-ctl -d $DEV --list-ctrls-menus > $OUT/v4l2-ctrls.txt
v4l2-ctl -d $DEV --set-fmt-video=width=320,height=180,pixelformat=YUYV --set-parm=30
v4l2-ctl -d $DEV --get-fmt-video --get-parm > $OUT/v4l2-fmt.txt
# 30 frames into a file; --verbose prints each buffer's sequence number and timestamp
v4l2-ctl -d $DEV --verbose --stream-mmap=4 --stream-count=30 --stream-to=$OUT/frames.yuyv > $OUT/stream.txt 2>&1
# 10 % of the buffers dropped by the driver: the sequence numbers jump
v4l2-ctl -d $DEV --set-ctrl percentage_of_dropped_buffers=10
v4l2-ctl -d $DEV --verbose --stream-mmap=4 --stream-count=100 --stream-to=/dev/null > $OUT/stream-drops.txt 2>&1
v4l2-ctl -d $DEV --set-ctrl percentage_of_dropped_buffers=0
# disconnect while a streamer holds the device: the streamer gets an error, the node is
# gone (opening it fails); vivid re-registers it when the last open handle is closed.
v4l2-ctl -d $DEV --verbose --stream-mmap=4 --stream-count=100000 --stream-to=/dev/null \
    > $OUT/stream-disconnect.txt 2>&1 &
streamer=$!
exec 3< $DEV          # this shell holds a handle too, so the node stays gone until closed
sleep 1
v4l2-ctl -d $DEV --set-ctrl disconnect=1 > $OUT/disconnect.txt 2>&1 || echo "set-ctrl status $?" >> $OUT/disconnect.txt
sleep 0.5
rc=0; v4l2-ctl -d $DEV --info > $OUT/during-disconnect.txt 2>&1 || rc=$?
echo "$rc" > $OUT/during-disconnect.rc
rc=0; wait $streamer || rc=$?
echo "$rc" > $OUT/stream-disconnect.rc
exec 3<&-             # the last handle: vivid re-registers the device
wait_for $DEV 10
v4l2-ctl -d $DEV --info > $OUT/after-reconnect.txt
# unloading and reloading the module brings a fresh device too
modprobe -r vivid && modprobe vivid n_devs=1 node_types=0x1 input_types=0x0
wait_for $DEV 10
v4l2-ctl -d $DEV --info > $OUT/after-reload.txt

# --- snd-aloop: capture hw:Loopback,1,0 while the tone plays into hw:Loopback,0,0
aplay -l > $OUT/aplay-l.txt
arecord -l > $OUT/arecord-l.txt
set -- $(wc -c < $IN/tone.wav)
secs=$(( $1 / 96000 + 2 ))          # 48 kHz S16 mono: 96000 bytes a second, 2 s spare
arecord -q -D hw:Loopback,1,0 -f S16_LE -r 48000 -c 1 -d $secs $OUT/loop.wav &
rec=$!
sleep 0.5
aplay -q -D hw:Loopback,0,0 $IN/tone.wav
wait $rec
log "done"
