# Reel: make demo | make test | make build | make install (later) | make clean
# Works on a fresh Debian 12 machine: missing Debian packages are installed with apt-get.
SHELL := /bin/bash
.DEFAULT_GOAL := build
.PHONY: deps build build-debug test unit e2e vm vm-prepare demo clean

PYTHON ?= /usr/bin/python3
SWIFT ?= swift
RELEASE_BIN := $(CURDIR)/.build/release
DEB_PACKAGES := pkg-config libx264-dev libavformat-dev libavcodec-dev libavutil-dev libswresample-dev \
                libyuv-dev libv4l-dev libasound2-dev libturbojpeg0-dev v4l-utils alsa-utils \
                ffmpeg python3 python3-numpy python3-pytest
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Installs only what is missing (dpkg-query), so a second run costs nothing.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install the Swift 6 toolchain (swift.org) and put it on PATH"; exit 1; }

build: deps
	$(SWIFT) build -c release --product reeld
	$(SWIFT) build -c release --product reelctl

build-debug: deps
	$(SWIFT) build --build-tests

unit: build-debug
	$(SWIFT) test --skip-build --disable-swift-testing

e2e: build
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) -m pytest -q -p no:cacheprovider Tests/e2e

# The real-driver tier: Debian's kernel under QEMU (TCG) with vivid and snd-aloop; reeld and
# reelctl run inside the guest (docs/TESTBED.md). vm-prepare installs its Debian packages
# (qemu-system-x86 busybox-static v4l-utils alsa-utils kmod cpio), fetches the kernel with
# apt-get download and builds the base initramfs, all cached under .build/vm/.
vm-prepare:
	scripts/vm/prepare

vm: build vm-prepare
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) -m pytest -q -p no:cacheprovider Tests/vm

# Every test: Swift unit and property tests, the end-to-end tests on the real binaries, then
# the same binaries on real kernel drivers inside a VM.
test: unit e2e vm

demo: build
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) scripts/demo.py

clean:
	rm -rf .build demo-out
