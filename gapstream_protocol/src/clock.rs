//! The one clock of the project: the sessions' timers, the drone's capture timestamps and stage
//! timings, and the receivers' protocol time all read a [`Clock`].

/// Monotonic time in nanoseconds from an arbitrary origin, never going back: what the sessions'
/// timeouts, retry backoff and grace windows are measured on (a clock that jumps ends or stretches
/// sessions at random). The drone's [`Clock`] also stamps each frame's capture time (the frame
/// header's `capture_ns`). Any `Fn() -> u64` is a clock.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now_ns(&self) -> u64 {
        self()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(u64);
    impl Clock for Fixed {
        fn now_ns(&self) -> u64 {
            self.0
        }
    }

    /// A type of its own and a closure are both clocks, also behind `dyn`.
    #[test]
    fn types_and_closures_are_clocks() {
        let t = core::cell::Cell::new(5u64);
        let f = || {
            t.set(t.get() + 1);
            t.get()
        };
        assert_eq!((f.now_ns(), f.now_ns()), (6, 7));
        let d: &dyn Clock = &Fixed(42);
        assert_eq!(d.now_ns(), 42);
    }
}
