# Host-side helpers shared by scripts/vm/prepare and scripts/vm/run (sourced, bash).

VM_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VM_CACHE=${VM_CACHE:-$VM_REPO/.build/vm}
# Debian packages the bed needs on the host (tools copied into the guest come from them;
# e2fsprogs: the host makes and checks the disk images of `run --disk`).
VM_DEB_PACKAGES="qemu-system-x86 busybox-static v4l-utils alsa-utils kmod cpio e2fsprogs dmsetup"

vm_log() { printf '[vm] %s\n' "$*" >&2; }
vm_die() { printf '[vm] error: %s\n' "$*" >&2; exit 1; }

# vm_copy_file ROOT PATH: copy PATH (following symlinks) into ROOT at its real path, and
# make PATH's own name (in its real directory) a symlink to it when the names differ.
vm_copy_file() {
    local root=$1 path=$2 real dir name
    real=$(readlink -f "$path") || vm_die "cannot resolve $path"
    dir=$(readlink -f "$(dirname "$path")"); name=$(basename "$path")
    # already in the base initramfs (run builds an overlay on top of it): nothing to do
    if [ -n "${VM_BASE_ROOT:-}" ] && [ -e "$VM_BASE_ROOT$real" ] && [ -e "$VM_BASE_ROOT$dir/$name" ]; then return 0; fi
    [ -e "$root$real" ] || { mkdir -p "$root$(dirname "$real")"; cp -p "$real" "$root$real"; }
    if [ "$dir/$name" != "$real" ] && [ ! -e "$root$dir/$name" ] && [ ! -L "$root$dir/$name" ]; then
        mkdir -p "$root$dir"; ln -s "$real" "$root$dir/$name"
    fi
}

# vm_copy_bin ROOT BIN...: copy executables and every shared library ldd names (and the
# dynamic loader) into ROOT. Files already in ROOT or in $VM_BASE_ROOT are skipped.
vm_copy_bin() {
    local root=$1; shift
    local bin
    for bin in "$@"; do
        [ -x "$bin" ] || vm_die "not an executable: $bin"
        vm_copy_file "$root" "$bin"
        vm_copy_libs "$root" "$bin"
    done
}

# vm_copy_libs ROOT BIN...: only the libraries (and the loader) of BIN.
vm_copy_libs() {
    local root=$1; shift
    local bin lib
    for bin in "$@"; do
        # ldd prints 'name => /path (addr)' and '/lib64/ld-linux-x86-64.so.2 (addr)';
        # a static binary prints 'not a dynamic executable' (exit 1): nothing to copy
        ldd "$bin" 2>/dev/null | grep -q 'not found' && vm_die "ldd: missing library for $bin: $(ldd "$bin" | grep 'not found')"
        for lib in $(ldd "$bin" 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}'); do
            vm_copy_file "$root" "$lib"
        done
    done
}

# vm_cpio DIR OUT: an uncompressed newc archive of DIR, every file owned by root.
vm_cpio() {
    (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) > "$2"
}
