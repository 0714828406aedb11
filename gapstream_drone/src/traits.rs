//! The small traits the drone logic is generic over. The GAP8 firmware (`firmware/`) implements them
//! with pmsis (Himax camera, SPI with the ready lines, the FC timer, its entropy source); the host
//! simulation implements them with std (synthetic or file camera, a socket paced like 10 MHz SPI,
//! the system clock, the OS RNG).

use alloc::vec::Vec;

/// The protocol's clock and pixel formats, the one definition of each (the frame header carries
/// both): the drone's hardware implements [`Clock`], its cameras report a [`PixelFormat`].
pub use gapstream_protocol::clock::Clock;
pub use gapstream_protocol::wire::PixelFormat;

/// What a camera delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameFormat {
    pub width: u16,
    pub height: u16,
    pub pixel: PixelFormat,
}

impl FrameFormat {
    /// The AI-deck's HM01B0: 324 × 244, 8 bits per pixel.
    pub const HM01B0: FrameFormat = FrameFormat {
        width: 324,
        height: 244,
        pixel: PixelFormat::Grey8,
    };

    /// Bytes of one frame.
    pub const fn bytes(&self) -> usize {
        self.width as usize * self.height as usize
    }
}

/// A finished capture. The buffer is the one given to [`Camera::start`], now holding the frame.
#[derive(Debug)]
pub struct Capture {
    pub buf: Vec<u8>,
    /// When the frame was captured, on the drone's [`Clock`].
    pub capture_ns: u64,
}

/// A camera that captures into a buffer it borrows by value, so the capture can run (DMA) while
/// the caller works on the other buffer: [`Camera::start`] with buffer B, then work on A, then
/// [`Camera::wait`] returns B filled.
pub trait Camera {
    type Error: core::fmt::Debug + core::fmt::Display;
    fn format(&self) -> FrameFormat;
    /// Starts capturing the next frame into `buf` (`format().bytes()` long). At most one capture is
    /// in flight.
    fn start(&mut self, buf: Vec<u8>) -> Result<(), Self::Error>;
    /// Waits for the capture started last and returns its buffer.
    fn wait(&mut self) -> Result<Capture, Self::Error>;
    /// Whether the camera captures while the caller works on the last frame (double buffering:
    /// the drone then holds two frame buffers and starts frame N+1 before it codes, seals and
    /// sends frame N). A camera that captures only inside [`Camera::wait`] says `false`: the
    /// drone then keeps one frame buffer and starts each capture right before waiting for it,
    /// which leaves a frame's worth of memory to other buffers (the GAP8's L2: a coded frame).
    fn captures_ahead(&self) -> bool {
        true
    }
}

/// The byte link to the ESP32 (SPI on the AI-deck). Carries CPX wire packets both ways.
pub trait Link {
    type Error: core::fmt::Debug + core::fmt::Display;
    /// Sends whole CPX wire packets (blocks until the link took them; SPI pacing happens here).
    fn send(&mut self, packets: &[u8]) -> Result<(), Self::Error>;
    /// Reads what the ESP32 has for the GAP8 without blocking; `Ok(0)` when nothing is pending.
    fn poll_recv(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error>;
}

/// Compress, then seal: codes a captured frame before the drone seals it, so the AEAD payload is
/// the coded picture (JPEG, JPEG-LS) and the frame header carries the coded pixel format and
/// length. The host simulation implements it with the codecs' portable encoders, the GAP8
/// firmware with their cluster encoders; a drone without a coder sends raw frames.
pub trait FrameCoder {
    /// Codes `frame` (`format.bytes()` bytes of `format.pixel`) into `out` (cleared first) and
    /// returns the payload's pixel format. `Ok(None)`: not coded (a format or size this coder
    /// does not take, a code longer than its buffer): the drone sends the frame raw. An error
    /// stops nothing either: the drone counts it and sends the frame raw.
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<PixelFormat>, CoderError>;

    /// A receiver asked for JPEG `quality` (1..=100, over its authenticated control channel): the
    /// next frame is coded with it. Coders without a quality (lossless) ignore it.
    fn set_quality(&mut self, quality: u8) {
        let _ = quality;
    }
}

/// Why a frame could not be coded (the frame then goes out raw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoderError(pub &'static str);

impl core::fmt::Display for CoderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "frame coder: {}", self.0)
    }
}

/// Why entropy could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntropyError;

impl core::fmt::Display for EntropyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("entropy source failed")
    }
}

/// Random bytes for the handshake's ephemeral keys.
pub trait Entropy {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), EntropyError>;
}
