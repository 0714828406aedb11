//! The drone's clock on the receiver's: a frame's capture time as this machine's time, estimated
//! from the stream itself.
//!
//! The drone stamps frames on its own clock (the GAP8's timer since boot; the simulated drone's
//! is this machine's). Two kinds of samples come with the stream, and each is a hard constraint on
//! the line `r(d)` that maps drone time `d` to this machine's time `r`:
//!
//! * **one-way**: every frame's capture time `d` (drone clock) and the time it was delivered here
//!   `f`: `r(d) <= f` (a frame arrives after it was captured). The per-second minima of `f - d`
//!   (the last [`WINDOWS`]) and the newest frame are kept; their least-squares slope is the
//!   reported **drift**;
//! * **two-way**: every KEEPALIVE exchange (`docs/protocol.md` §7): the receiver sends at `t1`, the
//!   drone answers with its clock `d`, the answer arrives at `t4`: `t1 <= r(d) <= t4`, whatever
//!   the legs (NTP's bound, RFC 5905). The last [`EXCHANGES`] are kept.
//!
//! The line's slope `1 + k` (`k` the drift) lies within [`PRIOR_DRIFT`] of 1 (two crystals) and
//! within what every pair of constraints allows (two exchanges `i`, `j`:
//! `(t1_j - t4_i) / (d_j - d_i) <= 1 + k <= (t4_j - t1_i) / (d_j - d_i)`; an exchange and a
//! later or earlier frame likewise). For a drone time `d`, each constraint carried to `d` with the
//! slope range gives an interval that holds `r(d)`; their intersection `[lo, hi]` is the tightest
//! statement the samples make. The estimate is its middle, the stated uncertainty
//! ([`Estimate::uncertainty_ns`]) its half width: a bound, not a statistic, so it holds however late
//! a starved receiver reads its sockets (the times it records are only ever later than the
//! events: `t4` and `f` stay upper bounds, and `t1` is taken before the KEEPALIVE leaves).
//!
//! Without an exchange yet (a stream without keepalives: the stock stream) only upper bounds
//! exist: the estimate is the one-way envelope (the frames' minimum `f - d` carried with the
//! fitted drift), late by the minimum transit (the SPI link and the WiFi, tens of ms on an
//! AI-deck), which one-way samples cannot tell apart from the offset: [`Estimate::two_way`] says
//! which. Samples that contradict every line (a drone clock that jumped) drop the estimate to the
//! one-way envelope as well, until the old samples age out or the connection restarts.
//!
//! Deterministic: no wall clock inside, every time comes from the caller.

use std::collections::VecDeque;

/// One-way windows kept (one per second of drone time).
pub const WINDOWS: usize = 60;
/// Two-way exchanges kept (one a second with the default keepalive).
pub const EXCHANGES: usize = 64;
/// Complete one-way windows the reported drift's fit needs (three seconds); before, 0.
pub const MIN_FIT_WINDOWS: usize = 3;
/// The drift assumed possible before the samples narrow it: two clocks of ±100 ppm each (a common
/// crystal tolerance).
pub const PRIOR_DRIFT: f64 = 200e-6;
/// Window length, ns of drone time.
const WINDOW_NS: u64 = 1_000_000_000;

/// The estimate for one drone time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The drone time on this machine's clock, ns.
    pub receiver_ns: u64,
    /// How far off it may be, ns: with a two-way anchor a bound (see the module's text); with the
    /// one-way envelope, the part of the error the drift may add (the transit comes on top).
    pub uncertainty_ns: u64,
    /// Anchored by two-way exchanges (else by the one-way envelope: late by the minimum transit).
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

/// A frame's upper bound: captured at drone time `d`, here by `f` (`r(d) <= f`).
#[derive(Clone, Copy, Debug)]
struct Upper {
    d: u64,
    f: u64,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    /// Window index (drone time / WINDOW_NS).
    index: u64,
    /// The window's frame with the smallest `f − d`.
    min: Upper,
}

impl Window {
    fn delta(&self) -> i128 {
        self.min.f as i128 - self.min.d as i128
    }
}

/// `t1 <= r(d) <= t4`.
#[derive(Clone, Copy, Debug)]
struct Exchange {
    d: u64,
    t1: u64,
    t4: u64,
}

/// Drone clock → receiver clock, from the stream.
#[derive(Clone, Debug, Default)]
pub struct ClockEstimator {
    windows: VecDeque<Window>,
    exchanges: VecDeque<Exchange>,
    /// The newest frame (its own bound is the tightest for its own stamp).
    last: Option<Upper>,
    /// The drift's range `[k_lo, k_hi]` the kept samples allow (None: they contradict every line).
    slope: Option<(f64, f64)>,
}

/// `r0 + (d − d0)·(1 + k)` for the `k` of `[k_lo, k_hi]` that makes it smallest (`low`) or
/// largest, rounded outwards.
fn carry(d: u64, d0: u64, r0: u64, (k_lo, k_hi): (f64, f64), low: bool) -> i128 {
    let dd = d as i128 - d0 as i128;
    let k = if (dd >= 0) == low { k_lo } else { k_hi };
    let adj = dd as f64 * k;
    let adj = if low { adj.floor() } else { adj.ceil() };
    r0 as i128 + dd + adj as i128
}

impl ClockEstimator {
    pub fn new() -> Self {
        Self::default()
    }

    /// A frame captured at `drone_ns` (drone clock) was delivered at `receiver_ns`.
    pub fn frame(&mut self, drone_ns: u64, receiver_ns: u64) {
        let u = Upper {
            d: drone_ns,
            f: receiver_ns,
        };
        let delta = receiver_ns as i128 - drone_ns as i128;
        let index = drone_ns / WINDOW_NS;
        match self.windows.back_mut() {
            Some(w) if w.index == index => {
                if delta < w.delta() {
                    w.min = u;
                }
            }
            Some(w) if w.index > index => return, // out of order (a drone restart): ignored
            _ => {
                self.windows.push_back(Window { index, min: u });
                if self.windows.len() > WINDOWS {
                    self.windows.pop_front();
                }
                // Once a second: the finished window joins the slope's constraints.
                self.slope = self.slope_range();
            }
        }
        self.last = Some(u);
    }

    /// A two-way exchange: sent at `sent_ns`, the drone's clock read `drone_ns`, the answer back
    /// at `received_ns` (both on this machine's clock). Exchanges that went back in time are
    /// ignored.
    pub fn exchange(&mut self, sent_ns: u64, drone_ns: u64, received_ns: u64) {
        if received_ns < sent_ns {
            return;
        }
        self.exchanges.push_back(Exchange {
            d: drone_ns,
            t1: sent_ns,
            t4: received_ns,
        });
        if self.exchanges.len() > EXCHANGES {
            self.exchanges.pop_front();
        }
        self.slope = self.slope_range();
    }

    /// Forgets everything (the drone restarted: a new clock).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// The frames' upper bounds kept: the windows' minima and the newest frame.
    fn uppers(&self) -> impl Iterator<Item = Upper> + '_ {
        self.windows.iter().map(|w| w.min).chain(self.last)
    }

    /// The drift's range every pair of kept constraints allows, within [`PRIOR_DRIFT`]; if the
    /// prior contradicts the samples, the samples' own range; None if they contradict each other.
    fn slope_range(&self) -> Option<(f64, f64)> {
        let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
        // `r(d_a) >= a_lo` and `r(d_b) <= b_hi`: `r(d_b) − r(d_a) <= b_hi − a_lo`, so with
        // `span = d_b − d_a`, `(1 + k)·span <= b_hi − a_lo`: an upper bound on `k` when `d_b` is
        // later, a lower bound when it is earlier.
        let mut pair = |d_a: u64, a_lo: u64, d_b: u64, b_hi: u64| {
            let span = d_b as i128 - d_a as i128;
            if span == 0 {
                return;
            }
            let k = (b_hi as i128 - a_lo as i128) as f64 / span as f64 - 1.0;
            if span > 0 {
                hi = hi.min(k);
            } else {
                lo = lo.max(k);
            }
        };
        for x in &self.exchanges {
            for y in &self.exchanges {
                pair(x.d, x.t1, y.d, y.t4);
            }
            for u in self.uppers() {
                pair(x.d, x.t1, u.d, u.f);
            }
        }
        if lo > hi {
            return None;
        }
        let (plo, phi) = (lo.max(-PRIOR_DRIFT), hi.min(PRIOR_DRIFT));
        Some(if plo <= phi { (plo, phi) } else { (lo, hi) })
    }

    /// The reported drift (receiver ns per drone ns − 1): a least-squares line through the
    /// complete windows' minima (the newest may still be filling), 0 below [`MIN_FIT_WINDOWS`],
    /// kept within the range the samples allow.
    fn drift(&self) -> f64 {
        let n = self.windows.len().saturating_sub(1);
        let fit = if n < MIN_FIT_WINDOWS {
            0.0
        } else {
            let pts: Vec<(f64, f64)> = self
                .windows
                .iter()
                .take(n)
                .map(|w| (w.min.d as f64, w.delta() as f64))
                .collect();
            let mx = pts.iter().map(|p| p.0).sum::<f64>() / n as f64;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / n as f64;
            let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
            if sxx <= 0.0 {
                0.0
            } else {
                pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx
            }
        };
        match self.slope {
            Some((lo, hi)) if lo.is_finite() && hi.is_finite() => fit.clamp(lo, hi),
            _ => fit,
        }
    }

    /// The estimate of drone time `drone_ns` on this machine's clock (None before any sample).
    pub fn estimate(&self, drone_ns: u64) -> Option<Estimate> {
        let drift = self.drift();
        if let (Some(range), false) = (self.slope, self.exchanges.is_empty()) {
            let lo = self
                .exchanges
                .iter()
                .map(|x| carry(drone_ns, x.d, x.t1, range, true))
                .max()?;
            let hi = self
                .exchanges
                .iter()
                .map(|x| carry(drone_ns, x.d, x.t4, range, false))
                .chain(
                    self.uppers()
                        .map(|u| carry(drone_ns, u.d, u.f, range, false)),
                )
                .min()?;
            if lo <= hi {
                return Some(Estimate {
                    receiver_ns: ((lo + hi) / 2).clamp(0, u64::MAX as i128) as u64,
                    uncertainty_ns: ((hi - lo + 1) / 2) as u64,
                    two_way: true,
                    drift_ppm: drift * 1e6,
                });
            }
        }
        // The envelope: the frames' tightest upper bound, carried with the fitted drift.
        let fitted = (drift, drift);
        let r = self
            .uppers()
            .map(|u| carry(drone_ns, u.d, u.f, fitted, false))
            .min()?;
        // What the drift may add from the nearest window (the prior's width).
        let near = self
            .uppers()
            .map(|u| (drone_ns as i128 - u.d as i128).unsigned_abs())
            .min()?;
        Some(Estimate {
            receiver_ns: r.clamp(0, u64::MAX as i128) as u64,
            uncertainty_ns: (near as f64 * PRIOR_DRIFT).ceil() as u64,
            two_way: false,
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

    /// A starved receiver: it reads its socket late by up to tens of ms (heavy-tailed), the drone
    /// answers late too, frames queue for up to 200 ms. The stated bound holds for every frame
    /// from the first exchange on (a statistic would not: the old least-squares error did not).
    #[test]
    fn a_starved_receiver_stays_within_the_stated_bound() {
        let mut rng = Lcg(0xD1B5_4A32_D192_ED03);
        let mut est = ClockEstimator::new();
        let t0 = 1.7e18;
        let mut next_keepalive = t0 + 0.3e9;
        let mut checked = 0;
        for i in 0..(8 * 30) {
            let capture = t0 + i as f64 * 1e9 / 30.0;
            while next_keepalive <= capture {
                let t1 = next_keepalive;
                let at_drone = t1 + (0.5 + rng.exp(15.0)) * 1e6;
                let t4 = at_drone + (0.5 + rng.exp(15.0) + rng.exp(15.0)) * 1e6;
                est.exchange(t1 as u64, drone_of(at_drone), t4 as u64);
                next_keepalive += 1e9;
            }
            let d = drone_of(capture);
            let delivered = capture + (5.0 + rng.exp(60.0).min(200.0)) * 1e6;
            est.frame(d, delivered as u64);
            let e = est.estimate(d).unwrap();
            if let Some(b) = e.bound_ns() {
                let err = (e.receiver_ns as f64 - capture).abs();
                assert!(
                    err <= b as f64 + 1.0,
                    "frame {i}: error {err} ns, bound {b} ns"
                );
                assert!(e.receiver_ns as f64 <= delivered + 1.0);
                checked += 1;
            }
        }
        assert!(checked > 200, "{checked}");
    }

    proptest::proptest! {
        /// Any offset, any drift within the prior, any legs and transit: every two-way estimate
        /// is within its stated bound of the truth.
        #[test]
        fn the_stated_bound_always_holds(
            offset_s in -1e5f64..1e5,
            drift_ppm in -190.0f64..190.0,
            up_ms in 0.0f64..30.0,
            down_ms in 0.0f64..30.0,
            transit_ms in 0.0f64..100.0,
            seed in 1u64..u64::MAX,
        ) {
            let mut rng = Lcg(seed);
            let mut est = ClockEstimator::new();
            let t0 = 1.7e18;
            let drone = |r: f64| (2e14 + offset_s * 1e9 + (r - t0) * (1.0 + drift_ppm * 1e-6)).round() as u64;
            let mut next_keepalive = t0 + 0.2e9;
            for i in 0..(6 * 30) {
                let capture = t0 + i as f64 * 1e9 / 30.0;
                while next_keepalive <= capture {
                    let t1 = next_keepalive;
                    let at_drone = t1 + (up_ms + rng.exp(3.0)) * 1e6;
                    let t4 = at_drone + (down_ms + rng.exp(3.0)) * 1e6;
                    est.exchange(t1 as u64, drone(at_drone), t4 as u64);
                    next_keepalive += 1e9;
                }
                let d = drone(capture);
                est.frame(d, (capture + (transit_ms + rng.exp(10.0)) * 1e6) as u64);
                let e = est.estimate(d).unwrap();
                if let Some(b) = e.bound_ns() {
                    // The truth is the capture time, rounded to the ns by `drone`: 2 ns slack.
                    let err = (e.receiver_ns as f64 - capture).abs();
                    proptest::prop_assert!(err <= b as f64 + 2.0, "frame {}: {} > {}", i, err, b);
                }
            }
        }
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
