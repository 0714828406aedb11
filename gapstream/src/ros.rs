//! ROS 2 messages in CDR (little-endian, plain CDR as ROS 2's rmw implementations and rosbag2
//! write it): `sensor_msgs/msg/Image` and gapstream's own `gapstream_msgs/msg/FrameInfo`, with
//! their message definitions in the `ros2msg` form rosbag2 embeds in MCAP schemas (the type's
//! definition, then each dependency after a line of 80 `=` and `MSG: pkg/Type`).

use crate::drone_state::DroneState;
use crate::metrics::Counters;
use crate::receiver::Frame;

/// The definitions a message using `std_msgs/Header` carries after its own, as ROS 2 writes them
/// into a `ros2msg` schema (a literal, for `concat!`).
macro_rules! header_dependencies {
    () => {
        concat!(
            "\n",
            "================================================================================\n",
            "MSG: std_msgs/Header\n",
            "builtin_interfaces/Time stamp\n",
            "string frame_id\n",
            "\n",
            "================================================================================\n",
            "MSG: builtin_interfaces/Time\n",
            "int32 sec\n",
            "uint32 nanosec\n",
        )
    };
}

/// `sensor_msgs/msg/Image` with its dependencies.
pub const IMAGE_TYPE: &str = "sensor_msgs/msg/Image";
pub const IMAGE_DEFINITION: &str = concat!(
    "std_msgs/Header header\n",
    "uint32 height\n",
    "uint32 width\n",
    "string encoding\n",
    "uint8 is_bigendian\n",
    "uint32 step\n",
    "uint8[] data\n",
    header_dependencies!(),
);

/// `sensor_msgs/msg/CompressedImage` with its dependencies: a JPEG frame as the drone coded it.
pub const COMPRESSED_IMAGE_TYPE: &str = "sensor_msgs/msg/CompressedImage";
pub const COMPRESSED_IMAGE_DEFINITION: &str = concat!(
    "std_msgs/Header header\n",
    "string format\n",
    "uint8[] data\n",
    header_dependencies!(),
);

/// The `format` of a JPEG frame's CompressedImage: what ROS's `compressed_image_transport` writes
/// for a greyscale JPEG (`<raw encoding>; jpeg compressed <coded encoding>`).
pub const JPEG_MONO8_FORMAT: &str = "mono8; jpeg compressed mono8";

/// A JPEG frame's `sensor_msgs/msg/CompressedImage`: the verified JPEG file as is, stamped with
/// the capture time; None for any other frame (JPEG-LS frames go out as an Image of their decoded
/// samples: ROS has no JPEG-LS image transport).
pub fn compressed_image(f: &Frame) -> Option<Vec<u8>> {
    let jpeg = f.coded.as_deref()?;
    if f.format() != Ok(gapstream_protocol::wire::PixelFormat::Jpeg) {
        return None;
    }
    let mut c = Cdr::new();
    c.header(f.capture_ns().unwrap_or(f.receive_ns));
    c.string(JPEG_MONO8_FORMAT);
    c.bytes(jpeg);
    Some(c.into_bytes())
}

/// gapstream's per-frame metadata, published next to each Image (same `header.stamp`).
pub const FRAME_INFO_TYPE: &str = "gapstream_msgs/msg/FrameInfo";
pub const FRAME_INFO_DEFINITION: &str = concat!(
    "# One verified gapstream frame: the Image with the same header.stamp carries its pixels.\n",
    "std_msgs/Header header\n",
    "builtin_interfaces/Time receive_stamp\n",
    "uint64 sequence\n",
    "uint32 key_epoch\n",
    "string suite\n",
    "float64 latency_ms\n",
    "uint64 frames\n",
    "uint64 lost\n",
    "uint64 tag_failures\n",
    "uint64 replays\n",
    "# The drone's state record of the frame (authenticated with it): flags (1 valid, 2 stale),\n",
    "# the STM32's time of the sample (us), its age at the end of the exposure (ms, NaN without\n",
    "# a sample), the capture time's uncertainty on this clock (ms; NaN without a capture time,\n",
    "# and before a two-way exchange anchors it: then late by the link's minimum transit) and\n",
    "# whether a two-way exchange anchors it.\n",
    "uint16 state_flags\n",
    "uint32 stm32_us\n",
    "float64 state_age_ms\n",
    "float64 stamp_uncertainty_ms\n",
    "bool stamp_two_way\n",
    header_dependencies!(),
);

/// `header.frame_id` of everything gapstream publishes.
pub const FRAME_ID: &str = "gapstream_camera";

/// The definitions of `geometry_msgs` types an Odometry or a TFMessage uses, as ros2msg
/// dependency sections (a literal, for `concat!`).
macro_rules! msg_section {
    ($name:literal, $body:literal) => {
        concat!(
            "\n",
            "================================================================================\n",
            "MSG: ",
            $name,
            "\n",
            $body
        )
    };
}

/// `nav_msgs/msg/Odometry` with its dependencies: the drone's state of a frame (pose in the world
/// frame, twist in the body frame), stamped like the frame's Image.
pub const ODOMETRY_TYPE: &str = "nav_msgs/msg/Odometry";
pub const ODOMETRY_DEFINITION: &str = concat!(
    "std_msgs/Header header\n",
    "string child_frame_id\n",
    "geometry_msgs/PoseWithCovariance pose\n",
    "geometry_msgs/TwistWithCovariance twist\n",
    header_dependencies!(),
    msg_section!(
        "geometry_msgs/PoseWithCovariance",
        "geometry_msgs/Pose pose\nfloat64[36] covariance\n"
    ),
    msg_section!(
        "geometry_msgs/Pose",
        "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n"
    ),
    msg_section!("geometry_msgs/Point", "float64 x\nfloat64 y\nfloat64 z\n"),
    msg_section!(
        "geometry_msgs/Quaternion",
        "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n"
    ),
    msg_section!(
        "geometry_msgs/TwistWithCovariance",
        "geometry_msgs/Twist twist\nfloat64[36] covariance\n"
    ),
    msg_section!(
        "geometry_msgs/Twist",
        "geometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular\n"
    ),
    msg_section!("geometry_msgs/Vector3", "float64 x\nfloat64 y\nfloat64 z\n"),
);

/// `tf2_msgs/msg/TFMessage` with its dependencies: the world → body transform of each frame.
pub const TF_TYPE: &str = "tf2_msgs/msg/TFMessage";
pub const TF_DEFINITION: &str = concat!(
    "geometry_msgs/TransformStamped[] transforms\n",
    msg_section!(
        "geometry_msgs/TransformStamped",
        "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/Transform transform\n"
    ),
    header_dependencies!(),
    msg_section!(
        "geometry_msgs/Transform",
        "geometry_msgs/Vector3 translation\ngeometry_msgs/Quaternion rotation\n"
    ),
    msg_section!("geometry_msgs/Vector3", "float64 x\nfloat64 y\nfloat64 z\n"),
    msg_section!(
        "geometry_msgs/Quaternion",
        "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n"
    ),
);

/// The frame ids of the state's messages (`--world-frame`, `--body-frame`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFrames {
    /// The fixed frame the pose is in (`header.frame_id`).
    pub world: String,
    /// The drone's body frame (`child_frame_id`).
    pub body: String,
}

impl Default for StateFrames {
    fn default() -> Self {
        StateFrames {
            world: "world".into(),
            body: "crazyflie".into(),
        }
    }
}

/// The drone's state as `nav_msgs/msg/Odometry` stamped `stamp_ns`: position and orientation in
/// the world frame; linear velocity turned into the body frame (ROS: the twist is in
/// `child_frame_id`), body rates as they are; covariances zero (the flight controller sends none).
pub fn odometry(stamp_ns: u64, frames: &StateFrames, s: &DroneState) -> Vec<u8> {
    let mut c = Cdr::new();
    c.time(stamp_ns);
    c.string(&frames.world);
    c.string(&frames.body);
    for v in s.position_m.iter().chain(&s.orientation) {
        c.f64(*v);
    }
    for _ in 0..36 {
        c.f64(0.0);
    }
    let body = crate::drone_state::world_to_body(s.orientation, s.velocity_m_s);
    for v in body.iter().chain(&s.rates_rad_s) {
        c.f64(*v);
    }
    for _ in 0..36 {
        c.f64(0.0);
    }
    c.into_bytes()
}

/// The world → body transform as `tf2_msgs/msg/TFMessage` (one `TransformStamped`).
pub fn tf(stamp_ns: u64, frames: &StateFrames, s: &DroneState) -> Vec<u8> {
    let mut c = Cdr::new();
    c.u32(1);
    c.time(stamp_ns);
    c.string(&frames.world);
    c.string(&frames.body);
    for v in s.position_m.iter().chain(&s.orientation) {
        c.f64(*v);
    }
    c.into_bytes()
}

/// Plain CDR, little-endian, after the 4-byte encapsulation header; alignment counts from the
/// end of that header.
pub struct Cdr {
    buf: Vec<u8>,
}

impl Default for Cdr {
    fn default() -> Self {
        Self::new()
    }
}

impl Cdr {
    pub fn new() -> Self {
        Cdr {
            buf: vec![0x00, 0x01, 0x00, 0x00],
        }
    }
    fn align(&mut self, n: usize) {
        while (self.buf.len() - 4) % n != 0 {
            self.buf.push(0);
        }
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.align(2);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }
    pub fn u64(&mut self, v: u64) {
        self.align(8);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    /// Length (with the NUL), bytes, NUL.
    pub fn string(&mut self, s: &str) {
        self.u32(s.len() as u32 + 1);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
    /// `builtin_interfaces/Time` from Unix ns.
    pub fn time(&mut self, ns: u64) {
        self.i32((ns / 1_000_000_000).min(i32::MAX as u64) as i32);
        self.u32((ns % 1_000_000_000) as u32);
    }
    /// `std_msgs/Header`.
    pub fn header(&mut self, stamp_ns: u64) {
        self.time(stamp_ns);
        self.string(FRAME_ID);
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// The frame's `sensor_msgs/msg/Image`: `mono8`, or `bayer_rggb8` for the colour HM01B0's mosaic
/// (undemosaiced: ROS's image pipeline debayers), stamped with the capture time (the receive
/// time when the stream carries none): [`Frame::stamp_ns`].
pub fn image(f: &Frame, bayer: bool) -> Vec<u8> {
    let mut c = Cdr::new();
    c.header(f.stamp_ns());
    c.u32(f.height() as u32);
    c.u32(f.width() as u32);
    c.string(if bayer || f.is_bayer() {
        "bayer_rggb8"
    } else {
        "mono8"
    });
    c.u8(0);
    c.u32(f.width() as u32);
    c.bytes(&f.pixels);
    c.into_bytes()
}

/// The frame's `gapstream_msgs/msg/FrameInfo` with the receiver's counters when it was delivered
/// (latency NaN when unknown).
pub fn frame_info(f: &Frame, counters: &Counters) -> Vec<u8> {
    let mut c = Cdr::new();
    c.header(f.stamp_ns());
    c.time(f.receive_ns);
    c.u64(f.seq());
    c.u32(f.epoch().unwrap_or(0));
    c.string(&f.suite);
    c.f64(f.latency_ms.unwrap_or(f64::NAN));
    c.u64(counters.frames);
    c.u64(counters.lost);
    c.u64(counters.tag_failures);
    c.u64(counters.replays);
    let rec = f.state.map(|s| s.record).unwrap_or_default();
    c.u16(rec.flags);
    c.u32(rec.sample.stm32_us);
    c.f64(f.state.and_then(|s| s.age_ms()).unwrap_or(f64::NAN));
    c.f64(
        f.capture
            .and_then(|e| e.bound_ns())
            .map_or(f64::NAN, |b| b as f64 / 1e6),
    );
    c.u8(f.capture.is_some_and(|e| e.two_way) as u8);
    c.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Frame {
        let mut f = crate::receiver::frame::test_frame(9, 3, 2, vec![1, 2, 3, 4, 5, 6]);
        f.header.epoch = 2;
        f.header.capture_ns = 1_700_000_001_500_000_000;
        f.suite = "chacha20poly1305".into();
        f
    }

    #[test]
    fn image_cdr_layout() {
        let b = image(&frame(), false);
        let mut want = vec![0, 1, 0, 0];
        want.extend_from_slice(&1_700_000_001i32.to_le_bytes());
        want.extend_from_slice(&500_000_000u32.to_le_bytes());
        want.extend_from_slice(&17u32.to_le_bytes());
        want.extend_from_slice(b"gapstream_camera\0");
        want.extend_from_slice(&[0, 0, 0]); // align 4 (offset 25 -> 28)
        want.extend_from_slice(&2u32.to_le_bytes());
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(&6u32.to_le_bytes());
        want.extend_from_slice(b"mono8\0");
        want.push(0); // is_bigendian (offset 46)
        want.push(0); // align 4 (offset 47 -> 48)
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(&6u32.to_le_bytes());
        want.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(b, want);
        assert!(
            image(&frame(), true)
                .windows(12)
                .any(|w| w == b"bayer_rggb8\0")
        );
    }

    #[test]
    fn frame_info_aligns_64_bit_fields() {
        let mut f = frame();
        f.receive_ns = 1_700_000_001_600_000_000;
        f.latency_ms = Some(100.0);
        let b = frame_info(
            &f,
            &Counters {
                frames: 10,
                lost: 1,
                tag_failures: 3,
                replays: 0,
                ..Counters::default()
            },
        );
        // header (8 + 4 + 17 = 29 -> align 4 = 32), receive stamp 8 -> 40, sequence at 40.
        assert_eq!(&b[4 + 40..4 + 48], &9u64.to_le_bytes());
        assert_eq!(&b[4 + 48..4 + 52], &2u32.to_le_bytes());
        // suite: length at 52, 17 bytes -> 73, latency aligned to 80.
        assert_eq!(&b[4 + 80..4 + 88], &100f64.to_le_bytes());
        assert_eq!(&b[4 + 104..4 + 112], &3u64.to_le_bytes());
        // state flags u16 at 120, stm32_us at 124, age at 128, uncertainty at 136, bool at 144.
        assert_eq!(&b[4 + 120..4 + 122], &0u16.to_le_bytes());
        assert!(f64::from_le_bytes(b[4 + 128..4 + 136].try_into().unwrap()).is_nan());
        assert_eq!(b.len(), 4 + 145);
    }
}
