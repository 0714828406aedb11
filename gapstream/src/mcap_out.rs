//! `--mcap FILE`: every verified frame as a ROS 2 `sensor_msgs/msg/Image` on `/gapstream/image`
//! and its metadata as `gapstream_msgs/msg/FrameInfo` on `/gapstream/frame_info`, CDR-encoded with
//! their `ros2msg` schemas embedded (MCAP profile `ros2`), written with Foxglove's `mcap` crate:
//! a file Foxglove opens and `ros2 bag play` (MCAP storage plugin) replays. Log time = receive
//! time, publish time and `header.stamp` = capture time. Chunks are uncompressed (frames are
//! noise-like after all; and readers need no codec).

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

/// rosbag2's default QoS for a recorded topic (reliable, volatile, keep last), so that `ros2 bag
/// play` offers what a live publisher would.
const QOS: &str = "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false\n";

/// The topics of one drone of a ground station's recording: `/<drone>/image`, `/<drone>/frame_info`.
pub fn fleet_topics(drone: &str) -> (String, String) {
    (format!("/{drone}/image"), format!("/{drone}/frame_info"))
}

/// An open MCAP recording.
pub struct McapRecorder {
    path: PathBuf,
    writer: Option<mcap::Writer<BufWriter<File>>>,
    image: u16,
    info: u16,
    bayer: bool,
    written: u64,
    /// A ground station's recording ([`McapRecorder::create_fleet`]): the schemas, and each
    /// drone's channels (image, frame_info), added with its first frame.
    fleet: Option<(u16, u16, FleetChannels)>,
}

/// A ground station's channels by drone: (image, frame_info).
type FleetChannels = BTreeMap<String, (u16, u16)>;

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("MCAP recording {}: {e}", path.display())
}

impl McapRecorder {
    /// Creates `path` (replacing it) with both channels. `bayer`: the frames are RGGB mosaics.
    pub fn create(path: &Path, bayer: bool) -> Result<Self, String> {
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
        let meta = BTreeMap::from([("offered_qos_profiles".to_string(), QOS.to_string())]);
        let si = w
            .add_schema(ros::IMAGE_TYPE, "ros2msg", ros::IMAGE_DEFINITION.as_bytes())
            .map_err(|e| err(path, e))?;
        let image = w
            .add_channel(si, IMAGE_TOPIC, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        let sf = w
            .add_schema(
                ros::FRAME_INFO_TYPE,
                "ros2msg",
                ros::FRAME_INFO_DEFINITION.as_bytes(),
            )
            .map_err(|e| err(path, e))?;
        let info = w
            .add_channel(sf, INFO_TOPIC, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        Ok(McapRecorder {
            path: path.to_owned(),
            writer: Some(w),
            image,
            info,
            bayer,
            written: 0,
            fleet: None,
        })
    }

    /// One file for a ground station: each drone's frames on its own topics
    /// ([`fleet_topics`]: `/<drone>/image`, `/<drone>/frame_info`), the channels added with the
    /// drone's first frame.
    pub fn create_fleet(path: &Path, bayer: bool) -> Result<Self, String> {
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
        let si = w
            .add_schema(ros::IMAGE_TYPE, "ros2msg", ros::IMAGE_DEFINITION.as_bytes())
            .map_err(|e| err(path, e))?;
        let sf = w
            .add_schema(
                ros::FRAME_INFO_TYPE,
                "ros2msg",
                ros::FRAME_INFO_DEFINITION.as_bytes(),
            )
            .map_err(|e| err(path, e))?;
        Ok(McapRecorder {
            path: path.to_owned(),
            writer: Some(w),
            image: 0,
            info: 0,
            bayer,
            written: 0,
            fleet: Some((si, sf, BTreeMap::new())),
        })
    }

    /// The channels of `drone` (a ground station's), added when it first comes.
    fn channels(&mut self, drone: &str) -> Result<(u16, u16), String> {
        let (Some(w), Some((si, sf, map))) = (self.writer.as_mut(), self.fleet.as_mut()) else {
            return Ok((self.image, self.info));
        };
        if let Some(c) = map.get(drone) {
            return Ok(*c);
        }
        let meta = BTreeMap::from([("offered_qos_profiles".to_string(), QOS.to_string())]);
        let (ti, tf) = fleet_topics(drone);
        let path = &self.path;
        let image = w
            .add_channel(*si, &ti, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        let info = w
            .add_channel(*sf, &tf, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        map.insert(drone.to_string(), (image, info));
        Ok((image, info))
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
        let (image, info_ch) = self.channels(&f.source)?;
        let Some(w) = self.writer.as_mut() else {
            return Err(err(&self.path, "already closed"));
        };
        let stamp = f.capture_ns().unwrap_or(f.receive_ns);
        let seq = self.written as u32;
        let img = ros::image(f, self.bayer);
        let info = ros::frame_info(f, counters);
        for (channel_id, data) in [(image, img), (info_ch, info)] {
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
            Some((_, _, m)) => format!(
                "/<drone>/image, /<drone>/frame_info for {} drone{}",
                m.len(),
                if m.len() == 1 { "" } else { "s" }
            ),
            None => format!("{IMAGE_TOPIC}, {INFO_TOPIC}"),
        };
        Ok(Some(format!(
            "wrote {} frames to {} (ROS 2 MCAP: {topics})",
            self.written,
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
        let mut r = McapRecorder::create(&p, false).unwrap();
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
}
