//! `--mcap FILE`: every verified frame as a ROS 2 `sensor_msgs/msg/Image` on `/gapstream/image`
//! and its metadata as `gapstream_msgs/msg/FrameInfo` on `/gapstream/frame_info`, and when the
//! frame carries the drone's state, a `nav_msgs/msg/Odometry` on `/gapstream/odometry` and the
//! world → body transform as `tf2_msgs/msg/TFMessage` on `/tf` (frame ids `--world-frame`,
//! `--body-frame`), CDR-encoded with their `ros2msg` schemas embedded (MCAP profile `ros2`),
//! written with Foxglove's `mcap` crate: a file Foxglove opens and `ros2 bag play` (MCAP storage
//! plugin) replays. Log time = receive time; publish time and every `header.stamp` of a frame's
//! messages = its acquisition time on this machine's clock ([`Frame::stamp_ns`]). Chunks are
//! uncompressed (frames are noise-like after all; and readers need no codec).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::metrics::Counters;
use crate::receiver::Frame;
use crate::receiver::bus::{Consumer, Counts, Policy};
use crate::receiver::outputs::RECORDER_QUEUE;
use crate::ros;

/// Topic names (ROS 2 style).
pub const IMAGE_TOPIC: &str = "/gapstream/image";
pub const INFO_TOPIC: &str = "/gapstream/frame_info";
/// JPEG frames (`--codec jpeg`): `sensor_msgs/msg/CompressedImage`, format
/// `"mono8; jpeg compressed mono8"`, on image_transport's topic name for compressed images.
pub const COMPRESSED_TOPIC: &str = "/gapstream/image/compressed";
pub const ODOMETRY_TOPIC: &str = "/gapstream/odometry";
pub const TF_TOPIC: &str = "/tf";

/// rosbag2's default QoS for a recorded topic (reliable, volatile, keep last), so that `ros2 bag
/// play` offers what a live publisher would.
const QOS: &str = "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false\n";

/// The topics of one drone of a ground station's recording: `/<drone>/image`,
/// `/<drone>/frame_info`, `/<drone>/image/compressed` (JPEG frames), `/<drone>/odometry` and
/// `/<drone>/tf` (the drone's state, body frame `<drone>/<body>`).
pub fn fleet_topics(drone: &str) -> [String; 5] {
    [
        format!("/{drone}/image"),
        format!("/{drone}/frame_info"),
        format!("/{drone}/image/compressed"),
        format!("/{drone}/odometry"),
        format!("/{drone}/tf"),
    ]
}

/// The channels a frame is written on (or, in [`McapRecorder::fleet`], the schemas they use).
#[derive(Clone, Copy, Debug, Default)]
struct Channels {
    image: u16,
    info: u16,
    compressed: u16,
    odometry: u16,
    tf: u16,
}

/// An open MCAP recording.
pub struct McapRecorder {
    path: PathBuf,
    writer: Option<mcap::Writer<BufWriter<File>>>,
    /// One stream's channels (unused on a ground station's recording).
    channels: Channels,
    /// The state's frame ids (a ground station's drones: body frame `<drone>/<body>`).
    frames: ros::StateFrames,
    bayer: bool,
    written: u64,
    states: u64,
    /// A ground station's recording ([`McapRecorder::create_fleet`]): the schemas, and each
    /// drone's channels, added with its first frame.
    fleet: Option<(Channels, FleetChannels)>,
}

/// A ground station's channels by drone.
type FleetChannels = BTreeMap<String, Channels>;

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("MCAP recording {}: {e}", path.display())
}

/// Creates `path` (replacing it) as a ROS 2 MCAP file with the schemas of every channel.
fn open_writer(path: &Path) -> Result<(mcap::Writer<BufWriter<File>>, Channels), String> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| err(path, e))?;
    }
    let file = File::create(path).map_err(|e| err(path, e))?;
    let mut w = mcap::WriteOptions::new()
        .compression(None)
        .profile("ros2")
        .library(concat!("gapstream ", env!("CARGO_PKG_VERSION")))
        .create(BufWriter::new(file))
        .map_err(|e| err(path, e))?;
    let mut schema = |name: &str, def: &str| {
        w.add_schema(name, "ros2msg", def.as_bytes())
            .map_err(|e| err(path, e))
    };
    let schemas = Channels {
        image: schema(ros::IMAGE_TYPE, ros::IMAGE_DEFINITION)?,
        info: schema(ros::FRAME_INFO_TYPE, ros::FRAME_INFO_DEFINITION)?,
        compressed: schema(ros::COMPRESSED_IMAGE_TYPE, ros::COMPRESSED_IMAGE_DEFINITION)?,
        odometry: schema(ros::ODOMETRY_TYPE, ros::ODOMETRY_DEFINITION)?,
        tf: schema(ros::TF_TYPE, ros::TF_DEFINITION)?,
    };
    Ok((w, schemas))
}

/// Adds the channels `topics` (image, frame_info, compressed, odometry, tf) on `schemas`.
fn add_channels(
    w: &mut mcap::Writer<BufWriter<File>>,
    path: &Path,
    schemas: Channels,
    topics: [&str; 5],
) -> Result<Channels, String> {
    let meta = BTreeMap::from([("offered_qos_profiles".to_string(), QOS.to_string())]);
    let mut add = |schema: u16, topic: &str| {
        w.add_channel(schema, topic, "cdr", &meta)
            .map_err(|e| err(path, e))
    };
    Ok(Channels {
        image: add(schemas.image, topics[0])?,
        info: add(schemas.info, topics[1])?,
        compressed: add(schemas.compressed, topics[2])?,
        odometry: add(schemas.odometry, topics[3])?,
        tf: add(schemas.tf, topics[4])?,
    })
}

impl McapRecorder {
    /// Creates `path` (replacing it) with the stream's channels. `bayer`: the frames are RGGB
    /// mosaics; `frames`: the state's frame ids.
    pub fn create(path: &Path, bayer: bool, frames: ros::StateFrames) -> Result<Self, String> {
        let (mut w, schemas) = open_writer(path)?;
        let channels = add_channels(
            &mut w,
            path,
            schemas,
            [
                IMAGE_TOPIC,
                INFO_TOPIC,
                COMPRESSED_TOPIC,
                ODOMETRY_TOPIC,
                TF_TOPIC,
            ],
        )?;
        Ok(McapRecorder {
            path: path.to_owned(),
            writer: Some(w),
            channels,
            frames,
            bayer,
            written: 0,
            states: 0,
            fleet: None,
        })
    }

    /// One file for a ground station: each drone's frames on its own topics
    /// ([`fleet_topics`]), the channels added with the drone's first frame.
    pub fn create_fleet(path: &Path, bayer: bool) -> Result<Self, String> {
        let (w, schemas) = open_writer(path)?;
        Ok(McapRecorder {
            path: path.to_owned(),
            writer: Some(w),
            channels: Channels::default(),
            frames: ros::StateFrames::default(),
            bayer,
            written: 0,
            states: 0,
            fleet: Some((schemas, BTreeMap::new())),
        })
    }

    /// The channels of `drone` (a ground station's, added when it first comes).
    fn channels(&mut self, drone: &str) -> Result<Channels, String> {
        let (Some(w), Some((schemas, map))) = (self.writer.as_mut(), self.fleet.as_mut()) else {
            return Ok(self.channels);
        };
        if let Some(c) = map.get(drone) {
            return Ok(*c);
        }
        let t = fleet_topics(drone);
        let c = add_channels(w, &self.path, *schemas, [&t[0], &t[1], &t[2], &t[3], &t[4]])?;
        map.insert(drone.to_string(), c);
        Ok(c)
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.written
    }
}

/// An output of the receiver's bus: every frame, in order; frames it could not keep up with are
/// counted and reported, never silently missing.
impl Consumer for McapRecorder {
    fn name(&self) -> String {
        format!("MCAP recording {}", self.path.display())
    }
    fn policy(&self) -> Policy {
        Policy::Every(RECORDER_QUEUE)
    }
    fn frame(&mut self, f: &Arc<Frame>, counters: &Counters) -> Result<(), String> {
        let ch = self.channels(&f.source)?;
        let Some(w) = self.writer.as_mut() else {
            return Err(err(&self.path, "already closed"));
        };
        let stamp = f.stamp_ns();
        let seq = self.written as u32;
        // A JPEG frame as the file that verified (CompressedImage), any other as its samples.
        let mut msgs = vec![
            match ros::compressed_image(f) {
                Some(c) => (ch.compressed, c),
                None => (ch.image, ros::image(f, self.bayer)),
            },
            (ch.info, ros::frame_info(f, counters)),
        ];
        // A pose only when the drone had one (a record without a sample says "none yet").
        if let Some(s) = f.state.as_ref().filter(|s| s.record.is_valid()) {
            let frames = match &self.fleet {
                Some(_) => ros::StateFrames {
                    world: self.frames.world.clone(),
                    body: format!("{}/{}", f.source, self.frames.body),
                },
                None => self.frames.clone(),
            };
            msgs.push((ch.odometry, ros::odometry(stamp, &frames, s)));
            msgs.push((ch.tf, ros::tf(stamp, &frames, s)));
            self.states += 1;
        }
        for (channel_id, data) in msgs {
            w.write_to_known_channel(
                &mcap::records::MessageHeader {
                    channel_id,
                    sequence: seq,
                    log_time: f.receive_ns,
                    publish_time: stamp,
                },
                &data,
            )
            .map_err(|e| err(&self.path, e))?;
        }
        self.written += 1;
        Ok(())
    }

    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        let Some(mut w) = self.writer.take() else {
            return Ok(None);
        };
        w.finish().map_err(|e| err(&self.path, e))?;
        let topics = match &self.fleet {
            Some((_, m)) => format!(
                "/<drone>/image (JPEG frames: /<drone>/image/compressed), /<drone>/frame_info, /<drone>/odometry, /<drone>/tf for {} drone{}",
                m.len(),
                if m.len() == 1 { "" } else { "s" }
            ),
            None => format!(
                "{IMAGE_TOPIC} (JPEG frames: {COMPRESSED_TOPIC}), {INFO_TOPIC}, {ODOMETRY_TOPIC}, {TF_TOPIC}"
            ),
        };
        Ok(Some(format!(
            "wrote {} frames and {} states to {} (ROS 2 MCAP: {topics})",
            self.written,
            self.states,
            self.path.display()
        )))
    }
}

impl Drop for McapRecorder {
    /// A receiver that failed still leaves a readable file (summary and footer written).
    fn drop(&mut self) {
        if let Some(mut w) = self.writer.take() {
            let _ = w.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_readable_ros2_mcap() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.mcap");
        let mut r = McapRecorder::create(&p, false, ros::StateFrames::default()).unwrap();
        let c = Counters::default();
        for seq in 0..5u64 {
            let mut f = crate::receiver::frame::test_frame(seq, 4, 2, vec![seq as u8; 8]);
            f.header.epoch = 1;
            f.header.capture_ns = 1_000 + seq;
            f.receive_ns = 2_000 + seq;
            f.latency_ms = Some(1.0);
            r.frame(&Arc::new(f), &c).unwrap();
        }
        assert!(
            r.finish(&Counts::default())
                .unwrap()
                .unwrap()
                .contains("wrote 5 frames")
        );
        let bytes = std::fs::read(&p).unwrap();
        let mut n = [0u64; 2];
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            let s = m.channel.schema.as_ref().unwrap();
            assert_eq!(s.encoding, "ros2msg");
            if m.channel.topic == IMAGE_TOPIC {
                assert_eq!(s.name, "sensor_msgs/msg/Image");
                assert_eq!(m.data[m.data.len() - 8..], [n[0] as u8; 8]);
                assert_eq!(m.publish_time, 1_000 + n[0]);
                n[0] += 1;
            } else {
                assert_eq!(m.channel.topic, INFO_TOPIC);
                n[1] += 1;
            }
        }
        assert_eq!(n, [5, 5]);
    }

    /// A ground station's file: each drone on its own topics, every frame where it belongs.
    #[test]
    fn a_fleet_recording_has_topics_per_drone() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fleet.mcap");
        let mut r = McapRecorder::create_fleet(&p, false).unwrap();
        let c = Counters::default();
        for seq in 0..6u64 {
            let mut f = crate::receiver::frame::test_frame(seq, 4, 2, vec![seq as u8; 8]);
            f.source = Arc::from(if seq % 2 == 0 { "alpha" } else { "bravo" });
            r.frame(&Arc::new(f), &c).unwrap();
        }
        let line = r.finish(&Counts::default()).unwrap().unwrap();
        assert!(line.contains("for 2 drones"), "{line}");
        let bytes = std::fs::read(&p).unwrap();
        let mut got: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            if m.channel.topic.ends_with("/image") {
                got.entry(m.channel.topic.clone())
                    .or_default()
                    .push(m.data[m.data.len() - 1]);
            }
        }
        assert_eq!(
            got,
            BTreeMap::from([
                ("/alpha/image".to_string(), vec![0, 2, 4]),
                ("/bravo/image".to_string(), vec![1, 3, 5]),
            ])
        );
    }

    /// A JPEG frame goes to the compressed topic as a CompressedImage with ROS's format string
    /// and the verified file byte for byte.
    #[test]
    fn jpeg_frames_are_compressed_images() {
        use gapstream_protocol::wire::PixelFormat;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j.mcap");
        let mut r = McapRecorder::create(&p, false, ros::StateFrames::default()).unwrap();
        let jpeg: Vec<u8> = vec![0xff, 0xd8, 1, 2, 3, 0xff, 0xd9];
        let mut f = crate::receiver::frame::test_frame(0, 4, 2, vec![9; 8]);
        f.header.pixel_format = PixelFormat::Jpeg.code();
        f.coded = Some(Arc::from(jpeg.clone()));
        r.frame(&Arc::new(f), &Counters::default()).unwrap();
        r.finish(&Counts::default()).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let mut seen = 0;
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            if m.channel.topic == COMPRESSED_TOPIC {
                let s = m.channel.schema.as_ref().unwrap();
                assert_eq!(s.name, "sensor_msgs/msg/CompressedImage");
                assert!(
                    m.data
                        .windows(ros::JPEG_MONO8_FORMAT.len())
                        .any(|w| w == ros::JPEG_MONO8_FORMAT.as_bytes())
                );
                assert_eq!(m.data[m.data.len() - jpeg.len()..], jpeg[..]);
                seen += 1;
            }
            assert_ne!(m.channel.topic, IMAGE_TOPIC);
        }
        assert_eq!(seen, 1);
    }
}
