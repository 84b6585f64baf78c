# Reel: make demo | make test | make build | make install | make bench | make soak | make fuzz | make clean
# Works on a fresh Debian 12 machine: missing Debian packages are installed with apt-get.
SHELL := /bin/bash
.DEFAULT_GOAL := build
.PHONY: deps build build-debug build-testable test unit e2e vm e2e-run vm-run vm-prepare browser browser-run demo bench soak fuzz fuzz-build clean install install-files config/reeld.toml

PYTHON ?= /usr/bin/python3
SWIFT ?= swift
RELEASE_BIN := $(CURDIR)/.build/release
DEB_PACKAGES := pkg-config libx264-dev libavformat-dev libavcodec-dev libavutil-dev libswresample-dev \
                libyuv-dev libv4l-dev libasound2-dev libturbojpeg0-dev libsystemd-dev libcrypt-dev libevdev-dev v4l-utils alsa-utils \
                ffmpeg x264 python3 python3-numpy python3-pytest python3-pytest-xdist python3-prometheus-client systemd \
                gstreamer1.0-tools gstreamer1.0-plugins-good gstreamer1.0-libav mediainfo chromium espeak-ng \
                chromium-driver python3-selenium rclone
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
	$(SWIFT) build -c release --product reel-verify
	$(SWIFT) build -c release --product reel-web
	$(SWIFT) build -c release --product reel-button

build-debug: deps
	$(SWIFT) build --build-tests

unit: build-debug
	$(SWIFT) test --skip-build --disable-swift-testing

# `make test` compiles once: a release build with testability (@testable imports), whose reeld and
# reelctl the e2e and VM tiers then run (a debug build for XCTest plus a release build for the
# rest took 50 s more on 2 cores, and the unit tests run twice as fast optimised).
TESTABLE := -c release -Xswiftc -enable-testing
build-testable: deps
	$(SWIFT) build $(TESTABLE) --build-tests

e2e: build e2e-run
# Two tests at a time (pytest-xdist, python3-pytest-xdist): most e2e tests wait on real-time
# schedules, so two share the 2 cores well (5 min serial, under 3 in pairs). The tests marked
# serial (latencies, watchdog deadlines) then run alone.
E2E := REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) -m pytest -q -p no:cacheprovider
e2e-run:
	$(E2E) -n 2 -m 'not serial' --durations=12 Tests/e2e
	$(E2E) -m serial Tests/e2e

# The browser tier (issue 24): the booth page in Debian's headless Chromium, driven by Selenium
# (chromium-driver, python3-selenium), against the real reeld and reel-web (Tests/browser).
browser: build browser-run
browser-run:
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) -m pytest -q -p no:cacheprovider --durations=8 Tests/browser

# The real-driver tier: Debian's kernel under QEMU (TCG) with vivid and snd-aloop; reeld and
# reelctl run inside the guest (docs/TESTBED.md). vm-prepare installs its Debian packages
# (qemu-system-x86 busybox-static v4l-utils alsa-utils kmod cpio), fetches the kernel with
# apt-get download and builds the base initramfs, all cached under .build/vm/.
vm-prepare:
	scripts/vm/prepare

vm: build vm-prepare vm-run
vm-run: vm-prepare
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) -m pytest -q -p no:cacheprovider --durations=12 Tests/vm

# Every test: Swift unit and property tests, the end-to-end tests on the real binaries, then
# the same binaries on real kernel drivers inside a VM (one build for all three).
# The VM test bed is prepared (its packages downloaded, the kernel fetched, the initramfs built:
# mostly network and disk) while the compiler has the CPU, not after it.
test: deps
	@mkdir -p .build; scripts/vm/prepare > .build/vm-prepare.log 2>&1 & prep=$$!; \
	$(SWIFT) build $(TESTABLE) --build-tests; rc=$$?; \
	wait $$prep || { rc=$$?; echo "scripts/vm/prepare failed:"; cat .build/vm-prepare.log; }; exit $$rc
	$(SWIFT) test $(TESTABLE) --skip-build --disable-swift-testing
	$(MAKE) --no-print-directory e2e-run
	$(MAKE) --no-print-directory browser-run
	$(MAKE) --no-print-directory vm-run

# The shipped config file is generated from reeld's setting table (Sources/ReelConfig/Config.swift,
# SettingKey.spec); a unit test fails while it differs. Run after changing a setting.
config/reeld.toml: build
	$(RELEASE_BIN)/reeld --print-config > $@.tmp && mv $@.tmp $@

demo: build
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) scripts/demo.py

# Install layout. PREFIX=/usr/local: systemd, sysusers and tmpfiles all search
# /usr/local/lib/{systemd/system,sysusers.d,tmpfiles.d}. DESTDIR stages the tree (packaging).
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
BINDIR := $(PREFIX)/bin
UNITDIR := $(PREFIX)/lib/systemd/system
SYSUSERSDIR := $(PREFIX)/lib/sysusers.d
TMPFILESDIR := $(PREFIX)/lib/tmpfiles.d
DATADIR := $(PREFIX)/share
LIBREELDIR := $(PREFIX)/lib/reel
# Where the binaries to install are (tests point it at a debug build).
BIN_SRC ?= $(RELEASE_BIN)

install: build install-files

# Binaries, units (ExecStart= rewritten for PREFIX/SYSCONFDIR), sysusers, tmpfiles, the config
# (an existing one is kept; the new default goes next to it as reeld.toml.new), completions,
# reel-web's page files in PREFIX/share/reel/web (where reel-web looks, beside its bin/), and the
# upload units with their script in PREFIX/lib/reel and /etc/reel/upload.env (kept if present).
install-files:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
	  $(DESTDIR)$(SYSCONFDIR)/reel $(DESTDIR)$(DATADIR)/bash-completion/completions \
	  $(DESTDIR)$(DATADIR)/zsh/site-functions $(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	install -m 0755 $(BIN_SRC)/reeld $(BIN_SRC)/reelctl $(BIN_SRC)/reel-verify $(BIN_SRC)/reel-web $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/reeld|$(BINDIR)/reeld|' -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' \
	  systemd/reeld.service > $(DESTDIR)$(UNITDIR)/reeld.service
	sed -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' systemd/reeld.socket > $(DESTDIR)$(UNITDIR)/reeld.socket
	sed -e 's|/usr/local/bin/reel-web|$(BINDIR)/reel-web|' -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' \
	  systemd/reel-web.service > $(DESTDIR)$(UNITDIR)/reel-web.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/reeld.service $(DESTDIR)$(UNITDIR)/reeld.socket $(DESTDIR)$(UNITDIR)/reel-web.service
	install -d $(DESTDIR)$(DATADIR)/reel/web
	install -m 0644 Sources/ReelWeb/Web/* $(DESTDIR)$(DATADIR)/reel/web/
	install -m 0755 $(BIN_SRC)/reel-button $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/reel-button|$(BINDIR)/reel-button|' -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' \
	  systemd/reel-button@.service > $(DESTDIR)$(UNITDIR)/reel-button@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/reel-button@.service
	install -d $(DESTDIR)$(LIBREELDIR)
	sed -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' scripts/reel-upload > $(DESTDIR)$(LIBREELDIR)/reel-upload
	chmod 0755 $(DESTDIR)$(LIBREELDIR)/reel-upload
	sed -e 's|/usr/local/lib/reel/reel-upload|$(LIBREELDIR)/reel-upload|' -e 's|/etc/reel/|$(SYSCONFDIR)/reel/|g' \
	  systemd/reel-upload.service > $(DESTDIR)$(UNITDIR)/reel-upload.service
	install -m 0644 systemd/reel-upload.path systemd/reel-upload.timer $(DESTDIR)$(UNITDIR)/
	chmod 0644 $(DESTDIR)$(UNITDIR)/reel-upload.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/reel/upload.env ] || install -m 0644 config/upload.env $(DESTDIR)$(SYSCONFDIR)/reel/upload.env
	install -m 0644 systemd/reel.sysusers $(DESTDIR)$(SYSUSERSDIR)/reel.conf
	install -m 0644 systemd/reel.tmpfiles $(DESTDIR)$(TMPFILESDIR)/reel.conf
	if [ -e $(DESTDIR)$(SYSCONFDIR)/reel/reeld.toml ]; then \
	  install -m 0644 config/reeld.toml $(DESTDIR)$(SYSCONFDIR)/reel/reeld.toml.new; \
	  echo "kept $(DESTDIR)$(SYSCONFDIR)/reel/reeld.toml; the new default is reeld.toml.new"; \
	else install -m 0644 config/reeld.toml $(DESTDIR)$(SYSCONFDIR)/reel/reeld.toml; fi
	$(BIN_SRC)/reelctl --generate-completion-script bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/reelctl
	$(BIN_SRC)/reelctl --generate-completion-script zsh > $(DESTDIR)$(DATADIR)/zsh/site-functions/_reelctl
	$(BIN_SRC)/reelctl --generate-completion-script fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/reelctl.fish

# A benchmark, not a test: Reel vs ffmpeg vs x264 alone on the same input; prints ratios.
bench: build
	REEL_BIN_DIR=$(RELEASE_BIN) $(PYTHON) scripts/bench.py

# The long run (issue 6), not a test: 2 h paced at 640x360 with a pause every minute; checks RSS
# growth, A/V offset at the end and dropped frames (SOAK_SECONDS shortens it). At nice -10, the
# unit's Nice=.
soak: build
	REEL_BIN_DIR=$(RELEASE_BIN) nice -n -10 $(PYTHON) scripts/soak.py

# Not a test either: libFuzzer with AddressSanitizer on the request parser, the config loader, the
# MP4 finisher (whole .part files), the top-level box walker and the take-marker reader,
# FUZZ_SECONDS (default 600) each, niced; fails on any crash (scripts/fuzz.sh says where the input
# is). FUZZ_RUNS=N runs N inputs per target instead (the campaign of docs/RELIABILITY.md);
# FUZZ_TARGETS picks targets. The sanitizer build lives apart in .build/fuzz; `make test` replays Tests/fuzz/ unsanitized.
# -sanitize-coverage is spelled out: swiftc 6.3 leaves Swift code without coverage counters (the
# fuzzer runs blind) when -sanitize=fuzzer comes with -sanitize=address.
FUZZ_SECONDS ?= 600
FUZZ_RUNS ?=
FUZZ_BUILD := nice -n 5 $(SWIFT) build --scratch-path $(CURDIR)/.build/fuzz -c release \
              --sanitize=fuzzer --sanitize=address -Xswiftc -DFUZZING \
              -Xswiftc -sanitize-coverage=edge,indirect-calls,trace-cmp,inline-8bit-counters,pc-table

FUZZ_TARGETS ?= request config finish boxes marker
fuzz-build: deps
	for t in $(FUZZ_TARGETS); do $(FUZZ_BUILD) --product fuzz-$$t || exit 1; done

# Then the TOML reader against Python's tomllib on every config input the fuzzer kept (the plain
# build of fuzz-config prints what the reader makes of a file).
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 scripts/fuzz.sh $(FUZZ_TARGETS)
	if [[ " $(FUZZ_TARGETS) " == *" config "* ]]; then \
	  nice -n 5 $(SWIFT) build --product fuzz-config && \
	  $(PYTHON) scripts/toml_oracle.py $(CURDIR)/.build/debug/fuzz-config Tests/fuzz/config .build/fuzz/corpus/config; fi

clean:
	rm -rf .build demo-out
