//! `--zenoh [ENDPOINT]` (cargo feature `zenoh`): every verified frame published on Zenoh, for
//! consumers on other machines of a lab (Zenoh peers or routers; ROS 2's rmw_zenoh speaks it too).
//!
//! | key expression | payload |
//! |---|---|
//! | `gapstream/<drone>/image` | `sensor_msgs/msg/Image`, CDR (the MCAP recorder's bytes) |
//! | `gapstream/<drone>/frame_info` | `gapstream_msgs/msg/FrameInfo`, CDR |
//! | `gapstream/<drone>/odometry` | `nav_msgs/msg/Odometry`, CDR: the drone's state of the frame (when it sends one), stamped like the Image |
//! | `gapstream/<drone>/tf` | `tf2_msgs/msg/TFMessage`, CDR: the world → body transform, same stamp |
//! | `gapstream/<drone>/stats` | JSON counters, every 0.5 s and at the end |
//!
//! Only verified frames are published, and they are published in clear inside Zenoh: beyond one
//! machine use Zenoh's own TLS and access control (for example a local `zenohd` router with a TLS
//! listener and an ACL, this process connecting to it on localhost).
//! Without ENDPOINT the session is a Zenoh peer with the default configuration (multicast
//! scouting); with one (`tcp/192.168.1.10:7447`) it connects there and scouts nothing.

use std::sync::Arc;

use zenoh::Wait;

use crate::metrics::Counters;
use crate::receiver::Frame;
use crate::receiver::bus::{Consumer, Counts, Policy, Status};
use crate::ros;

/// The publisher of one drone's stream.
pub struct ZenohPublisher {
    session: zenoh::Session,
    image: zenoh::pubsub::Publisher<'static>,
    info: zenoh::pubsub::Publisher<'static>,
    stats: zenoh::pubsub::Publisher<'static>,
    odometry: zenoh::pubsub::Publisher<'static>,
    tf: zenoh::pubsub::Publisher<'static>,
    frames: ros::StateFrames,
    bayer: bool,
    published: u64,
    prefix: String,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("zenoh: {e}")
}

impl ZenohPublisher {
    /// Opens a Zenoh session (`endpoint`: connect there; None: default peer) and declares the
    /// publishers under `gapstream/<drone>/`.
    pub fn open(
        endpoint: Option<&str>,
        drone: &str,
        bayer: bool,
        frames: ros::StateFrames,
    ) -> Result<Self, String> {
        if drone.is_empty() || drone.contains(['/', '*', '$', '?', '#']) {
            return Err(format!(
                "--drone {drone:?}: one key-expression chunk (no '/', '*', '$', '?', '#')"
            ));
        }
        let mut c = zenoh::Config::default();
        if let Some(ep) = endpoint {
            c.insert_json5("connect/endpoints", &format!("[\"{ep}\"]"))
                .map_err(|e| err(format!("endpoint {ep:?}: {e}")))?;
            c.insert_json5("scouting/multicast/enabled", "false")
                .map_err(err)?;
        }
        let session = zenoh::open(c).wait().map_err(err)?;
        let prefix = format!("gapstream/{drone}");
        let declare = |what: &str| {
            session
                .declare_publisher(format!("{prefix}/{what}"))
                .wait()
                .map_err(err)
        };
        Ok(ZenohPublisher {
            image: declare("image")?,
            info: declare("frame_info")?,
            stats: declare("stats")?,
            odometry: declare("odometry")?,
            tf: declare("tf")?,
            frames,
            session,
            bayer,
            published: 0,
            prefix,
        })
    }

    fn stats_json(&self, s: &Status) -> String {
        let c = &s.counters;
        format!(
            "{{\"frames\":{},\"published\":{},\"lost\":{},\"tag_failures\":{},\"replays\":{},\"malformed\":{},\"handshakes\":{},\"rekeys\":{},\"key_epoch\":{},\"suite\":\"{}\",\"latency_ms\":{}}}",
            c.frames,
            self.published,
            c.lost,
            c.tag_failures,
            c.replays,
            c.malformed,
            c.handshakes,
            c.rekeys,
            c.key_epoch,
            s.suite.replace(['"', '\\'], ""),
            s.row
                .latency
                .map(|p| p.p50)
                .filter(|v| v.is_finite())
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "null".into())
        )
    }
}

/// An output of the receiver's bus: a live feed, the freshest frames first (Zenoh's own
/// publisher drops rather than blocks too).
impl Consumer for ZenohPublisher {
    fn name(&self) -> String {
        format!("Zenoh publisher {}/", self.prefix)
    }
    fn policy(&self) -> Policy {
        Policy::Freshest(8)
    }
    fn frame(&mut self, f: &Arc<Frame>, counters: &Counters) -> Result<(), String> {
        self.image
            .put(ros::image(f, self.bayer))
            .wait()
            .map_err(err)?;
        self.info
            .put(ros::frame_info(f, counters))
            .wait()
            .map_err(err)?;
        if let Some(s) = f.state.as_ref().filter(|s| s.record.is_valid()) {
            let stamp = f.stamp_ns();
            self.odometry
                .put(ros::odometry(stamp, &self.frames, s))
                .wait()
                .map_err(err)?;
            self.tf
                .put(ros::tf(stamp, &self.frames, s))
                .wait()
                .map_err(err)?;
        }
        self.published += 1;
        Ok(())
    }

    /// Every 0.5 s (each new metrics row) and at the end.
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if s.new_row {
            self.stats.put(self.stats_json(s)).wait().map_err(err)?;
        }
        Ok(())
    }

    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        self.session.close().wait().map_err(err)?;
        Ok(Some(format!(
            "published {} frames on Zenoh under {}/ (image, frame_info, odometry, tf, stats)",
            self.published, self.prefix
        )))
    }
}
