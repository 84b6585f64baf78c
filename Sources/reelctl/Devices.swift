import ArgumentParser
import ReelControl

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the cameras (formats, sizes, frame rates) and ALSA capture devices reeld can record from.")

    @Flag(name: .long, help: "Print the protocol's devices object as one JSON object instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reply = try perform(.devices, options: global)
        guard let devices = reply.devices else {
            printError("reeld replied to 'devices' without a device list (is reeld the same version as reelctl?)")
            throw ExitCode(ExitStatus.refused)
        }
        if json {
            print(try Wire.text(devices))
        } else {
            print(DevicesText.render(devices), terminator: "")
        }
    }
}
