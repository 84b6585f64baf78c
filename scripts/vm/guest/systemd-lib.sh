# Helpers for the scripts that run under systemd as PID 1 in the test-bed guest
# (systemd-inside.sh, upload-inside.sh; set up by scenarios/systemd-unit.sh), bash. Sourced
# after the caller has defined collect(), which copies its files and journal to /out.
# Facts go to $FACTS (default /out/facts.txt; KEY=VALUE) for the host's tests; a step that fails ends the test
# with its reason. end() leaves /out/exit-status and forces a power-off (qemu -no-reboot exits).
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin

log() { echo "[inside $(cut -d' ' -f1 /proc/uptime)] $*"; }
FACTS=${FACTS:-/out/facts.txt}
fact() { echo "$1=$2" >> "$FACTS"; log "fact $1=$2"; }
end() {
    collect
    log "exit status $1"
    echo "$1" > /out/exit-status
    sync
    systemctl poweroff --force --force
}
die() { log "FAILED: $*"; end 1; exit 1; }
# done_or_next: this script passed: hand the same boot to scripts/vm/guest/$VM_INSIDE_NEXT when
# one is named (one boot of systemd under TCG costs minutes), else end 0.
done_or_next() {
    collect
    if [ -n "${VM_INSIDE_NEXT:-}" ]; then
        log "handing over to $VM_INSIDE_NEXT"
        VM_INSIDE_NEXT= exec /bin/bash "$REPO/scripts/vm/guest/$VM_INSIDE_NEXT"
    fi
    end 0
}
run() { log "\$ $*"; "$@" || die "'$*' exited with status $?"; }

# wait_state UNIT STATE: until `systemctl is-active UNIT` prints STATE (60 s limit).
wait_state() {
    local n=600
    until [ "$(systemctl is-active "$1")" = "$2" ]; do
        n=$((n - 1)); [ $n -gt 0 ] || die "$1 did not become $2 within 60 s (is $(systemctl is-active "$1"))"
        sleep 0.1
    done
}
# status_field KEY: one field of `reelctl status --json`.
status_field() { reelctl status --json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
# wait_recorded SECONDS: until the current recording holds SECONDS of media (polls status; 60 s limit).
wait_recorded() {
    local want_ns=$(( $1 * 1000000000 )) n=600 got
    while :; do
        got=$(status_field recordedNs) || die "reelctl status failed while waiting for $1 s of recording"
        [ "$got" -ge "$want_ns" ] && return 0
        n=$((n - 1)); [ $n -gt 0 ] || die "the recording did not reach $1 s within 60 s (at ${got} ns)"
        sleep 0.1
    done
}
