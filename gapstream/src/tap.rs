//! Per-frame outputs beside the viewer: every verified frame with its metadata goes to each
//! [`FrameTap`] the receiver was given (the MCAP recorder, the Zenoh publisher, the Python
//! binding's queue), in order, on the receiver's thread.

use crate::metrics::Counters;
use crate::receiver::Delivered;

/// What the receiver knows about a frame when it hands it over.
#[derive(Clone, Copy, Debug)]
pub struct FrameMeta<'a> {
    /// The negotiated suite and key establishment, as the status line shows them.
    pub suite: &'a str,
    /// When the receiver delivered the frame (Unix ns, this machine's clock).
    pub receive_ns: u64,
    /// Capture to delivery in ms, when the capture time is plausible on this clock.
    pub latency_ms: Option<f64>,
    /// The receiver's counters so far (tag failures, replays, losses, ...).
    pub counters: &'a Counters,
}

/// A per-frame output. An error stops the receiver with that message (a recording that cannot be
/// written must not look complete).
pub trait FrameTap: Send {
    fn frame(&mut self, f: &Delivered, meta: &FrameMeta<'_>) -> Result<(), String>;
    /// The receiver stopped: flush and close.
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}
