import ArgumentParser
import ReelControl

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the cameras (formats, sizes, frame rates) and ALSA capture devices reeld can record from.")

    @Flag(name: .long, help: "Print the protocol's devices object as one JSON object instead.")
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let devices = try required(perform(.devices, options: global).devices, in: .devices, "a device list")
        if json {
            print(try Wire.text(devices))
        } else {
            print(DevicesText.render(devices), terminator: "")
        }
    }
}
