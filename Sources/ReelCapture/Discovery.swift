import CALSA
import Glibc
import ReelControl
import ReelSystem

/// Every V4L2 video capture device with its formats, sizes and frame rates, and every ALSA
/// capture PCM with what it accepts. Opens each device briefly; never keeps an fd.
public func listCaptureDevices() -> DeviceList {
    DeviceList(video: listVideoDevices(), audio: listAudioDevices())
}

func listVideoDevices() -> [VideoDeviceInfo] {
    var out: [VideoDeviceInfo] = []
    for path in v4l2DeviceNodes() {
        let dev: V4L2Device
        do { dev = try V4L2Device(path: path) } catch {
            out.append(VideoDeviceInfo(path: path, name: "?", driver: "?", bus: "?", formats: [], error: error.description))
            continue
        }
        guard let cap = try? dev.queryCapability(), cap.isCapture else { continue }  // metadata/output nodes
        let formats = dev.enumerateFormats().map(VideoFormatInfo.init)
        out.append(VideoDeviceInfo(path: path, name: cap.card, driver: cap.driver, bus: cap.bus, formats: formats))
        dev.close()
    }
    return out
}

func listAudioDevices() -> [AudioDeviceInfo] {
    var out: [AudioDeviceInfo] = []
    var card: Int32 = -1
    var cardInfo: OpaquePointer?
    var pcmInfo: OpaquePointer?
    snd_ctl_card_info_malloc(&cardInfo)
    snd_pcm_info_malloc(&pcmInfo)
    defer { snd_ctl_card_info_free(cardInfo); snd_pcm_info_free(pcmInfo) }
    while snd_card_next(&card) >= 0, card >= 0 {
        var ctl: OpaquePointer?
        guard snd_ctl_open(&ctl, "hw:\(card)", 0) >= 0, let ctl else { continue }
        defer { snd_ctl_close(ctl) }
        guard snd_ctl_card_info(ctl, cardInfo) >= 0 else { continue }
        let id = String(cString: snd_ctl_card_info_get_id(cardInfo))
        let cardName = String(cString: snd_ctl_card_info_get_name(cardInfo))
        var dev: Int32 = -1
        while snd_ctl_pcm_next_device(ctl, &dev) >= 0, dev >= 0 {
            snd_pcm_info_set_device(pcmInfo, UInt32(dev))
            snd_pcm_info_set_subdevice(pcmInfo, 0)
            snd_pcm_info_set_stream(pcmInfo, SND_PCM_STREAM_CAPTURE)
            guard snd_ctl_pcm_info(ctl, pcmInfo) >= 0 else { continue }  // no capture stream
            let name = String(cString: snd_pcm_info_get_name(pcmInfo))
            let device = "hw:\(id),\(dev)"
            var offer: String?
            var pcm: OpaquePointer?
            if snd_pcm_open(&pcm, device, SND_PCM_STREAM_CAPTURE, SND_PCM_NONBLOCK) >= 0, let pcm {
                offer = ALSAPCM.describeOffer(pcm)
                snd_pcm_close(pcm)
            }
            out.append(AudioDeviceInfo(device: device, card: Int(card), pcm: Int(dev), cardName: cardName, name: name, offer: offer))
        }
    }
    return out
}
