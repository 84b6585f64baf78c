extension Timeline {
    /// A fixed pause schedule in source time for one-shot recordings: pause at `every`, resume at
    /// `every + length`, pause at `2 * every`, ..., nothing at or after `until`.
    public static func pauseSchedule(every: Nanos, length: Nanos, until: Nanos) -> [(Request, Nanos)] {
        precondition(every > 0 && length >= 0 && length < every, "the pause must be shorter than its period")
        var out: [(Request, Nanos)] = []
        var t = every
        while t < until {
            out.append((.pause, t))
            if t + length >= until { break }
            out.append((.resume, t + length))
            t += every
        }
        return out
    }
}
