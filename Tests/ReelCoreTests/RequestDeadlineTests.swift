import XCTest
@testable import ReelCore

/// `RequestDeadline` on a manual clock: a request is applied or cancelled, never both, and never
/// applied after its requester gave up.
final class RequestDeadlineTests: XCTestCase {
    let deadline: Nanos = 10_000_000_000

    func testTakenBeforeTheDeadlineIsAppliedAndItsAnswerAwaited() {
        var r = RequestDeadline(deadline: deadline)
        XCTAssertTrue(r.take(now: deadline - 1))
        XCTAssertEqual(r.state, .taken)
        // The requester's deadline passes while the pipeline applies it: the answer is coming.
        XCTAssertFalse(r.giveUp())
        XCTAssertEqual(r.state, .taken)
    }

    func testGivenUpIsNeverApplied() {
        var r = RequestDeadline(deadline: deadline)
        XCTAssertTrue(r.giveUp())
        XCTAssertEqual(r.state, .cancelled)
        // The pipeline reaches it later (an overloaded pipeline), even "before" the deadline.
        XCTAssertFalse(r.take(now: deadline - 1))
        XCTAssertFalse(r.take(now: deadline + 5_000_000_000))
        XCTAssertEqual(r.state, .cancelled)
    }

    func testReachedAtTheDeadlineIsCancelledEvenBeforeTheRequesterWakes() {
        var r = RequestDeadline(deadline: deadline)
        XCTAssertFalse(r.take(now: deadline))
        XCTAssertEqual(r.state, .cancelled)
        XCTAssertTrue(r.giveUp(), "the requester answers 'not applied'")
        XCTAssertFalse(r.take(now: deadline - 1))
    }

    func testTakenOnceOnly() {
        var r = RequestDeadline(deadline: deadline)
        XCTAssertTrue(r.take(now: 0))
        XCTAssertTrue(r.take(now: 1), "a taken request stays taken (the pipeline asks once)")
        XCTAssertFalse(r.giveUp())
    }

    /// Every interleaving of the two sides over a few instants: applied exactly when the pipeline
    /// took it before the deadline and before the requester gave up, and then the requester waits
    /// for the answer; otherwise cancelled, and the requester says so.
    func testEveryInterleaving() {
        for takeAt in stride(from: deadline - 2, through: deadline + 2, by: 1) {
            for pipelineFirst in [true, false] {
                var r = RequestDeadline(deadline: deadline)
                let applied: Bool, cancelledForRequester: Bool
                if pipelineFirst {
                    applied = r.take(now: takeAt)
                    cancelledForRequester = r.giveUp()
                } else {
                    cancelledForRequester = r.giveUp()
                    applied = r.take(now: takeAt)
                }
                XCTAssertNotEqual(applied, cancelledForRequester, "take at \(takeAt), pipeline first: \(pipelineFirst)")
                XCTAssertEqual(applied, pipelineFirst && takeAt < deadline, "take at \(takeAt), pipeline first: \(pipelineFirst)")
            }
        }
    }
}
