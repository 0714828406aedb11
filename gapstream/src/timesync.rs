//! The drone's clock on the receiver's: a frame's capture time as this machine's time, estimated
//! from the stream itself.
//!
//! The drone stamps frames on its own clock (the GAP8's timer since boot; the simulated drone's
//! is this machine's). Two kinds of samples come with the stream:
//!
//! * **one-way**: every frame's capture time `d` (drone clock) and the time it was delivered here
//!   `r`. `r − d` is the clock offset plus the frame's transit; its lower envelope over time moves
//!   only with the drift between the clocks, so the slope of the per-window minima (one window a
//!   second, the last [`WINDOWS`]) is the **drift**. The envelope itself is offset *plus the
//!   minimum transit* (the SPI link and the WiFi: tens of ms on an AI-deck), which one-way samples
//!   cannot tell apart;
//! * **two-way**: every KEEPALIVE exchange (`docs/protocol.md` §7): the receiver sends at `t1`, the
//!   drone answers with its clock `d`, the answer arrives at `t4`. With equal legs, `d` was read at
//!   `(t1 + t4) / 2` here, and whatever the legs, within `± (t4 − t1) / 2` of it (NTP's bound,
//!   RFC 5905). The exchange with the shortest round trip of the last [`EXCHANGES`] anchors the
//!   **offset**.
//!
//! The estimate of a drone time `d` is `r0 + (d − d0) · (1 + drift)` from the anchor `(d0, r0)`.
//! Its uncertainty, [`Estimate::uncertainty_ns`], is the anchor's half round trip plus the drift's
//! error over `d − d0` (the window minima's scatter over the span they cover). Without an
//! exchange yet (a stream without keepalives: the stock stream) the envelope is the anchor and the
//! estimate is late by the minimum transit: [`Estimate::two_way`] says which.
//!
//! Deterministic: no wall clock inside, every time comes from the caller.

use std::collections::VecDeque;

/// One-way windows kept (one per second of drone time).
pub const WINDOWS: usize = 60;
/// Two-way exchanges kept (one a second with the default keepalive).
pub const EXCHANGES: usize = 64;
/// Complete one-way windows a drift fit needs (three seconds); before, [`PRIOR_DRIFT`].
pub const MIN_FIT_WINDOWS: usize = 3;
/// The drift assumed before the fit: two clocks of ±100 ppm each (a common crystal tolerance).
pub const PRIOR_DRIFT: f64 = 200e-6;
/// Window length, ns of drone time.
const WINDOW_NS: u64 = 1_000_000_000;

/// The estimate for one drone time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The drone time on this machine's clock, ns.
    pub receiver_ns: u64,
    /// How far off it may be, ns (see the module's text).
    pub uncertainty_ns: u64,
    /// Anchored by a two-way exchange (else by the one-way envelope: late by the minimum transit).
    pub two_way: bool,
    /// The drift in use, parts per million (receiver seconds per drone second − 1).
    pub drift_ppm: f64,
}

impl Estimate {
    /// The stated bound, when there is one: a two-way anchor's. None for the one-way envelope,
    /// which is late by the minimum transit, a figure the stream cannot give.
    pub fn bound_ns(&self) -> Option<u64> {
        self.two_way.then_some(self.uncertainty_ns)
    }
}

#[derive(Clone, Copy, Debug)]
struct Window {
    /// Window index (drone time / WINDOW_NS).
    index: u64,
    /// Drone time and `r − d` of the window's smallest `r − d`.
    d: u64,
    delta: i128,
}

#[derive(Clone, Copy, Debug)]
struct Exchange {
    d: u64,
    /// `(t1 + t4) / 2`.
    mid: u64,
    rtt: u64,
}

/// Drone clock → receiver clock, from the stream.
#[derive(Clone, Debug, Default)]
pub struct ClockEstimator {
    windows: VecDeque<Window>,
    exchanges: VecDeque<Exchange>,
}

impl ClockEstimator {
    pub fn new() -> Self {
        Self::default()
    }

    /// A frame captured at `drone_ns` (drone clock) was delivered at `receiver_ns`.
    pub fn frame(&mut self, drone_ns: u64, receiver_ns: u64) {
        let delta = receiver_ns as i128 - drone_ns as i128;
        let index = drone_ns / WINDOW_NS;
        match self.windows.back_mut() {
            Some(w) if w.index == index => {
                if delta < w.delta {
                    w.d = drone_ns;
                    w.delta = delta;
                }
            }
            Some(w) if w.index > index => {} // out of order (a drone restart): ignored
            _ => {
                self.windows.push_back(Window {
                    index,
                    d: drone_ns,
                    delta,
                });
                if self.windows.len() > WINDOWS {
                    self.windows.pop_front();
                }
            }
        }
    }

    /// A two-way exchange: sent at `sent_ns`, the drone's clock read `drone_ns`, the answer back
    /// at `received_ns` (both on this machine's clock). Exchanges that went back in time are
    /// ignored.
    pub fn exchange(&mut self, sent_ns: u64, drone_ns: u64, received_ns: u64) {
        let Some(rtt) = received_ns.checked_sub(sent_ns) else {
            return;
        };
        self.exchanges.push_back(Exchange {
            d: drone_ns,
            mid: sent_ns + rtt / 2,
            rtt,
        });
        if self.exchanges.len() > EXCHANGES {
            self.exchanges.pop_front();
        }
    }

    /// Forgets everything (the drone restarted: a new clock).
    pub fn reset(&mut self) {
        self.windows.clear();
        self.exchanges.clear();
    }

    /// Drift (receiver ns per drone ns − 1) and its error bound per ns, from the complete windows
    /// (the newest may still be filling): a least-squares line through the window minima. Below
    /// [`MIN_FIT_WINDOWS`] a line would pass through its points with no residual to bound it: the
    /// drift is then taken as 0 within [`PRIOR_DRIFT`].
    fn drift(&self) -> (f64, f64) {
        let n = self.windows.len().saturating_sub(1);
        if n < MIN_FIT_WINDOWS {
            return (0.0, PRIOR_DRIFT);
        }
        let pts: Vec<(f64, f64)> = self
            .windows
            .iter()
            .take(n)
            .map(|w| (w.d as f64, w.delta as f64))
            .collect();
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n as f64;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n as f64;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if sxx <= 0.0 {
            return (0.0, 0.0);
        }
        let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
        // The slope's error: the worst residual over the span the windows cover.
        let worst = pts
            .iter()
            .map(|p| (p.1 - (my + slope * (p.0 - mx))).abs())
            .fold(0.0, f64::max);
        let span = pts.last().unwrap().0 - pts[0].0;
        (slope, if span > 0.0 { 2.0 * worst / span } else { 0.0 })
    }

    /// The estimate of drone time `drone_ns` on this machine's clock (None before any sample).
    pub fn estimate(&self, drone_ns: u64) -> Option<Estimate> {
        let (drift, drift_err) = self.drift();
        // In integers around the anchor: an f64 holds Unix ns only to 256 ns.
        let project = |d0: u64, r0: i128| -> (i128, f64) {
            let dd = drone_ns as i128 - d0 as i128;
            let adj = (dd as f64 * drift).round() as i128;
            (r0 + dd + adj, (dd as f64).abs() * drift_err)
        };
        let (r, err, two_way) = if let Some(x) = self.exchanges.iter().min_by_key(|x| x.rtt) {
            let (r, e) = project(x.d, x.mid as i128);
            (r, e + x.rtt as f64 / 2.0, true)
        } else {
            // The envelope: the lowest point of the windows, projected with the drift.
            let w = self.windows.iter().min_by(|a, b| {
                let pa = a.delta as f64 - drift * a.d as f64;
                let pb = b.delta as f64 - drift * b.d as f64;
                pa.total_cmp(&pb)
            })?;
            let (r, e) = project(w.d, w.d as i128 + w.delta);
            (r, e, false)
        };
        Some(Estimate {
            receiver_ns: r.clamp(0, u64::MAX as i128) as u64,
            uncertainty_ns: err.ceil() as u64,
            two_way,
            drift_ppm: drift * 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic generator (xorshift), uniform in [0, 1).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Exponential with this mean.
        fn exp(&mut self, mean: f64) -> f64 {
            -mean * (1.0 - self.next()).ln()
        }
    }

    /// The drone's clock: 5 s ahead of the receiver's and 100 ppm fast.
    fn drone_of(receiver_ns: f64) -> u64 {
        (5e9 + receiver_ns * (1.0 + 100e-6)).round() as u64
    }

    struct Run {
        est: ClockEstimator,
        worst_ns: f64,
        worst_bound_ns: u64,
        last_two_way: bool,
    }

    /// 30 fps frames with a transit of `transit_ms` + exponential jitter, a keepalive exchange a
    /// second with legs of `up_ms` / `down_ms` + jitter; from `after_s` on, each frame's estimate
    /// is compared with the truth.
    fn run(
        seconds: f64,
        transit_ms: f64,
        up_ms: f64,
        down_ms: f64,
        keepalives: bool,
        after_s: f64,
    ) -> Run {
        let mut rng = Lcg(0x9E37_79B9_7F4A_7C15);
        let mut est = ClockEstimator::new();
        let t0 = 1.7e18; // receiver clock: Unix ns
        let mut worst: f64 = 0.0;
        let mut worst_bound = 0u64;
        let mut last_two_way = false;
        let mut next_keepalive = t0 + 0.5e9;
        let frames = (seconds * 30.0) as u64;
        for i in 0..frames {
            let capture = t0 + i as f64 * 1e9 / 30.0;
            while keepalives && next_keepalive <= capture {
                let t1 = next_keepalive;
                let at_drone = t1 + (up_ms + rng.exp(2.0)) * 1e6;
                let t4 = at_drone + (down_ms + rng.exp(2.0)) * 1e6;
                est.exchange(t1 as u64, drone_of(at_drone), t4 as u64);
                next_keepalive += 1e9;
            }
            let d = drone_of(capture);
            let delivered = capture + (transit_ms + rng.exp(8.0)) * 1e6;
            est.frame(d, delivered as u64);
            if capture - t0 >= after_s * 1e9 {
                let e = est.estimate(d).unwrap();
                let err = (e.receiver_ns as f64 - capture).abs();
                worst = worst.max(err);
                worst_bound = worst_bound.max(e.uncertainty_ns);
                assert!(
                    err <= e.uncertainty_ns as f64 + 1.0 || !e.two_way,
                    "error {err} ns beyond the stated bound {} ns",
                    e.uncertainty_ns
                );
                last_two_way = e.two_way;
            }
        }
        Run {
            est,
            worst_ns: worst,
            worst_bound_ns: worst_bound,
            last_two_way,
        }
    }

    /// The case: drone clock 5 s off and 100 ppm fast, frames 30 ms + jitter in transit,
    /// keepalive legs of 3 ms + jitter: after 10 s every capture time is within 2 ms of the truth,
    /// and within the bound the estimator states.
    #[test]
    fn offset_5_s_drift_100_ppm_within_2_ms_after_10_s() {
        let r = run(20.0, 30.0, 3.0, 3.0, true, 10.0);
        assert!(r.last_two_way);
        assert!(r.worst_ns < 2e6, "worst error {} ms", r.worst_ns / 1e6);
        let e = r.est.estimate(drone_of(1.7e18 + 19e9)).unwrap();
        assert!(
            (e.drift_ppm + 100.0).abs() < 10.0,
            "drift {} ppm",
            e.drift_ppm
        );
        eprintln!(
            "worst error {:.3} ms, stated bound up to {:.3} ms, drift {:.2} ppm",
            r.worst_ns / 1e6,
            r.worst_bound_ns as f64 / 1e6,
            e.drift_ppm
        );
    }

    /// Unequal legs (the answer waits behind a frame on the drone's SPI link: 12 ms down against
    /// 1 ms up): the estimate is off by half the difference, and the stated bound still holds.
    #[test]
    fn unequal_legs_stay_within_the_stated_bound() {
        let r = run(20.0, 30.0, 1.0, 12.0, true, 5.0);
        assert!(r.worst_ns > 4e6, "half the asymmetry shows: {}", r.worst_ns);
        assert!(r.worst_ns <= r.worst_bound_ns as f64 + 1.0);
    }

    /// Without exchanges the estimate is the envelope: late by the minimum transit, said so.
    #[test]
    fn one_way_only_is_late_by_the_minimum_transit_and_says_so() {
        let r = run(12.0, 30.0, 3.0, 3.0, false, 10.0);
        assert!(!r.last_two_way);
        // Late by the 30 ms floor, give or take the smallest jitter and the drift's error.
        assert!((r.worst_ns - 30e6).abs() < 3e6, "{}", r.worst_ns / 1e6);
    }

    #[test]
    fn empty_and_backwards_inputs() {
        let mut e = ClockEstimator::new();
        assert!(e.estimate(5).is_none());
        e.exchange(10, 99, 5); // answer before the question: ignored
        assert!(e.estimate(5).is_none());
        e.frame(2_000_000_000, 2_030_000_000);
        e.frame(1_000_000_000, 1_000_000_000); // older window: ignored
        let x = e.estimate(2_000_000_000).unwrap();
        assert_eq!(x.receiver_ns, 2_030_000_000);
        e.reset();
        assert!(e.estimate(5).is_none());
    }
}
