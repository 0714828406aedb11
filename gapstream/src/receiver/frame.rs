//! The delivered frame: one type from the session to every output. It says where it came from
//! (`source`: the drone's name), carries the frame header the session verified, the pixel format,
//! and the pixels once, shared (`Arc<[u8]>`) by the viewer, the recorders, the publishers and the
//! Python queue alike.

use std::sync::Arc;

use gapstream_protocol::wire::{FrameHeader, PixelFormat, UnknownPixelFormat};

use crate::drone_state::DroneState;
use crate::timesync::Estimate;

/// The name of the drone a frame came from (`--drone NAME`; `aideck` by default): a ground station
/// receiving several drones tells their frames apart by it.
pub type Source = Arc<str>;

/// The default [`Source`] name (the Zenoh key chunk and the MCAP topics use the same).
pub const DEFAULT_SOURCE: &str = "aideck";

/// How far the receiver could check a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Sealed with an authenticated suite: header and pixels verified.
    Authenticated,
    /// Sealed with an unauthenticated suite (`chacha20`, `aes128ctr`, `none`): nothing verified.
    Unauthenticated,
    /// Bitcraze's stock plaintext stream: no header of gapstream's protocol at all.
    Plaintext,
}

/// One verified frame, as every output sees it.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The drone it came from.
    pub source: Source,
    /// The frame header (sequence, key epoch, capture time, size, pixel format, suite): the
    /// authenticated associated data of the frame's AEAD for the secure stream; for the stock
    /// stream the image header's size and the sequence / capture time read from the picture
    /// when it carries them (epoch 0, suite 0).
    pub header: FrameHeader,
    pub protection: Protection,
    /// The negotiated suite and key establishment, as the status line shows them.
    pub suite: Arc<str>,
    /// The pixels, `width * height` bytes (a coded frame's decoded samples); shared, never copied
    /// per output.
    pub pixels: Arc<[u8]>,
    /// A coded frame's payload as it verified (the JPEG file, the JPEG-LS stream): what the
    /// recorders keep and the publishers send; None for a raw frame.
    pub coded: Option<Arc<[u8]>>,
    /// When the receiver delivered it (Unix ns, this machine's clock).
    pub receive_ns: u64,
    /// Capture to delivery in ms, when the capture time is plausible on this clock.
    pub latency_ms: Option<f64>,
    /// The drone's state when the frame was exposed: the record in the frame's associated data,
    /// authenticated with it (None when the drone sends none, or for the stock stream).
    pub state: Option<DroneState>,
    /// The capture time on this machine's clock, estimated from the stream (`timesync`); None
    /// without a capture time.
    pub capture: Option<Estimate>,
}

impl Frame {
    /// The drone's frame sequence number.
    pub fn seq(&self) -> u64 {
        self.header.sequence
    }
    /// The key epoch the frame was sealed under (None for the stock stream).
    pub fn epoch(&self) -> Option<u32> {
        (self.protection != Protection::Plaintext).then_some(self.header.epoch)
    }
    /// The capture time on the drone (Unix ns), when the stream carries one.
    pub fn capture_ns(&self) -> Option<u64> {
        (self.header.capture_ns != 0).then_some(self.header.capture_ns)
    }
    /// The stamp of everything published for this frame (ROS `header.stamp`, MCAP publish time):
    /// the acquisition time on this machine's clock when the stream gives one (`timesync`), else
    /// the drone's capture time as sent, else (no capture time at all) the time it was received.
    pub fn stamp_ns(&self) -> u64 {
        self.capture
            .map(|c| c.receiver_ns)
            .or(self.capture_ns())
            .unwrap_or(self.receive_ns)
    }
    pub fn width(&self) -> usize {
        self.header.width as usize
    }
    pub fn height(&self) -> usize {
        self.header.height as usize
    }
    /// The pixel format (the header carries a code this build may not know).
    pub fn format(&self) -> Result<PixelFormat, UnknownPixelFormat> {
        PixelFormat::try_from(self.header.pixel_format)
    }
    /// The layout of [`Frame::pixels`]: the format, or for a coded frame what it decodes to.
    pub fn pixel_layout(&self) -> Result<PixelFormat, UnknownPixelFormat> {
        self.format().map(PixelFormat::decoded)
    }
    /// An RGGB Bayer mosaic (the colour HM01B0, raw or JPEG-LS coded), which the viewer and the
    /// PNG recorder demosaic.
    pub fn is_bayer(&self) -> bool {
        self.pixel_layout() == Ok(PixelFormat::BayerRggb8)
    }
}

/// Latency in ms when the capture time is plausible on this clock (within an hour before now).
pub fn latency_ms(now_ns: u64, capture_ns: u64) -> Option<f64> {
    let d = now_ns.checked_sub(capture_ns)?;
    (d < 3_600_000_000_000).then(|| d as f64 / 1e6)
}

/// A frame for tests and tools: grey pixels, authenticated, received now.
#[doc(hidden)]
pub fn test_frame(seq: u64, width: u16, height: u16, pixels: Vec<u8>) -> Frame {
    Frame {
        source: Arc::from(DEFAULT_SOURCE),
        header: FrameHeader {
            suite: 0,
            pixel_format: PixelFormat::Grey8.code(),
            width,
            height,
            epoch: 0,
            sequence: seq,
            capture_ns: 0,
            payload_len: pixels.len() as u32,
            state: None,
        },
        protection: Protection::Authenticated,
        suite: Arc::from("chacha20poly1305 / x25519"),
        pixels: Arc::from(pixels),
        coded: None,
        receive_ns: 0,
        latency_ms: None,
        state: None,
        capture: None,
    }
}
