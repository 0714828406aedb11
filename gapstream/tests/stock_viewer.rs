//! Bitcraze's own viewer against the stock stream: `opencv-viewer.py` (aideck-gap8-examples,
//! `examples/other/wifi-img-streamer`) reads the first 4 bytes as `<HBB` (length, route, function),
//! then `length - 2` bytes, and unpacks exactly 11 of them as `<BHHBBI` (magic, width, height,
//! depth, format, size): any other first packet stops it with `struct.error`. Then it collects
//! packets until `size` bytes. [`opencv_viewer_first_image`] does exactly that, and these tests
//! connect it to the simulated drone's bridge at random moments, as the first client and while
//! another receiver is already streaming: every connection must start with a header and read a
//! whole, correct image. [`opencv_viewer_images`] follows the script's main loop over several
//! images, for the JPEG stream (`--stock --codec jpeg`, image type 1).

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::any;
use esp32_bridge::host::{HostBridge, HostConfig};
use gapstream::images::{FrameSource, SourceSpec};
use gapstream::receiver::{
    self, Bus, Policy, ReceiverConfig, SessionKind, Subscription, Summary, Transport,
};
use gapstream::sim::{self, NodeConfig};
use gapstream_drone::{DroneConfig, Mode, testpattern};

/// The demo's own receiver on the stock stream (`gapstream demo --stock` runs one next to the
/// bridge), on its own thread.
struct DemoReceiver {
    stop: Arc<AtomicBool>,
    frames: Subscription,
    thread: thread::JoinHandle<Result<Summary, receiver::ReceiverError>>,
}

impl DemoReceiver {
    fn start(bridge: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = ReceiverConfig {
            stop: stop.clone(),
            idle_timeout: Duration::from_secs(5),
            ..ReceiverConfig::new(bridge, Transport::Tcp, SessionKind::StockPlaintext)
        };
        let mut bus = Bus::new();
        let frames = bus.subscribe("test", Policy::Latest);
        let thread = thread::spawn(move || receiver::run(cfg, bus));
        DemoReceiver {
            stop,
            frames,
            thread,
        }
    }

    /// Stops it: its closing summary.
    fn finish(self) -> Summary {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap().unwrap()
    }
}

/// An image as opencv-viewer.py has it: width, height, depth, format (type), the image's bytes.
type ViewerImage = (u16, u16, u8, u8, Vec<u8>);

/// `rx_bytes(size)` of opencv-viewer.py.
fn rx_bytes(s: &mut TcpStream, size: usize) -> Vec<u8> {
    let mut data = vec![0u8; size];
    s.read_exact(&mut data).expect("the stream goes on");
    data
}

/// The first image as opencv-viewer.py reads it on a new connection: its header fields and bytes.
/// Errors where the script would stop (`struct.error`) or skip the packet (magic not 0xBC: the
/// script loops, but the first packet of a connection must be a header).
fn opencv_viewer_first_image(s: &mut TcpStream) -> Result<ViewerImage, String> {
    let info = rx_bytes(s, 4);
    let length = u16::from_le_bytes([info[0], info[1]]) as usize;
    let img_header = rx_bytes(s, length - 2);
    if img_header.len() != 11 {
        return Err(format!(
            "struct.error: unpack requires a buffer of 11 bytes (got {}; route 0x{:02X}, function 0x{:02X})",
            img_header.len(),
            info[2],
            info[3]
        ));
    }
    let magic = img_header[0];
    let width = u16::from_le_bytes([img_header[1], img_header[2]]);
    let height = u16::from_le_bytes([img_header[3], img_header[4]]);
    let depth = img_header[5];
    let format = img_header[6];
    let size = u32::from_le_bytes(img_header[7..11].try_into().unwrap()) as usize;
    if magic != 0xBC {
        return Err(format!(
            "first packet is not an image header: magic 0x{magic:02X}"
        ));
    }
    let mut img_stream = Vec::new();
    while img_stream.len() < size {
        let info = rx_bytes(s, 4);
        let length = u16::from_le_bytes([info[0], info[1]]) as usize;
        img_stream.extend_from_slice(&rx_bytes(s, length - 2));
    }
    if img_stream.len() != size {
        return Err(format!(
            "image of {} bytes, header said {size}",
            img_stream.len()
        ));
    }
    Ok((width, height, depth, format, img_stream))
}

/// A small xorshift for the connection moments (seed printed, so a failure can be replayed).
struct Moments(u64);
impl Moments {
    fn next_ms(&mut self, max: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % max
    }
}

fn seed() -> u64 {
    let s = std::env::var("STOCK_VIEWER_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| sim::unix_ns() | 1);
    eprintln!("stock_viewer: seed {s} (STOCK_VIEWER_SEED={s} replays it)");
    s
}

struct Setup {
    bridge: HostBridge,
    node: sim::Node,
}

fn stock_drone(fps: f64) -> Setup {
    stock_drone_coding(fps, None)
}

/// The stock drone with a coder (`--stock --codec jpeg`: Bitcraze's image type 1).
fn stock_drone_coding(
    fps: f64,
    coder: Option<Box<dyn gapstream_drone::FrameCoder + Send>>,
) -> Setup {
    let bridge = HostBridge::start(HostConfig {
        spi_listen: any(),
        tcp_listen: any(),
        udp_listen: Some(any()),
        ..HostConfig::default()
    })
    .unwrap();
    let node = sim::start_node(NodeConfig {
        source: FrameSource::open(&SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer: false,
        })
        .unwrap(),
        fps,
        bridge_spi: bridge.spi_addr,
        spi_hz: None,
        drone: DroneConfig {
            mode: Mode::StockPlaintext,
            packet_payload: 1020,
        },
        frames: None,
        engine: sim::EngineChoice::default(),
        coder,
        padding: gapstream_protocol::padding::Padding::Off,
        flight: None,
    })
    .unwrap();
    assert!(bridge.wait_gap8_link(Duration::from_secs(10)));
    Setup { bridge, node }
}

fn check_image(what: &str, got: Result<ViewerImage, String>) -> u32 {
    let (w, h, depth, format, img) = got.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!((w, h, depth, format), (324, 244, 1, 0), "{what}");
    testpattern::decode(&img, 324, 244)
        .unwrap_or_else(|| panic!("{what}: the image is not a whole test-pattern frame"))
        .frame
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The viewer alone: the drone waits for the ESP32's "client connected", so whenever the viewer
/// connects, its first packet is a header; after it leaves the drone stops, and a new connection
/// starts at a header again.
#[test]
fn opencv_viewer_as_the_only_client_starts_at_a_header() {
    let mut m = Moments(seed());
    let st = stock_drone(30.0);
    thread::sleep(Duration::from_millis(200));
    let idle = st.bridge.with_core(|c| c.stats());
    assert_eq!(
        idle.spi_messages, 0,
        "the drone streamed with no client connected: {idle:?}"
    );
    let mut last = None;
    for k in 0..4 {
        thread::sleep(Duration::from_millis(m.next_ms(120)));
        let mut s = connect(st.bridge.tcp_addr);
        let a = check_image(
            &format!("connection {k}"),
            opencv_viewer_first_image(&mut s),
        );
        // Reading on, mid-connection, whole images keep coming.
        let b = check_image(
            &format!("connection {k}, next image"),
            opencv_viewer_first_image(&mut s),
        );
        assert!(b > a, "frames in order: {a} then {b}");
        assert!(last.is_none_or(|l| a > l));
        last = Some(b);
        drop(s);
    }
    st.node.stop();
    st.bridge.stop();
}

/// `gapstream demo --stock`: the demo's own receiver is connected and the stream runs; the viewer
/// connects at random moments, in the middle of images, and must still start at a header.
#[test]
fn opencv_viewer_joining_a_running_stock_stream_starts_at_a_header() {
    let mut m = Moments(seed());
    let st = stock_drone(30.0);
    let demo = DemoReceiver::start(st.bridge.tcp_addr);
    demo.frames
        .frame(Duration::from_secs(20))
        .expect("the demo's receiver gets frames");
    let t0 = Instant::now();
    for k in 0..10 {
        // Anywhere within about one frame period (33 ms) and a half.
        thread::sleep(Duration::from_millis(m.next_ms(50)));
        let mut s = connect(st.bridge.tcp_addr);
        check_image(
            &format!("connection {k}"),
            opencv_viewer_first_image(&mut s),
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(60));
    let summary = demo.finish();
    assert_eq!(summary.counters.malformed, 0, "{summary:?}");
    st.node.stop();
    st.bridge.stop();
}

/// The images as the main loop of opencv-viewer.py reads them, `n` of them: every round reads a
/// packet's 4-byte `<HBB` and `length - 2` bytes and unpacks them as `<BHHBBI` (11 bytes or
/// `struct.error`); a packet whose magic is not 0xBC is passed over; after a header, packets are
/// appended until the image holds at least `size` bytes. The script then decodes a type-0 image as
/// 324 × 244 raw samples and any other type with `cv2.imdecode`.
fn opencv_viewer_images(s: &mut TcpStream, n: usize) -> Result<Vec<ViewerImage>, String> {
    let mut images = Vec::new();
    while images.len() < n {
        let info = rx_bytes(s, 4);
        let length = u16::from_le_bytes([info[0], info[1]]) as usize;
        let img_header = rx_bytes(s, length - 2);
        if img_header.len() != 11 {
            return Err(format!(
                "struct.error: unpack requires a buffer of 11 bytes (got {})",
                img_header.len()
            ));
        }
        let u16_at = |i: usize| u16::from_le_bytes([img_header[i], img_header[i + 1]]);
        let (magic, width, height) = (img_header[0], u16_at(1), u16_at(3));
        let (depth, format) = (img_header[5], img_header[6]);
        let size = u32::from_le_bytes(img_header[7..11].try_into().unwrap()) as usize;
        if magic != 0xBC {
            continue;
        }
        let mut img_stream = Vec::new();
        while img_stream.len() < size {
            let info = rx_bytes(s, 4);
            let length = u16::from_le_bytes([info[0], info[1]]) as usize;
            img_stream.extend_from_slice(&rx_bytes(s, length - 2));
        }
        images.push((width, height, depth, format, img_stream));
    }
    Ok(images)
}

/// `gapstream demo --stock --codec jpeg`: what Bitcraze's opencv-viewer.py reads is image type 1,
/// depth 1, 324 × 244, and exactly `size` bytes of a whole JPEG file (SOI to EOI) that a JPEG
/// decoder (`jpeg-decoder`, not ours) turns into the 324 × 244 grey frame, its burned-in frame
/// number readable, the frames in order; the demo's own receiver decodes the same stream with no
/// malformed image. (Checked against the script itself too: docs/stream.md, "Bitcraze's viewer".)
#[test]
fn opencv_viewer_reads_and_decodes_the_stock_jpeg_stream() {
    use gapstream::codec::{Codec, HostCoder};
    let coder = HostCoder::boxed(Codec::Jpeg, 75).unwrap();
    assert!(coder.is_some());
    let st = stock_drone_coding(30.0, coder);
    let demo = DemoReceiver::start(st.bridge.tcp_addr);
    let first = demo
        .frames
        .frame(Duration::from_secs(20))
        .expect("the demo's receiver gets frames");
    assert_eq!((first.width(), first.height()), (324, 244));
    let mut s = connect(st.bridge.tcp_addr);
    let images = opencv_viewer_images(&mut s, 8).unwrap_or_else(|e| panic!("{e}"));
    let mut last = None;
    for (k, (w, h, depth, format, img)) in images.into_iter().enumerate() {
        assert_eq!((w, h, depth, format), (324, 244, 1, 1), "image {k}");
        assert!(
            img.starts_with(&[0xFF, 0xD8]) && img.ends_with(&[0xFF, 0xD9]),
            "image {k}: {} bytes, not one whole JPEG file",
            img.len()
        );
        assert!(img.len() < 324 * 244, "image {k}: {} bytes", img.len());
        let mut d = jpeg_decoder::Decoder::new(&img[..]);
        let px = d
            .decode()
            .unwrap_or_else(|e| panic!("image {k} does not decode: {e}"));
        let info = d.info().unwrap();
        assert_eq!(
            (info.width, info.height, info.pixel_format),
            (324, 244, jpeg_decoder::PixelFormat::L8),
            "image {k}"
        );
        let stamp = testpattern::decode(&px, 324, 244)
            .unwrap_or_else(|| panic!("image {k}: no frame number in the decoded picture"))
            .frame;
        assert!(last.is_none_or(|l| stamp > l), "frames in order");
        last = Some(stamp);
    }
    drop(s);
    let summary = demo.finish();
    assert_eq!(summary.counters.malformed, 0, "{summary:?}");
    assert!(summary.counters.frames > 0);
    st.node.stop();
    st.bridge.stop();
}
