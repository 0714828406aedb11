//! Plaintext compatibility mode: the stock Bitcraze AI-deck image stream (`0xBC`).
//!
//! What the stock `wifi-img-streamer` example sends per image, all packets routed GAP8 → WiFi host,
//! function APP (5), with `last_packet` set on every packet (`cpxInitRoute` sets it once):
//!
//! 1. one 11-byte header packet, little-endian: `magic u8 = 0xBC, width u16, height u16,
//!    depth u8, type u8 (0 raw, 1 JPEG), size u32`;
//! 2. the image in packets of `packet_payload` bytes (1020 in the stock firmware), the last one
//!    shorter.
//!
//! [`StockStreamer`] emits exactly that. One deliberate difference: when the image size is an
//! exact multiple of the packet payload, the stock loop (`do { ... } while (size == 1020)`) sends a
//! trailing empty packet, which the stock viewer then misreads as a header; it is not sent here.
//! A 324×244 frame (79,056 bytes) is not a multiple of 128, 256, 512 or 1020, so for the camera the
//! streams are byte-identical. No security at all: for A/B comparisons and stock viewers only.
//!
//! [`StockReceiver`] (with `alloc`) turns such a stream back into images, for viewing a stock deck.

use crate::cpx::{self, CpxError, Function, LastFlag, Packetizer, Route, Target};

/// First byte of the stock image header.
pub const STOCK_MAGIC: u8 = 0xBC;
/// Length of the stock image header.
pub const STOCK_HEADER_LEN: usize = 11;

/// The stock image header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockHeader {
    pub width: u16,
    pub height: u16,
    /// Bytes per pixel (1).
    pub depth: u8,
    /// 0 raw, 1 JPEG.
    pub kind: u8,
    /// Image bytes that follow.
    pub size: u32,
}

impl StockHeader {
    pub fn encode(&self) -> [u8; STOCK_HEADER_LEN] {
        let mut b = [0u8; STOCK_HEADER_LEN];
        b[0] = STOCK_MAGIC;
        b[1..3].copy_from_slice(&self.width.to_le_bytes());
        b[3..5].copy_from_slice(&self.height.to_le_bytes());
        b[5] = self.depth;
        b[6] = self.kind;
        b[7..11].copy_from_slice(&self.size.to_le_bytes());
        b
    }
    /// Parses a header packet (at least 11 bytes, starting with `0xBC`; the stock viewer reads the
    /// first 11 bytes).
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < STOCK_HEADER_LEN || b[0] != STOCK_MAGIC {
            return None;
        }
        Some(StockHeader {
            width: u16::from_le_bytes([b[1], b[2]]),
            height: u16::from_le_bytes([b[3], b[4]]),
            depth: b[5],
            kind: b[6],
            size: u32::from_le_bytes([b[7], b[8], b[9], b[10]]),
        })
    }
}

/// The stock route: GAP8 → WiFi host, APP, `last_packet` set.
pub const STOCK_ROUTE: Route = Route::new(Target::Gap8, Target::WifiHost, Function::App);

/// Emits one image as the stock streamer does, packet by packet, without copying the image.
#[derive(Clone, Debug)]
pub struct StockStreamer<'a> {
    header: Option<[u8; STOCK_HEADER_LEN]>,
    body: Packetizer<'a>,
}

impl<'a> StockStreamer<'a> {
    /// A raw (type 0), depth-1 image of `width × height` bytes.
    pub fn raw(
        image: &'a [u8],
        width: u16,
        height: u16,
        packet_payload: usize,
    ) -> Result<Self, CpxError> {
        let size = u32::try_from(image.len()).map_err(|_| CpxError::PayloadTooLong(image.len()))?;
        Self::new(
            image,
            StockHeader {
                width,
                height,
                depth: 1,
                kind: 0,
                size,
            },
            packet_payload,
        )
    }

    pub fn new(
        image: &'a [u8],
        header: StockHeader,
        packet_payload: usize,
    ) -> Result<Self, CpxError> {
        let body = Packetizer::new(
            STOCK_ROUTE,
            [image, &[], &[]],
            packet_payload,
            LastFlag::Every,
        )?;
        Ok(StockStreamer {
            header: Some(header.encode()),
            body,
        })
    }

    /// Writes the next packet's wire bytes into `out` (at least `4 + packet_payload` bytes).
    pub fn next_packet(&mut self, out: &mut [u8]) -> Option<Result<usize, CpxError>> {
        if let Some(h) = self.header.take() {
            return Some(cpx::encode_packet(STOCK_ROUTE, &h, out));
        }
        self.body.next_packet(out)
    }
}

/// WIFI_CTRL command byte: "a WiFi client connected / disconnected", followed by one status byte
/// (1 connected, 0 disconnected). Bitcraze's AI-deck ESP32 firmware (aideck-esp-firmware,
/// `main/wifi.c`) sends `[0x32, status]` from the ESP32 to the GAP8 on function WIFI_CTRL (4)
/// when its TCP client connects and when it leaves; the stock GAP8 streamer
/// (aideck-gap8-examples, `wifi-img-streamer`) only captures and sends while the status is 1, so
/// a viewer always starts at an image header.
pub const WIFI_CTRL_STATUS_CLIENT_CONNECTED: u8 = 0x32;

/// The route of that notification: ESP32 → GAP8, WIFI_CTRL, `last_packet` set.
pub const CLIENT_STATUS_ROUTE: Route = Route::new(Target::Esp32, Target::Gap8, Function::WifiCtrl);

/// The payload of the client-status notification.
pub const fn client_status_payload(connected: bool) -> [u8; 2] {
    [WIFI_CTRL_STATUS_CLIENT_CONNECTED, connected as u8]
}

/// Reads a client-status notification: `Some(connected)` for a WIFI_CTRL packet whose payload is
/// `[0x32, status]` (any further bytes ignored, as the stock GAP8 code does), `None` otherwise.
pub fn parse_client_status(route: Route, payload: &[u8]) -> Option<bool> {
    if route.function != Function::WifiCtrl as u8 {
        return None;
    }
    match payload {
        [WIFI_CTRL_STATUS_CLIENT_CONNECTED, status, ..] => Some(*status != 0),
        _ => None,
    }
}

/// True for the packet that starts a stock image: function APP, an 11-byte payload starting with
/// `0xBC` (what Bitcraze's `opencv-viewer.py` must read first: it unpacks exactly 11 bytes).
pub fn is_stock_header_packet(route: Route, payload: &[u8]) -> bool {
    route.function == Function::App as u8
        && payload.len() == STOCK_HEADER_LEN
        && payload[0] == STOCK_MAGIC
}

#[cfg(feature = "alloc")]
pub use receiver::{StockError, StockImage, StockReceiver};

#[cfg(feature = "alloc")]
mod receiver {
    use super::*;
    use alloc::vec::Vec;

    /// One image of a stock stream.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct StockImage {
        pub header: StockHeader,
        pub data: Vec<u8>,
    }

    /// Why a stock stream packet was not used.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum StockError {
        /// Between images, a packet that is not an 11-byte `0xBC` header.
        NotAHeader,
        /// The header announces more than the configured maximum.
        Oversize { size: u32, max: usize },
        /// The image's packets overran its announced size.
        Overrun,
    }

    impl core::fmt::Display for StockError {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                StockError::NotAHeader => {
                    f.write_str("stock stream: packet is not a 0xBC image header")
                }
                StockError::Oversize { size, max } => {
                    write!(f, "stock stream: image of {size} bytes exceeds {max}")
                }
                StockError::Overrun => {
                    f.write_str("stock stream: image data longer than its header says")
                }
            }
        }
    }

    /// Reassembles stock `0xBC` images from APP packets (other functions are ignored).
    #[derive(Debug)]
    pub struct StockReceiver {
        current: Option<(StockHeader, Vec<u8>)>,
        max_size: usize,
    }

    impl StockReceiver {
        pub fn new(max_size: usize) -> Self {
            StockReceiver {
                current: None,
                max_size,
            }
        }

        /// Feeds one packet; returns a completed image.
        pub fn push(
            &mut self,
            route: Route,
            payload: &[u8],
        ) -> Result<Option<StockImage>, StockError> {
            if route.function != Function::App as u8 {
                return Ok(None);
            }
            match &mut self.current {
                None => {
                    let h = StockHeader::decode(payload).ok_or(StockError::NotAHeader)?;
                    if h.size as usize > self.max_size {
                        return Err(StockError::Oversize {
                            size: h.size,
                            max: self.max_size,
                        });
                    }
                    if h.size == 0 {
                        return Ok(Some(StockImage {
                            header: h,
                            data: Vec::new(),
                        }));
                    }
                    self.current = Some((h, Vec::with_capacity(h.size as usize)));
                    Ok(None)
                }
                Some((h, data)) => {
                    if data.len() + payload.len() > h.size as usize {
                        self.current = None;
                        return Err(StockError::Overrun);
                    }
                    data.extend_from_slice(payload);
                    if data.len() == h.size as usize {
                        let (header, data) = self.current.take().expect("present");
                        return Ok(Some(StockImage { header, data }));
                    }
                    Ok(None)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// The stock firmware's sender, transcribed from `send_image_via_wifi` /
    /// `sendBufferViaCPXBlocking` (aideck-gap8-examples), producing wire bytes.
    fn stock_c_model(image: &[u8], w: u16, h: u16, chunk: usize) -> Vec<u8> {
        let mut wire = Vec::new();
        let mut send = |data: &[u8]| {
            wire.extend_from_slice(&((data.len() + 2) as u16).to_le_bytes());
            // route: dst WIFI_HOST (3), src GAP8 (4), lastPacket = true; function APP.
            wire.push(3 | 4 << 3 | 1 << 6);
            wire.push(5);
            wire.extend_from_slice(data);
        };
        let mut hdr = Vec::new();
        hdr.push(0xBC);
        hdr.extend_from_slice(&w.to_le_bytes());
        hdr.extend_from_slice(&h.to_le_bytes());
        hdr.push(1);
        hdr.push(0);
        hdr.extend_from_slice(&(image.len() as u32).to_le_bytes());
        send(&hdr);
        let mut offset = 0;
        loop {
            let size = chunk.min(image.len() - offset);
            send(&image[offset..offset + size]);
            offset += size;
            if size != chunk {
                break;
            }
        }
        wire
    }

    fn ours(image: &[u8], w: u16, h: u16, chunk: usize) -> Vec<u8> {
        let mut s = StockStreamer::raw(image, w, h, chunk).unwrap();
        let mut out = [0u8; cpx::MAX_WIRE_PACKET];
        let mut wire = Vec::new();
        while let Some(n) = s.next_packet(&mut out) {
            wire.extend_from_slice(&out[..n.unwrap()]);
        }
        wire
    }

    #[test]
    fn byte_identical_to_the_stock_streamer_for_the_camera_frame() {
        let image: Vec<u8> = (0..324 * 244).map(|i| (i * 7) as u8).collect();
        for chunk in [128, 256, 512, 1020] {
            assert_eq!(
                ours(&image, 324, 244, chunk),
                stock_c_model(&image, 324, 244, chunk),
                "chunk {chunk}"
            );
        }
        // 1 header packet + 78 image packets at 1020 (platform facts).
        let wire = ours(&image, 324, 244, 1020);
        assert_eq!(wire.len(), 4 + 11 + 78 * 4 + 79_056);
        assert_eq!(&wire[..6], &[13, 0, 0x63, 0x05, 0xBC, 0x44]);
    }

    #[test]
    fn client_status_is_the_stock_esp32_notification() {
        // aideck-esp-firmware main/wifi.c: route ESP32 (2) -> GAP8 (4), last packet, WIFI_CTRL (4),
        // data [0x32, 1] on connect and [0x32, 0] on disconnect.
        let mut out = [0u8; 16];
        let n = cpx::encode_packet(CLIENT_STATUS_ROUTE, &client_status_payload(true), &mut out)
            .unwrap();
        assert_eq!(&out[..n], &[4, 0, 4 | 2 << 3 | 1 << 6, 4, 0x32, 1]);
        assert_eq!(
            parse_client_status(CLIENT_STATUS_ROUTE, &[0x32, 1]),
            Some(true)
        );
        assert_eq!(
            parse_client_status(CLIENT_STATUS_ROUTE, &[0x32, 0]),
            Some(false)
        );
        assert_eq!(parse_client_status(CLIENT_STATUS_ROUTE, &[0x31, 1]), None);
        assert_eq!(parse_client_status(STOCK_ROUTE, &[0x32, 1]), None);
        let h = StockHeader {
            width: 324,
            height: 244,
            depth: 1,
            kind: 0,
            size: 79_056,
        }
        .encode();
        assert!(is_stock_header_packet(STOCK_ROUTE, &h));
        assert!(!is_stock_header_packet(STOCK_ROUTE, &h[..10]));
        assert!(!is_stock_header_packet(CLIENT_STATUS_ROUTE, &h));
        let mut body = [0u8; 12];
        body[0] = 0xBC;
        assert!(!is_stock_header_packet(STOCK_ROUTE, &body));
    }

    #[test]
    fn exact_multiple_omits_the_stock_empty_trailing_packet() {
        let image = [1u8; 2040];
        let stock = stock_c_model(&image, 2040, 1, 1020);
        let ours = ours(&image, 2040, 1, 1020);
        assert_eq!(stock.len(), ours.len() + 4);
        assert_eq!(&stock[..ours.len()], &ours[..]);
    }

    /// Parsed back the way the stock viewer does, and by [`StockReceiver`].
    #[test]
    fn stock_viewer_model_and_receiver_read_it() {
        let image: Vec<u8> = (0..324 * 244).map(|i| (i * 3) as u8).collect();
        let wire = ours(&image, 324, 244, 512);
        // opencv-viewer.py: read 4 bytes [length, routing, function], then length - 2 bytes, unpack
        // '<BHHBBI' from the header, then collect packets until `size` bytes.
        let mut pos = 0;
        let mut rx = |n: usize| {
            let s = &wire[pos..pos + n];
            pos += n;
            s.to_vec()
        };
        let info = rx(4);
        let len = u16::from_le_bytes([info[0], info[1]]) as usize;
        let hdr = rx(len - 2);
        let h = StockHeader::decode(&hdr).unwrap();
        assert_eq!(
            (h.width, h.height, h.depth, h.kind, h.size),
            (324, 244, 1, 0, 79_056)
        );
        let mut img = Vec::new();
        while img.len() < h.size as usize {
            let info = rx(4);
            let len = u16::from_le_bytes([info[0], info[1]]) as usize;
            img.extend(rx(len - 2));
        }
        assert_eq!(img, image);
        // StockReceiver through the CPX decoder.
        #[cfg(feature = "alloc")]
        stock_receiver_reads(&wire, &image);
    }

    #[cfg(feature = "alloc")]
    fn stock_receiver_reads(wire: &[u8], image: &[u8]) {
        let mut d = crate::cpx::StreamDecoder::new();
        let mut r = StockReceiver::new(1 << 20);
        let mut got = Vec::new();
        let mut w: &[u8] = wire;
        while let Some(p) = d.decode(&mut w) {
            let p = p.unwrap();
            if let Some(i) = r.push(p.route, p.payload).unwrap() {
                got.push(i);
            }
        }
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, image);
    }
}
