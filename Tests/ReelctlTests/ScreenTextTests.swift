import ReelControl
import ReelCore
@testable import reelctl
import XCTest

/// What `reelctl status` and `reelctl status --watch` print.
final class ScreenTextTests: XCTestCase {
    func testTakesTableAndStatusRows() {
        let takes = [TakeInfo(number: 1, label: "intro", title: "intro", startNs: 0, durationNs: 1_266_666_667),
                     TakeInfo(number: 2, label: nil, title: "Take 2", startNs: 1_266_666_667, durationNs: nil)]
        XCTAssertEqual(StatusText.takesTable(takes), """
            #  title   start    duration
            1  intro   0.000 s  1.266 s
            2  Take 2  1.266 s  -

            """)
        XCTAssertEqual(StatusText.takesTable([]), "#  title  start  duration\n")
        var status = StatusInfo(state: .recording, file: "/o/a.mp4.part", segments: [], recordedNs: 0, frames: 0, droppedFrames: 0,
                                audioSamples: 0, lastFile: nil, lastError: nil, video: "v", audio: "a", uptimeNs: 1)
        status.takes = takes
        status.remainingNs = 500_000_000
        let text = StatusText.render(status)
        XCTAssertTrue(text.contains("takes:          2\n  1:            intro: from 0.000 s, 1.266 s\n  2:            Take 2: from 1.266 s, open\nremaining:      0.500 s\n"), text)
        XCTAssertFalse(text.contains("pre-roll"), text)
        status.preRollNs = 1_500_000_000
        XCTAssertTrue(StatusText.render(status).contains("remaining:      0.500 s\npre-roll:       1.500 s held (a start now records from that long before it)\n"),
                      StatusText.render(status))
    }

    func testStatusText() {
        XCTAssertEqual(StatusText.seconds(2_000_000_000), "2.000 s")
        XCTAssertEqual(StatusText.seconds(1_234_567_890), "1.234 s")
        XCTAssertEqual(StatusText.seconds(45_000_000), "0.045 s")
        XCTAssertEqual(StatusText.seconds(3_723_004_000_000), "3723.004 s")
        let status = StatusInfo(state: .paused, file: "/srv/reel/a.mp4.part",
                                segments: [SegmentInfo(index: 0, durationNs: 2_000_000_000), SegmentInfo(index: 1, durationNs: 1_500_000_000)],
                                recordedNs: 3_500_000_000, frames: 105, droppedFrames: 2, audioSamples: 168_000,
                                lastFile: nil, lastError: "disk full", video: "v", audio: "a", uptimeNs: 10_000_000_000)
        XCTAssertEqual(StatusText.render(status), """
            state:          paused
            file:           /srv/reel/a.mp4.part
            segments:       2
              #0:           2.000 s
              #1:           1.500 s
            recorded:       3.500 s
            frames:         105
            dropped frames: 2
            audio samples:  168000
            last error:     disk full
            video:          v
            audio:          a
            uptime:         10.000 s

            """)
    }

    private func status(frames: Int64, bytes: Int64?, peaks: [Double?] = [-6.0]) -> StatusInfo {
        var s = StatusInfo(state: .recording, file: "/o/a.mp4.part", segments: [SegmentInfo(index: 0, durationNs: 2_000_000_000)],
                           recordedNs: 2_000_000_000, frames: frames, droppedFrames: 1, audioSamples: 0, lastFile: nil,
                           lastError: nil, video: "v", audio: "a", uptimeNs: 1)
        s.audioPeakDbfs = peaks
        s.bytesWritten = bytes
        s.freeBytes = 12_345_678_901
        return s
    }

    func testWatchScreenRates() {
        let a = WatchScreen.Sample(status: status(frames: 30, bytes: 1_000_000), at: 1_000_000_000)
        let b = WatchScreen.Sample(status: status(frames: 60, bytes: 1_250_000), at: 2_000_000_000)
        XCTAssertEqual(WatchScreen.fps(a, b), "30.0")
        XCTAssertEqual(WatchScreen.kbps(a, b), "2000.0")
        XCTAssertNil(WatchScreen.fps(nil, b))
        var other = b
        other.status.file = "/o/b.mp4.part"
        XCTAssertNil(WatchScreen.fps(a, other), "no rate across two recordings")
        XCTAssertEqual(WatchScreen.peaks([-6.0, nil]), "ch1 -6.0 dBFS, ch2 silent")
        XCTAssertEqual(WatchScreen.megabytes(12_345_678_901), "12345.7 MB")
        XCTAssertEqual(WatchScreen.render(a, b), """
            state:          recording
            file:           /o/a.mp4.part
            elapsed:        2.000 s
            segments:       1
            frames:         60
            fps:            30.0
            dropped frames: 1
            audio peak:     ch1 -6.0 dBFS
            bitrate:        2000.0 kbit/s
            written:        1.3 MB
            free:           12345.7 MB

            """)
    }
}
