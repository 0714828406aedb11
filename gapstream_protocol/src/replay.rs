//! Sliding replay window over 64-bit sequence numbers, and loss counting from the gaps.
//!
//! Sequence numbers grow by one per frame (one sequence for the drone's whole group; a receiver that
//! joins late sees them start anywhere). The window starts at the first number accepted and
//! remembers which of the last [`WINDOW`] sequence numbers below the highest one were accepted: a
//! number seen before is a replay, a number further back than the window is too old (both
//! rejected), a new number below the highest is a late (reordered) frame and is accepted once.
//!
//! Loss: every sequence number from the lowest accepted up to the highest accepted that has not
//! been accepted counts as lost; a late frame that arrives inside the window takes its number back
//! out of the loss count (one below the lowest so far extends the counted range down to it).
//!
//! The window is only updated through [`ReplayWindow::commit`] — call it after the frame
//! authenticated, so forged frames can neither advance nor poison the window.
//!
//! A *floor* ([`ReplayWindow::raise_floor`]) refuses every number below it: a receiver's session
//! sets it to the first sequence number the drone may seal for that session (carried in the
//! authenticated GROUP_KEY), so frames recorded before a reconnect cannot be replayed into the new
//! session's empty window. The number `u64::MAX` is never sealed (the drone stops one before) and
//! is refused, so the window's arithmetic cannot wrap.

/// Width of the window in sequence numbers.
pub const WINDOW: u64 = 256;
const WORDS: usize = (WINDOW / 64) as usize;

/// Why a sequence number is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// Already accepted once.
    Duplicate,
    /// Further below the highest accepted number than the window reaches.
    TooOld,
    /// Below the session's floor: sealed before this session existed (a replay across a
    /// reconnect).
    BeforeSession,
    /// `u64::MAX`, a number the drone never seals.
    OutOfRange,
}

impl core::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ReplayError::Duplicate => "sequence number already received (replay)",
            ReplayError::TooOld => "sequence number older than the replay window",
            ReplayError::BeforeSession => {
                "sequence number from before this session (replayed across a reconnect)"
            }
            ReplayError::OutOfRange => "sequence number u64::MAX is never sealed",
        })
    }
}

/// How an accepted sequence number relates to the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The highest so far (possibly after a gap).
    InOrder,
    /// Below the highest: a reordered frame that fills a gap.
    Late,
}

#[derive(Clone, Debug, Default)]
pub struct ReplayWindow {
    /// Lowest accepted sequence number (None: nothing accepted yet).
    start: Option<u64>,
    /// Highest accepted sequence number + 1 (0: nothing accepted yet).
    top: u64,
    /// Bit i set: sequence number `top - 1 - i` accepted.
    bits: [u64; WORDS],
    accepted: u64,
    late: u64,
    /// Numbers below this are refused ([`ReplayError::BeforeSession`]).
    floor: u64,
}

impl ReplayWindow {
    pub const fn new() -> Self {
        ReplayWindow {
            start: None,
            top: 0,
            bits: [0; WORDS],
            accepted: 0,
            late: 0,
            floor: 0,
        }
    }

    /// Refuses every sequence number below `floor` from now on (a lower value changes nothing).
    pub fn raise_floor(&mut self, floor: u64) {
        self.floor = self.floor.max(floor);
    }

    /// The lowest sequence number still acceptable by the floor.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Would `seq` be accepted? (Does not change the window.)
    pub fn check(&self, seq: u64) -> Result<Arrival, ReplayError> {
        if seq == u64::MAX {
            return Err(ReplayError::OutOfRange);
        }
        if seq < self.floor {
            return Err(ReplayError::BeforeSession);
        }
        if self.start.is_none() {
            return Ok(Arrival::InOrder);
        }
        if seq >= self.top {
            return Ok(Arrival::InOrder);
        }
        let age = self.top - 1 - seq;
        if age >= WINDOW {
            return Err(ReplayError::TooOld);
        }
        if self.bit(age) {
            Err(ReplayError::Duplicate)
        } else {
            Ok(Arrival::Late)
        }
    }

    /// Records `seq` as accepted (after authentication).
    pub fn commit(&mut self, seq: u64) -> Result<Arrival, ReplayError> {
        let arrival = self.check(seq)?;
        if self.start.is_none() {
            self.start = Some(seq);
            self.top = seq;
        }
        match arrival {
            Arrival::InOrder => {
                let shift = seq - self.top + 1;
                self.shift(shift);
                self.bits[0] |= 1;
                self.top = seq + 1;
            }
            Arrival::Late => {
                if self.start.is_some_and(|s| seq < s) {
                    self.start = Some(seq);
                }
                let age = self.top - 1 - seq;
                self.bits[(age / 64) as usize] |= 1 << (age % 64);
                self.late += 1;
            }
        }
        self.accepted += 1;
        Ok(arrival)
    }

    /// Highest accepted sequence number.
    pub fn highest(&self) -> Option<u64> {
        self.top.checked_sub(1)
    }
    /// Sequence numbers accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }
    /// Accepted frames that arrived below the highest (reordered).
    pub fn late(&self) -> u64 {
        self.late
    }
    /// Lowest accepted sequence number.
    pub fn first(&self) -> Option<u64> {
        self.start
    }
    /// Sequence numbers in `first..=highest` never accepted.
    pub fn lost(&self) -> u64 {
        self.top - self.start.unwrap_or(0) - self.accepted
    }

    fn bit(&self, age: u64) -> bool {
        self.bits[(age / 64) as usize] >> (age % 64) & 1 == 1
    }

    /// Ages every entry by `n` (bits move towards higher indices; those past the window fall off).
    fn shift(&mut self, n: u64) {
        if n >= WINDOW {
            self.bits = [0; WORDS];
            return;
        }
        let words = (n / 64) as usize;
        let bits = (n % 64) as u32;
        for i in (0..WORDS).rev() {
            let src = i.checked_sub(words);
            let hi = src.map_or(0, |s| self.bits[s]);
            let lo = src
                .and_then(|s| s.checked_sub(1))
                .map_or(0, |s| self.bits[s]);
            self.bits[i] = if bits == 0 {
                hi
            } else {
                hi << bits | lo >> (64 - bits)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;
    use proptest::prelude::*;

    #[test]
    fn in_order_duplicate_late_too_old() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.commit(0), Ok(Arrival::InOrder));
        assert_eq!(w.commit(0), Err(ReplayError::Duplicate));
        assert_eq!(w.commit(3), Ok(Arrival::InOrder));
        assert_eq!(w.lost(), 2);
        assert_eq!(w.commit(1), Ok(Arrival::Late));
        assert_eq!(w.lost(), 1);
        assert_eq!(w.commit(1), Err(ReplayError::Duplicate));
        assert_eq!(w.commit(1000), Ok(Arrival::InOrder));
        assert_eq!(w.check(1000 - 256), Err(ReplayError::TooOld));
        assert_eq!(w.check(1000 - 255), Ok(Arrival::Late));
        assert_eq!(w.lost(), 1001 - 4);
        assert_eq!(w.highest(), Some(1000));
        assert_eq!(w.commit(u64::MAX - 1), Ok(Arrival::InOrder));
    }

    #[test]
    fn starts_at_the_first_accepted_number() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check(0), Ok(Arrival::InOrder));
        assert_eq!(w.commit(5000), Ok(Arrival::InOrder));
        assert_eq!((w.lost(), w.first()), (0, Some(5000)));
        assert_eq!(w.commit(5002), Ok(Arrival::InOrder));
        assert_eq!(w.lost(), 1);
        assert_eq!(w.commit(5001), Ok(Arrival::Late));
        assert_eq!(w.lost(), 0);
        // A reordered earlier frame extends the counted range down to it (5000 was not lost: it
        // was never expected before).
        assert_eq!(w.commit(4998), Ok(Arrival::Late));
        assert_eq!((w.lost(), w.first()), (1, Some(4998)));
        assert_eq!(w.check(5002 - 256), Err(ReplayError::TooOld));
    }

    /// Finding 6: an (authenticated) sequence number `u64::MAX` made `top = seq + 1` wrap (a panic
    /// in debug builds; in release an empty-looking window that took every duplicate again).
    #[test]
    fn finding6_sequence_u64_max_does_not_break_the_window() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.commit(5), Ok(Arrival::InOrder));
        assert!(w.check(u64::MAX).is_err());
        assert!(w.commit(u64::MAX).is_err());
        assert_eq!(w.commit(5), Err(ReplayError::Duplicate));
        assert_eq!(w.commit(6), Ok(Arrival::InOrder));
        assert_eq!(w.commit(u64::MAX - 1), Ok(Arrival::InOrder));
        assert!(w.commit(u64::MAX).is_err());
        assert_eq!(w.commit(u64::MAX - 1), Err(ReplayError::Duplicate));
        assert_eq!(w.highest(), Some(u64::MAX - 1));
        assert_eq!(w.lost(), u64::MAX - 1 - 5 + 1 - 3);
        // And as the very first number of a window.
        let mut w = ReplayWindow::new();
        assert!(w.commit(u64::MAX).is_err());
        assert_eq!(w.commit(0), Ok(Arrival::InOrder));
        assert_eq!(w.commit(0), Err(ReplayError::Duplicate));
    }

    #[test]
    fn the_floor_refuses_what_came_before_the_session() {
        let mut w = ReplayWindow::new();
        w.raise_floor(100);
        assert_eq!(w.check(99), Err(ReplayError::BeforeSession));
        assert_eq!(w.commit(0), Err(ReplayError::BeforeSession));
        assert_eq!(w.commit(100), Ok(Arrival::InOrder));
        w.raise_floor(50); // lower: no change
        assert_eq!(w.floor(), 100);
        assert_eq!(w.commit(99), Err(ReplayError::BeforeSession));
        assert_eq!(w.commit(101), Ok(Arrival::InOrder));
        assert_eq!((w.accepted(), w.lost()), (2, 0));
    }

    proptest! {
        /// Against a model (a set of accepted numbers): same verdicts, same loss count.
        #[test]
        fn matches_model(seqs in proptest::collection::vec(
            prop_oneof![0u64..600, 0u64..40, (0u64..3).prop_map(|x| x * 300)], 1..400)) {
            let mut w = ReplayWindow::new();
            let mut seen = BTreeSet::new();
            let mut top = 0u64;
            let mut start = None;
            for s in seqs {
                let model = if start.is_none() || s >= top {
                    Ok(Arrival::InOrder)
                } else if top - 1 - s >= WINDOW {
                    Err(ReplayError::TooOld)
                } else if seen.contains(&s) {
                    Err(ReplayError::Duplicate)
                } else {
                    Ok(Arrival::Late)
                };
                prop_assert_eq!(w.commit(s), model);
                if model.is_ok() {
                    start = Some(start.map_or(s, |st: u64| st.min(s)));
                    seen.insert(s);
                    top = top.max(s + 1);
                }
                prop_assert_eq!(w.lost(), top - start.unwrap_or(0) - seen.len() as u64);
            }
        }
    }
}
