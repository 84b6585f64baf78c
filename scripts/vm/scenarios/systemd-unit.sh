# reeld under a real systemd (PID 1), installed the way README's "Install on a capture box"
# says. Run with `scripts/vm/run --host-root`: this part (busybox, before systemd) mounts the
# host's root read-only over 9p with a tmpfs overlay on /newroot, adds a boot target whose only
# job is scripts/vm/guest/systemd-inside.sh, and asks init to switch_root to the host's
# /lib/systemd/systemd. vivid and snd-aloop are loaded already (modules.conf); udev, started
# by systemd, gives their nodes the video and audio groups as on a real box (the host's image
# may lack udev: scripts/vm/prepare unpacks Debian's package for the guest).
# The test proper runs inside (systemd-inside.sh); Tests/vm/test_systemd_vm.py reads /out.
# SYSTEMD_INSIDE=NAME.sh (scripts/vm/run --env) runs scripts/vm/guest/NAME.sh instead, and
# VM_INSIDE_NEXT=NAME.sh runs that one after it in the same boot: the tier runs
# systemd-inside.sh then upload-inside.sh (the upload units, Tests/vm/test_upload_vm.py) so.
[ -n "${VM_HOST_REPO:-}" ] || { log "no VM_HOST_REPO: run with scripts/vm/run --host-root"; exit 2; }
modprobe overlay
modprobe autofs4 || true
mkdir -p /hostroot /ovl /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro hostroot /hostroot
mount -t tmpfs -o mode=0755,size=1200m tmpfs /ovl
mkdir -p /ovl/upper /ovl/work
mount -t overlay overlay -o lowerdir=/hostroot,upperdir=/ovl/upper,workdir=/ovl/work /newroot
R=/newroot
[ -x $R/lib/systemd/systemd ] || { log "the host has no /lib/systemd/systemd"; exit 2; }
inside=$VM_HOST_REPO/scripts/vm/guest/${SYSTEMD_INSIDE:-systemd-inside.sh}
[ -f "$R$inside" ] || { log "cannot see $inside through the host root"; exit 2; }

# udev, as on any capture box (the host image may lack it: scripts/vm/prepare unpacks Debian's
# package into its cache). Its rules give /dev/video* group video and /dev/snd/* group audio.
# A host that has udev installed already has these files: copy_over replaces them.
udev=$R$VM_HOST_CACHE/udev
[ -x "$udev/usr/bin/udevadm" ] || { log "no udev in $VM_HOST_CACHE/udev: run scripts/vm/prepare"; exit 2; }
copy_over "$udev" $R
rm -f $R/.done

# A boot target with only what the test needs (the host's multi-user.target would start its
# own services). Everything else comes from sysinit.target and sockets, as at any boot.
cat > $R/etc/systemd/system/reel-vm.target <<EOF
[Unit]
Description=Reel test bed: reeld under systemd
Requires=basic.target reel-vm-test.service
After=basic.target reel-vm-test.service
AllowIsolate=yes
EOF
cat > $R/etc/systemd/system/reel-vm-test.service <<EOF
[Unit]
Description=Reel test bed: install reeld and drive it ($(basename $inside))
After=basic.target systemd-udev-trigger.service
Wants=systemd-udev-trigger.service

# Whatever fails before systemd-inside.sh can report powers the guest off at once (the host
# then reports "no exit status" with the console) instead of idling until the host's timeout.
FailureAction=poweroff-force

[Service]
Type=oneshot
Environment=VM_HOST_REPO=$VM_HOST_REPO VM_HOST_BIN=$VM_HOST_BIN VM_INSIDE_NEXT=${VM_INSIDE_NEXT:-}
ExecStart=/bin/bash $inside
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
EOF
# The checkout under test may live in the host's /tmp (CI clones there): keep the boot from
# emptying /tmp (Debian's tmpfiles.d/tmp.conf says 'D /tmp', cleaned at every boot).
mkdir -p $R/etc/tmpfiles.d && echo "d /tmp 1777 root root -" > $R/etc/tmpfiles.d/tmp.conf
# The host's machine id and hostname are not this guest's.
: > $R/etc/machine-id
echo reel-vm > $R/etc/hostname
log "host root on /newroot (overlay); handing over to systemd"
echo "--unit=reel-vm.target --log-level=notice --show-status=yes" > /tmp/switch-root
