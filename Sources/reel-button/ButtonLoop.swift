import Foundation
import Glibc
import ReelButton
import ReelConfig
import ReelControl
import ReelCore
import ReelSystem

/// reel-button's main thread: polls the input device and the mailbox, feeds `ButtonMachine`,
/// queues its commands, and keeps the tally light on its pattern. Only this thread touches the
/// device and the machine.
struct ButtonLoop {
    let devicePath: String
    let config: ButtonConfig
    let link: ReeldLink
    let mailbox: Mailbox
    var machine: ButtonMachine
    var device: InputDevice?
    var keys: [Int: ButtonConfig.Key] = [:]
    var ledCode: Int?
    let ledClass: LEDClassLight?
    var lit: Bool?
    var nextOpen: Nanos = 0
    var waitingSaid = false
    var lastLightError: String?

    static let reopenEveryNs: Nanos = 250_000_000

    init(devicePath: String, config: ButtonConfig, socket: String) throws {
        self.devicePath = devicePath
        self.config = config
        mailbox = try Mailbox()
        let log: @Sendable (String) -> Void = { say($0) }
        link = ReeldLink(socket: socket, mailbox: mailbox, log: log)
        machine = ButtonMachine(settings: config.settings)
        if case let .ledClass(path, _) = config.light {
            ledClass = try LEDClassLight(path: path)
        } else {
            ledClass = nil
        }
    }

    mutating func run() -> Int32 {
        let mailbox = self.mailbox
        ProcessSignals.handle { mailbox.post(.signal($0)) }
        var linked = false
        while true {
            let now = SystemClock.now()
            if device == nil, now >= nextOpen {
                do { try openDevice() } catch {
                    say("\(error)")
                    return 2
                }
                if device == nil { nextOpen = now + Self.reopenEveryNs }
            }
            // reeld is reached after the first try at the device: a config that does not fit it ends the program first.
            if !linked {
                link.start()
                linked = true
            }
            for m in mailbox.takeAll() {
                if case let .signal(sig) = m {
                    say("signal \(sig): exiting")
                    show(false)
                    return 0
                }
                handle(m)
            }
            dispatch(machine.advance(to: SystemClock.now()))
            showPattern(SystemClock.now())
            // Sleep until the device or a message has something, or the next deadline.
            let t = SystemClock.now()
            var deadline = [machine.nextDeadline, machine.pattern.nextChange(after: t)].compactMap { $0 }.min()
            if device == nil { deadline = min(deadline ?? nextOpen, nextOpen) }
            var fds = [pollfd(fd: mailbox.wakeFd, events: Int16(POLLIN), revents: 0)]
            if let device { fds.append(pollfd(fd: device.fd, events: Int16(POLLIN), revents: 0)) }
            _ = try? Sys.poll(&fds, timeoutMs: {
                guard let deadline else { return -1 }
                let left = deadline - SystemClock.now()
                return left <= 0 ? 0 : Int32(clamping: (left + 999_999) / 1_000_000)
            })
            if device != nil, fds.count > 1, fds[1].revents != 0 { readDevice() }
        }
    }

    // MARK: the device

    private mutating func openDevice() throws {
        let writable: Bool
        if case .inputLED = config.light { writable = true } else { writable = false }
        let dev: InputDevice
        do {
            dev = try InputDevice(path: devicePath, writable: writable)
        } catch {
            if !waitingSaid {
                // Names the kernel does not have are wrong whatever device comes: said at once.
                try config.checkNames(keyCode: InputDevice.code(ofKey:), ledCode: InputDevice.code(ofLED:), device: devicePath)
                say("\(error); waiting for it (opened when it comes)")
            }
            waitingSaid = true
            return
        }
        let label = "\(devicePath) (\(dev.name))"
        let resolved = try config.resolve(device: label, code: InputDevice.code(ofKey:), offers: dev.hasKey, offered: { dev.keyNames })
        keys = Dictionary(uniqueKeysWithValues: resolved.map { ($0.code, $0) })
        if case let .inputLED(name, line) = config.light {
            ledCode = try config.resolveLED(name, line: line, device: label, code: InputDevice.code(ofLED:), offers: dev.hasLED, offered: { dev.ledNames })
        }
        device = dev
        waitingSaid = false
        lit = nil
        machine.deviceOpened()
        say("opened \(label): \(resolved.map { "\($0.name) \($0.role.rawValue)" }.joined(separator: ", "))")
    }

    private mutating func readDevice() {
        guard let dev = device else { return }
        while true {
            switch dev.next() {
            case .drained:
                return
            case let .key(code, pressed, at):
                guard let key = keys[code] else { continue }
                dispatch(machine.advance(to: at))
                dispatch(machine.key(code: code, role: key.role, pressed: pressed, at: at))
            case let .gone(why):
                say("\(why); waiting for it to come back")
                device = nil
                waitingSaid = true
                nextOpen = SystemClock.now() + Self.reopenEveryNs
                dispatch(machine.deviceLost(at: SystemClock.now()))
                return
            }
        }
    }

    // MARK: reeld

    private mutating func handle(_ m: Message) {
        switch m {
        case let .connected(state, failing):
            machine.connected(state: state, failing: failing)
        case .unreachable:
            machine.unreachable()
        case let .state(s):
            machine.stateEvent(s)
        case let .error(message):
            say("reeld reported: \(message)")
            machine.errorEvent(message)
        case let .replied(command, ok, state, error, eventNs, sentNs, repliedNs, startNs, originNs):
            machine.replied(command, ok: ok, state: state, error: error)
            // A start's path: the press, sent, reached reeld, the first frame captured, answered.
            var times = "eventNs=\(eventNs) sentNs=\(sentNs) repliedNs=\(repliedNs) (\(ms(repliedNs - eventNs)) ms after the press)"
            if let startNs { times += " startNs=\(startNs) (\(ms(startNs - eventNs)) ms)" }
            if command == .start, let originNs { times += " originNs=\(originNs) (first frame \(ms(originNs - eventNs)) ms after the press)" }
            say("\(command.rawValue) \(ok ? "done" : "failed") \(times)\(error.map { ": \($0)" } ?? "")")
        case let .firstFrame(eventNs, originNs):
            say("start's first frame eventNs=\(eventNs) originNs=\(originNs) (first frame \(ms(originNs - eventNs)) ms after the press)")
        case .signal:
            break
        }
    }

    /// Sends the commands first, then logs: a slow log (a journal under load) is not in a press's path.
    private mutating func dispatch(_ out: ButtonMachine.Output) {
        let eventNs = out.taken.last?.at ?? SystemClock.now()
        let readNs = SystemClock.now()
        for c in out.commands where !link.send(c, eventNs: eventNs) {
            say("\(c.rawValue) dropped: 64 commands wait for reeld already (is it stuck? see 'journalctl -u reeld')")
            machine.replied(c, ok: false, state: nil, error: "reeld is not answering")
        }
        for t in out.taken {
            let name = InputDevice.keyName(t.code)
            let what = t.longPress ? "held \(config.settings.longPressNs / 1_000_000) ms" : t.pressed ? "pressed" : "released"
            say("\(name) (\(t.role.rawValue)) \(what) eventNs=\(t.at) readNs=\(readNs)")
        }
    }

    // MARK: the tally light

    private mutating func showPattern(_ now: Nanos) {
        let want = machine.pattern.lit(at: now)
        if want != lit { show(want) }
    }

    private mutating func show(_ on: Bool) {
        var problem: String?
        if let ledClass { problem = ledClass.set(lit: on) }
        if let device, let ledCode { problem = device.setLED(ledCode, lit: on) ?? problem }
        lit = on
        if problem != lastLightError, let problem { say(problem) }
        lastLightError = problem
    }

    /// Milliseconds with one decimal, from integer ns.
    private func ms(_ ns: Nanos) -> String {
        "\(ns < 0 ? "-" : "")\(abs(ns) / 1_000_000).\(abs(ns) / 100_000 % 10)"
    }
}
