import ArgumentParser
import Foundation
import ReelButton
import ReelCommandLine
import ReelConfig
import ReelControl
import ReelSystem

@main
struct ReelButtonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reel-button",
        abstract: "Drive reeld with a foot pedal, a keyboard or any Linux input device, and show its state on a tally LED.",
        discussion: """
            Keys are mapped in [button] of reeld's config, named as the kernel names them \
            (KEY_SPACE, BTN_0, KEY_F13; 'evtest DEVICE' lists a device's): hold (press starts or \
            resumes, release pauses), toggle (press starts, resumes or pauses), retake (undo the \
            last take), stop; a hold key held long_press_ms stops. Presses are debounced \
            (debounce_ms). The tally light (led: the device's own LED such as LED_MISC, or a LED \
            class device /sys/class/leds/NAME) is on while recording, blinks slowly while paused, \
            is off while idle and blinks fast when something is wrong (reeld unreachable, the \
            device gone, an error reeld reported, a command refused).

            An unplugged device is waited for and opened again when it comes back (name it by its \
            stable /dev/input/by-id path); an unreachable reeld is retried. A key or LED the \
            device does not offer is an error naming the file, the line and what it offers. \
            The socket is --socket, else $\(SocketPath.environmentVariable), else \(SocketPath.defaultPath). \
            Each press is logged with its input event's own time (CLOCK_MONOTONIC) and, once \
            answered, the milliseconds reeld took from it.

            Exit status: 0 on SIGTERM or SIGINT; 2 for a usage or configuration error.
            """)

    @Option(name: .long, help: ArgumentHelp("The input device, e.g. /dev/input/by-id/usb-Pedal-event-kbd.", valueName: "path"))
    var device: String

    @Option(name: .long, help: ArgumentHelp("The config file whose [button] table maps the keys.",
                                            valueName: "path"))
    var config: String = DaemonSettings.defaultConfigPath

    @Option(name: .long, help: ArgumentHelp("Path of reeld's control socket.", valueName: "path"))
    var socket: String?

    static func main() { mainExitingTwoOnUsage(program: "reel-button") }

    func run() throws {
        ProcessSignals.block()  // before any thread: every thread inherits the mask
        let settings = try ButtonConfig(file: config)
        let socketPath = SocketPath.resolve(explicit: socket, environment: ProcessInfo.processInfo.environment)
        var program = try ButtonLoop(devicePath: device, config: settings, socket: socketPath)
        let status = program.run()
        Foundation.exit(status)
    }
}

/// One line on stderr (the journal under systemd).
func say(_ message: String) { printError("reel-button", message) }
