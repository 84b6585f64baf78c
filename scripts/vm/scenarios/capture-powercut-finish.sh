# Power cut while a stopped recording is being finished (issue 12): reeld records the camera and
# the loopback onto an ext4 virtio disk (as capture-powercut.sh) in two takes (a pause at 2.5 s, a
# resume at 3.5 s), then `stop`; reeld runs with REEL_TEST_FINISH_HOLD=$HOLD (moov or mdat, test
# only), so the finisher writes that step and, before syncing it, says REEL-FINISH-HOLD and
# blocks. The power is cut there: the step's bytes may or may not be on the disk. The host
# (Tests/vm/test_faults_vm.py) takes the .part out of the image and runs reeld's start-up
# recovery on it, which must finish it into a standard MP4 with both takes' chapters.
capture_setup
disk_mount $REC
export REEL_TEST_FINISH_HOLD=${HOLD:-mdat}
record_from_devices finishcut 320x180 10 --min-free-mb 50
sleep_until "$(at "$T1" 2.5)"
timed pause pause
sleep_until "$(at "$T1" 3.5)"
timed resume resume
sleep_until "$(at "$T1" 6.5)"
_t=$(now); echo "stop $_t $_t 0" >> "$OUT/times.txt"   # sent now; never answered
ctl stop > "$OUT/stop.out" 2>&1 &
_n=300
until grep -q "REEL-FINISH-HOLD" "$OUT/reeld.log"; do
    _n=$((_n - 1)); [ $_n -gt 0 ] || { log "the finisher never reached its hold"; tail -20 "$OUT/reeld.log"; exit 1; }
    sleep 0.1
done
log "finisher holding: $(grep REEL-FINISH-HOLD "$OUT/reeld.log")"
ls -l $REC
power_cut
