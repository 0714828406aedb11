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
pub const ODOMETRY_TOPIC: &str = "/gapstream/odometry";
pub const TF_TOPIC: &str = "/tf";

/// rosbag2's default QoS for a recorded topic (reliable, volatile, keep last), so that `ros2 bag
/// play` offers what a live publisher would.
const QOS: &str = "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false\n";

/// An open MCAP recording.
pub struct McapRecorder {
    path: PathBuf,
    writer: Option<mcap::Writer<BufWriter<File>>>,
    image: u16,
    info: u16,
    odometry: u16,
    tf: u16,
    frames: ros::StateFrames,
    bayer: bool,
    written: u64,
    states: u64,
}

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("MCAP recording {}: {e}", path.display())
}

impl McapRecorder {
    /// Creates `path` (replacing it) with its channels. `bayer`: the frames are RGGB mosaics;
    /// `frames`: the state's frame ids.
    pub fn create(path: &Path, bayer: bool, frames: ros::StateFrames) -> Result<Self, String> {
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
        let so = w
            .add_schema(
                ros::ODOMETRY_TYPE,
                "ros2msg",
                ros::ODOMETRY_DEFINITION.as_bytes(),
            )
            .map_err(|e| err(path, e))?;
        let odometry = w
            .add_channel(so, ODOMETRY_TOPIC, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        let st = w
            .add_schema(ros::TF_TYPE, "ros2msg", ros::TF_DEFINITION.as_bytes())
            .map_err(|e| err(path, e))?;
        let tf = w
            .add_channel(st, TF_TOPIC, "cdr", &meta)
            .map_err(|e| err(path, e))?;
        Ok(McapRecorder {
            path: path.to_owned(),
            writer: Some(w),
            image,
            info,
            odometry,
            tf,
            frames,
            bayer,
            written: 0,
            states: 0,
        })
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
        let Some(w) = self.writer.as_mut() else {
            return Err(err(&self.path, "already closed"));
        };
        let stamp = f.stamp_ns();
        let seq = self.written as u32;
        let mut msgs = vec![
            (self.image, ros::image(f, self.bayer)),
            (self.info, ros::frame_info(f, counters)),
        ];
        // A pose only when the drone had one (a record without a sample says "none yet").
        if let Some(s) = f.state.as_ref().filter(|s| s.record.is_valid()) {
            msgs.push((self.odometry, ros::odometry(stamp, &self.frames, s)));
            msgs.push((self.tf, ros::tf(stamp, &self.frames, s)));
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
        Ok(Some(format!(
            "wrote {} frames and {} states to {} (ROS 2 MCAP: {IMAGE_TOPIC}, {INFO_TOPIC}, {ODOMETRY_TOPIC}, {TF_TOPIC})",
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
}
