import Foundation
import Glibc
import Synchronization
import XCTest

@testable import ReelControl
import ReelSystem

final class ServerTests: XCTestCase {
    func testEveryCommandRoundTripsOnOneConnection() throws {
        let f = try Fixture()
        let client = try f.client()

        let start = try client.send(Request(id: 1, cmd: .start, name: "clip"), timeoutMs: 5000)
        XCTAssertEqual(start, Reply(id: 1, ok: true, file: "/srv/reel/clip.mp4.part"))

        let pause = try client.send(Request(id: 2, cmd: .pause), timeoutMs: 5000)
        XCTAssertTrue(pause.ok)
        XCTAssertEqual(pause.id, 2)
        XCTAssertEqual(pause.status?.state, .paused)
        XCTAssertEqual(pause.status?.segments, [SegmentInfo(index: 0, durationNs: 2_000_000_000)])

        let resume = try client.send(Request(id: 3, cmd: .resume), timeoutMs: 5000)
        XCTAssertEqual(resume.status?.state, .recording)

        let status = try client.send(Request(cmd: .status), timeoutMs: 5000)
        XCTAssertNil(status.id)
        XCTAssertEqual(status.status?.segments.count, 2)
        XCTAssertEqual(status.status?.file, "/srv/reel/clip.mp4.part")
        XCTAssertEqual(status.status?.video, "test 640x360 30/1 yuyv")

        let stop = try client.send(Request(id: 5, cmd: .stop), timeoutMs: 5000)
        XCTAssertEqual(stop.file, "/srv/reel/clip.mp4")
        XCTAssertEqual(stop.status?.recordedNs, 3_234_567_890)

        let refused = try client.send(Request(id: 6, cmd: .pause), timeoutMs: 5000)
        XCTAssertFalse(refused.ok)
        XCTAssertEqual(refused.id, 6)
        XCTAssertEqual(refused.error?.code, ControlError.Code.wrongState)
        XCTAssertEqual(refused.error?.message, "cannot pause: not recording (state is idle; run 'reelctl start' first)")

        XCTAssertEqual(f.recorder.calls, [.start, .pause, .resume, .status, .stop, .pause])
    }

    func testSocketFileHasMode0660AndShutdownRemovesItIdempotently() throws {
        let f = try Fixture()
        var st = stat()
        XCTAssertEqual(lstat(f.path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o660)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)
        f.server.shutdown()
        f.server.shutdown()
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.path))
        XCTAssertThrowsError(try ControlClient(path: f.path)) { error in
            XCTAssertEqual((error as? SocketError)?.kind, .cannotConnect)
            XCTAssertEqual("\(error)", "cannot connect to \(f.path): no such file (is reeld running? start it with 'systemctl start reeld' or set REEL_SOCKET)")
        }
    }

    func testMalformedJSONAndUnknownCommandGetBadRequestAndConnectionStaysUsable() throws {
        let f = try Fixture()
        let raw = try RawConnection(path: f.path)

        raw.write("this is not json\n")
        let malformed = try raw.readReply()
        XCTAssertFalse(malformed.ok)
        XCTAssertEqual(malformed.error?.code, ControlError.Code.badRequest)

        raw.write(#"{"v":1,"id":9,"cmd":"explode"}"# + "\n")
        let unknown = try raw.readReply()
        XCTAssertEqual(unknown.id, 9)
        XCTAssertEqual(unknown.error?.code, ControlError.Code.badRequest)
        XCTAssertTrue(unknown.error?.message.contains("explode") ?? false)

        raw.write(#"{"v":3,"id":10,"cmd":"status"}"# + "\n")
        XCTAssertEqual(try raw.readReply().error?.code, ControlError.Code.badRequest)

        raw.write("\n   \n" + #"{"v":1,"id":11,"cmd":"status"}"# + "\n")  // blank lines are ignored
        let ok = try raw.readReply()
        XCTAssertTrue(ok.ok)
        XCTAssertEqual(ok.id, 11)
        XCTAssertEqual(f.recorder.calls, [.status])
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let f = try Fixture()
        let raw = try RawConnection(path: f.path)
        // The stop is held, so the bad line after it is ready long before the stop's reply: it
        // must still come after it.
        f.recorder.holdNextStop()
        raw.write(#"{"v":1,"id":1,"cmd":"start"}"# + "\n" + #"{"v":1,"id":2,"cmd":"stop"}"# + "\n"
            + #"{"v":1,"id":3,"cmd":"nope"}"# + "\n" + #"{"v":1,"id":4,"cmd":"status"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        f.recorder.stopRelease.signal()
        let replies = try (0..<4).map { _ in try raw.readReply() }
        XCTAssertEqual(replies.map(\.id), [1, 2, 3, 4])
        XCTAssertEqual(replies.map(\.ok), [true, true, false, true])
        XCTAssertEqual(replies[1].file, "/srv/reel/rec.mp4")
        XCTAssertEqual(replies[3].status?.state, .idle)
    }

    func testManyPipelinedRequestsAllAnsweredInOrder() throws {
        let f = try Fixture()
        let raw = try RawConnection(path: f.path)
        let count = 1000
        let fd = raw.fd
        let writerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var bytes: [UInt8] = []
            for i in 0..<count { bytes += Array(#"{"v":1,"id":\#(i),"cmd":"status"}"#.utf8) + [10] }
            _ = RawConnection.write(fd, bytes)  // more than the server reads ahead: back-pressure
            writerDone.signal()
        }
        for i in 0..<count {
            let reply = try raw.readReply()
            XCTAssertEqual(reply.id, i)
            XCTAssertTrue(reply.ok)
        }
        writerDone.wait()
        XCTAssertEqual(f.recorder.calls.count, count)
    }

    func testLineLimitIs64KiB() throws {
        let f = try Fixture()
        let request = #"{"v":1,"id":1,"cmd":"status"}"#

        // Exactly the limit (JSON allows the padding spaces): served.
        let exact = try RawConnection(path: f.path)
        exact.write(request + String(repeating: " ", count: Wire.maxLineBytes - request.utf8.count) + "\n")
        XCTAssertEqual(try exact.readReply().ok, true)

        // One byte over: bad_request, then the server closes.
        let over = try RawConnection(path: f.path)
        over.write(request + String(repeating: " ", count: Wire.maxLineBytes - request.utf8.count + 1) + "\n")
        let reply = try over.readReply()
        XCTAssertEqual(reply.error?.code, ControlError.Code.badRequest)
        XCTAssertTrue(reply.error?.message.contains("longer than 65536 bytes") ?? false, "\(reply)")
        XCTAssertTrue(over.atEndOfStream())

        // A client that never sends a newline is cut off at the limit too, without the server
        // reading everything it sends.
        let endless = try RawConnection(path: f.path)
        let endlessFD = endless.fd
        let writerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 * 1024)
            for _ in 0..<64 where RawConnection.write(endlessFD, chunk) {}  // stops at EPIPE
            writerDone.signal()
        }
        XCTAssertEqual(try endless.readReply().error?.code, ControlError.Code.badRequest)
        XCTAssertTrue(endless.atEndOfStream())
        writerDone.wait()  // before the descriptor is closed and its number reused

        XCTAssertEqual(f.recorder.calls, [.status])
        XCTAssertEqual(try f.client().send(Request(cmd: .status), timeoutMs: 5000).ok, true)
    }

    func testQuickRepliesAreAnsweredOnTheIOThreadInRequestOrder() throws {
        let f = try Fixture()
        f.recorder.state.withLock { $0.quickStatus = true }
        let raw = try RawConnection(path: f.path)
        // A quick status queued behind a held stop on the same connection must wait for it:
        // replies stay in request order, and the quick path never reaches the handler.
        f.recorder.holdNextStop()
        raw.write(#"{"v":1,"id":1,"cmd":"start"}"# + "\n" + #"{"v":1,"id":2,"cmd":"stop"}"# + "\n"
            + #"{"v":1,"id":3,"cmd":"status"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        // Meanwhile another client's status is answered at once, by the quick path.
        let other = try f.client().send(Request(id: 7, cmd: .status), timeoutMs: 5000)
        XCTAssertEqual(other.id, 7)
        XCTAssertEqual(other.v, protocolVersion)
        XCTAssertEqual(other.status?.state, .recording)
        f.recorder.stopRelease.signal()
        let replies = try (0..<3).map { _ in try raw.readReply() }
        XCTAssertEqual(replies.map(\.id), [1, 2, 3])
        XCTAssertEqual(replies[2].status?.state, .idle)
        XCTAssertEqual(f.recorder.calls, [.start, .stop])
        XCTAssertEqual(f.recorder.state.withLock { $0.quickCalls }, 2)
    }

    func testBlockedStopDoesNotDelayStatusFromAnotherClient() throws {
        let f = try Fixture()
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)
        f.recorder.holdNextStop()

        let stopDone = expectation(description: "stop replied")
        let stopReply = Mutex<Reply?>(nil)
        let path = f.path
        Thread.detachNewThread {
            let reply = try? ControlClient(path: path).send(Request(id: 99, cmd: .stop), timeoutMs: 30_000)
            stopReply.withLock { $0 = reply }
            stopDone.fulfill()
        }
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success, "stop never reached the handler")

        // While stop is held: status from a second client (and a third, concurrently) is served.
        let other = try f.client()
        for i in 0..<3 {
            let status = try other.send(Request(id: i, cmd: .status), timeoutMs: 5000)
            XCTAssertEqual(status.status?.state, .recording)
        }
        XCTAssertNil(stopReply.withLock { $0 }, "stop must still be waiting")

        f.recorder.stopRelease.signal()
        wait(for: [stopDone], timeout: 10)
        XCTAssertEqual(stopReply.withLock { $0 }?.id, 99)
        XCTAssertEqual(stopReply.withLock { $0 }?.file, "/srv/reel/rec.mp4")
    }

    func testClientVanishingMidLineHarmsNothing() throws {
        let f = try Fixture()
        let raw = try RawConnection(path: f.path)
        raw.write(#"{"v":1,"id":1,"cmd":"sta"#)
        raw.close()
        XCTAssertTrue(f.logs.waitFor("control client closed: client hung up conn=1"), "server never noticed the hang-up; logs: \(f.logs.messages)")
        XCTAssertEqual(f.recorder.calls, [])
        XCTAssertEqual(try f.client().send(Request(cmd: .status), timeoutMs: 5000).ok, true)
    }

    func testClientVanishingBeforeItsReplyHarmsNothing() throws {
        let f = try Fixture()
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)  // connection 1
        f.recorder.holdNextStop()
        let raw = try RawConnection(path: f.path)  // connection 2
        raw.write(#"{"v":1,"id":1,"cmd":"stop"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        raw.close()
        XCTAssertTrue(f.logs.waitFor("control client closed: client hung up conn=2"), "logs: \(f.logs.messages)")
        f.recorder.stopRelease.signal()
        XCTAssertTrue(f.logs.waitFor("dropping a reply: its client has left conn=2"), "logs: \(f.logs.messages)")
        // The stop itself happened; the server keeps serving.
        let status = try f.client().send(Request(cmd: .status), timeoutMs: 5000)
        XCTAssertEqual(status.status?.state, .idle)
        XCTAssertEqual(status.status?.lastFile, "/srv/reel/rec.mp4")
    }

    /// The reply is written into a connection the client no longer reads: the server gets
    /// EPIPE, not SIGPIPE (which would kill this test process, as it does not ignore SIGPIPE).
    func testReplyToClientThatStoppedReadingGivesEPIPENotSIGPIPE() throws {
        let f = try Fixture()
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)  // connection 1
        f.recorder.holdNextStop()
        let raw = try RawConnection(path: f.path)  // connection 2
        raw.write(#"{"v":1,"id":1,"cmd":"stop"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(shutdown(raw.fd, Int32(SHUT_RD)), 0)  // the server's side may no longer send
        f.recorder.stopRelease.signal()
        XCTAssertTrue(f.logs.waitFor("client went away before its reply was written (broken pipe) conn=2"),
                      "logs: \(f.logs.messages)")
        XCTAssertEqual(try f.client().send(Request(cmd: .status), timeoutMs: 5000).status?.state, .idle)
    }

    func testHalfClosedClientStillGetsItsReplies() throws {
        let f = try Fixture()
        let raw = try RawConnection(path: f.path)
        raw.write(#"{"v":1,"id":1,"cmd":"status"}"# + "\n" + #"{"v":1,"id":2,"cmd":"status"}"# + "\n")
        shutdown(raw.fd, Int32(SHUT_WR))
        XCTAssertEqual(try raw.readReply().id, 1)
        XCTAssertEqual(try raw.readReply().id, 2)
        XCTAssertTrue(raw.atEndOfStream())
    }

    /// Busy only when every slot has a request at the handler: such a slot frees itself.
    func testExtraClientsGetBusyOnlyWhileEverySlotHasARequestUnderWay() throws {
        let f = try Fixture(maxClients: 1)
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)
        f.recorder.holdNextStop()
        let a = try RawConnection(path: f.path)
        a.write(#"{"v":1,"id":1,"cmd":"stop"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        let reply = try f.client().send(Request(id: 3, cmd: .status), timeoutMs: 5000)
        XCTAssertFalse(reply.ok)
        XCTAssertEqual(reply.error?.code, ControlError.Code.busy)
        XCTAssertTrue(reply.error?.message.contains("1 control clients, its maximum, each with a request under way") ?? false, "\(reply)")
        // Once its stop is answered, the connection holding the slot is idle and gives way.
        f.recorder.stopRelease.signal()
        XCTAssertEqual(try a.readReply().file, "/srv/reel/rec.mp4")
        XCTAssertEqual(try f.client().send(Request(cmd: .status), timeoutMs: 5000).status?.state, .idle)
        XCTAssertTrue(a.closedByServer(), "the idle connection gave its slot up")
    }

    /// Issue 22 item 6: clients that connect and never send cannot lock the control group out.
    func testANewClientAtTheCapTakesTheSlotOfTheClientIdleLongest() throws {
        let f = try Fixture(maxClients: 3)
        let idle = try (0..<3).map { _ in try RawConnection(path: f.path) }
        idle[2].write(#"{"v":1,"id":1,"cmd":"status"}"# + "\n")  // the newest is active
        XCTAssertEqual(try idle[2].readReply().id, 1)
        // A forbidden peer would go first; here all are allowed, so the one connected first goes.
        XCTAssertEqual(try f.client().send(Request(id: 2, cmd: .status), timeoutMs: 5000).id, 2)
        XCTAssertTrue(idle[0].closedByServer())
        XCTAssertTrue(f.logs.waitFor("its slot given to a new client conn=1"), "logs: \(f.logs.messages)")
        XCTAssertTrue(f.logs.messages.contains { $0.contains("serving 3 control clients, the most") })
        idle[2].write(#"{"v":1,"id":3,"cmd":"status"}"# + "\n")
        XCTAssertEqual(try idle[2].readReply().id, 3, "an active client keeps its slot")
    }

    /// Issue 22 item 6: idle connections time out; a subscriber and a request under way do not.
    func testIdleClientsTimeOutButSubscribersAndRequestsUnderWayDoNot() throws {
        let bus = EventBus()
        let f = try Fixture(limits: ControlLimits(idleTimeoutMs: 300), events: bus)
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)
        let subscriber = try f.client()
        XCTAssertTrue(try subscriber.subscribe(timeoutMs: 5000).ok)
        f.recorder.holdNextStop()
        let stopping = try RawConnection(path: f.path)
        stopping.write(#"{"v":1,"id":9,"cmd":"stop"}"# + "\n")
        XCTAssertEqual(f.recorder.stopEntered.wait(timeout: .now() + 10), .success)
        let silent = try RawConnection(path: f.path)  // connects and never sends
        XCTAssertTrue(silent.closedByServer(), "the silent client was not closed")
        XCTAssertTrue(f.logs.waitFor("control client closed: idle for "), "logs: \(f.logs.messages)")
        // Well past the timeout, the held stop's connection and the subscriber are still served.
        f.recorder.stopRelease.signal()
        XCTAssertEqual(try stopping.readReply().id, 9)
        bus.publish(ControlEvent(event: "finished", file: "/o/a.mp4", at: 6))
        XCTAssertEqual(String(decoding: try subscriber.nextLine(timeoutMs: 5000), as: UTF8.self),
                       #"{"v":1,"event":"finished","file":"/o/a.mp4","at":6}"#)
        // Once answered, the stop's connection is idle too and times out.
        XCTAssertTrue(stopping.closedByServer())
    }

    /// Issue 22 item 6: a client that pipelines snapshots and never reads holds at most the 64 KiB
    /// cap and one reply in reeld; the rest wait unasked, and come in order once it reads.
    func testUnreadRepliesOverTheCapHoldTheClientsFurtherRequests() throws {
        let f = try Fixture()
        f.recorder.state.withLock { $0.snapshotBytes = 256 << 10 }  // 350 KB of base64 per reply, more than the socket buffer
        let raw = try RawConnection(path: f.path)
        raw.write((1...4).map { #"{"v":1,"id":\#($0),"cmd":"snapshot"}"# + "\n" }.joined())
        XCTAssertTrue(f.logs.waitFor("is not reading its replies"), "logs: \(f.logs.messages)")
        XCTAssertEqual(f.recorder.calls, [.snapshot], "a second snapshot was taken for a client that reads none")
        for id in 1...4 {
            let reply = try raw.readReply()
            XCTAssertEqual(reply.id, id)
            XCTAssertEqual(reply.snapshot?.bytes, 256 << 10)
        }
        XCTAssertEqual(f.recorder.calls, Array(repeating: .snapshot, count: 4))
    }

    func testStaleSocketFileIsReplaced() throws {
        let dir = TempDir()
        let path = dir.socket()
        // A socket file nobody listens on, as a crashed reeld leaves behind.
        let fd = try Sys.socketUnix(nonblocking: false)
        try Sys.bind(fd, Sys.address(path)!)
        Sys.close(fd)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))

        let logs = LogSink()
        let server = try ControlServer(path: path, handler: FakeRecorder(), logger: logs.logger())
        server.start()
        defer { server.shutdown() }
        XCTAssertTrue(try ControlClient(path: path).send(Request(cmd: .status), timeoutMs: 5000).ok)
        XCTAssertTrue(logs.messages.contains { $0.contains("replacing stale control socket") })
    }

    func testSecondServerOnLivePathFailsClearlyAndLeavesFirstAlone() throws {
        let f = try Fixture()
        XCTAssertThrowsError(try ControlServer(path: f.path, handler: FakeRecorder(), logger: f.logs.logger())) { error in
            XCTAssertEqual((error as? SocketError)?.kind, .alreadyInUse)
            XCTAssertEqual("\(error)", "cannot listen on \(f.path): another reeld is already listening there (stop it first, e.g. 'systemctl stop reeld', or choose another path with --socket)")
        }
        XCTAssertTrue(try f.client().send(Request(cmd: .status), timeoutMs: 5000).ok)
    }

    func testNonSocketFileInTheWayIsNotDeleted() throws {
        let dir = TempDir()
        let path = dir.socket()
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
        XCTAssertThrowsError(try ControlServer(path: path, handler: FakeRecorder(), logger: LogSink().logger())) { error in
            XCTAssertEqual((error as? SocketError)?.kind, .cannotListen)
            XCTAssertTrue("\(error)".contains("not a socket"), "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: path), Data("keep me".utf8))
    }

    func testMissingDirectoryIsNamed() throws {
        let dir = TempDir()
        let path = dir.path + "/nope/reeld.sock"
        XCTAssertThrowsError(try ControlServer(path: path, handler: FakeRecorder(), logger: LogSink().logger())) { error in
            XCTAssertEqual("\(error)", "cannot listen on \(path): the directory \(dir.path)/nope does not exist (create it, e.g. with RuntimeDirectory=reel in the unit)")
        }
    }

    func testClientErrorsNameTheFix() throws {
        let dir = TempDir()
        // A stale socket: connection refused.
        let path = dir.socket()
        let fd = try Sys.socketUnix(nonblocking: false)
        try Sys.bind(fd, Sys.address(path)!)
        Sys.close(fd)
        XCTAssertThrowsError(try ControlClient(path: path)) { error in
            XCTAssertTrue("\(error)".hasPrefix("cannot connect to \(path): connection refused"), "\(error)")
            XCTAssertTrue("\(error)".contains("systemctl start reeld"), "\(error)")
        }
        let long = "/tmp/" + String(repeating: "x", count: 120)
        XCTAssertThrowsError(try ControlClient(path: long)) { error in
            XCTAssertTrue("\(error)".contains("too long"), "\(error)")
        }
    }

    func testReplyTimeoutIsReported() throws {
        let f = try Fixture()
        XCTAssertTrue(try f.client().send(Request(cmd: .start), timeoutMs: 5000).ok)
        f.recorder.holdNextStop()
        defer { f.recorder.stopRelease.signal() }
        let client = try f.client()
        XCTAssertThrowsError(try client.send(Request(cmd: .stop), timeoutMs: 200)) { error in
            XCTAssertEqual((error as? SocketError)?.kind, .timedOut, "\(error)")
            XCTAssertTrue("\(error)".contains("no reply from reeld"), "\(error)")
        }
    }

    func testServeInheritedListeningDescriptor() throws {
        let dir = TempDir()
        let path = dir.socket()
        let fd = try Sys.socketUnix(nonblocking: false)
        try Sys.bind(fd, Sys.address(path)!)
        try Sys.listen(fd, backlog: 8)
        let server = ControlServer(listeningFD: fd, handler: FakeRecorder(), logger: LogSink().logger())
        server.start()
        XCTAssertTrue(try ControlClient(path: path).send(Request(cmd: .status), timeoutMs: 5000).ok)
        server.shutdown()
        // Not created by the server, so not removed by it.
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }
}
