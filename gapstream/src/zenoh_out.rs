//! `--zenoh [ENDPOINT]` (cargo feature `zenoh`): every verified frame published on Zenoh, for
//! consumers on other machines of a lab (Zenoh peers or routers; ROS 2's rmw_zenoh speaks it too).
//!
//! | key expression | payload |
//! |---|---|
//! | `gapstream/<drone>/image` | `sensor_msgs/msg/Image`, CDR (the MCAP recorder's bytes) |
//! | `gapstream/<drone>/frame_info` | `gapstream_msgs/msg/FrameInfo`, CDR |
//! | `gapstream/<drone>/coded` | a coded frame's payload as it verified (`--codec jpeg`: the JPEG file, `jpegls`: the JPEG-LS stream), raw bytes; the decoded samples go to `image` |
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

/// One drone's publishers under `gapstream/<drone>/`.
struct Pubs {
    image: zenoh::pubsub::Publisher<'static>,
    info: zenoh::pubsub::Publisher<'static>,
    coded: zenoh::pubsub::Publisher<'static>,
    stats: zenoh::pubsub::Publisher<'static>,
    odometry: zenoh::pubsub::Publisher<'static>,
    tf: zenoh::pubsub::Publisher<'static>,
    /// Frames published for this drone (its stats' `published`).
    published: u64,
}

/// The publisher of one drone's stream, or of every drone of a ground station
/// ([`ZenohPublisher::open_fleet`]: each drone under its own `gapstream/<drone>/`).
pub struct ZenohPublisher {
    session: zenoh::Session,
    /// The drone of `--drone` (one stream), or None on a ground station (every frame's source).
    drone: Option<String>,
    pubs: std::collections::BTreeMap<String, Pubs>,
    /// The state's frame ids (a ground station's drones: body frame `<drone>/<body>`).
    frames: ros::StateFrames,
    bayer: bool,
    published: u64,
    prefix: String,
}

fn declare(session: &zenoh::Session, drone: &str) -> Result<Pubs, String> {
    let prefix = format!("gapstream/{drone}");
    let d = |what: &str| {
        session
            .declare_publisher(format!("{prefix}/{what}"))
            .wait()
            .map_err(err)
    };
    Ok(Pubs {
        image: d("image")?,
        info: d("frame_info")?,
        coded: d("coded")?,
        stats: d("stats")?,
        odometry: d("odometry")?,
        tf: d("tf")?,
        published: 0,
    })
}

fn session(endpoint: Option<&str>) -> Result<zenoh::Session, String> {
    let mut c = zenoh::Config::default();
    if let Some(ep) = endpoint {
        c.insert_json5("connect/endpoints", &format!("[\"{ep}\"]"))
            .map_err(|e| err(format!("endpoint {ep:?}: {e}")))?;
        c.insert_json5("scouting/multicast/enabled", "false")
            .map_err(err)?;
    }
    zenoh::open(c).wait().map_err(err)
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
        let session = session(endpoint)?;
        let pubs =
            std::collections::BTreeMap::from([(drone.to_string(), declare(&session, drone)?)]);
        Ok(ZenohPublisher {
            frames,
            session,
            drone: Some(drone.to_string()),
            pubs,
            bayer,
            published: 0,
            prefix: format!("gapstream/{drone}"),
        })
    }

    /// A ground station's publisher: each drone's frames under `gapstream/<drone>/` (its
    /// publishers declared with its first frame or status; fleet names are valid key chunks).
    pub fn open_fleet(endpoint: Option<&str>, bayer: bool) -> Result<Self, String> {
        Ok(ZenohPublisher {
            session: session(endpoint)?,
            drone: None,
            pubs: std::collections::BTreeMap::new(),
            frames: ros::StateFrames::default(),
            bayer,
            published: 0,
            prefix: "gapstream/<drone>".into(),
        })
    }

    /// The publishers of the frame's or status's drone.
    fn pubs(&mut self, source: &str) -> Result<&mut Pubs, String> {
        let name = self.drone.clone().unwrap_or_else(|| source.to_string());
        Ok(match self.pubs.entry(name) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let p = declare(&self.session, v.key())?;
                v.insert(p)
            }
        })
    }

    fn stats_json(s: &Status, published: u64) -> String {
        let c = &s.counters;
        format!(
            "{{\"frames\":{},\"published\":{},\"lost\":{},\"tag_failures\":{},\"replays\":{},\"malformed\":{},\"handshakes\":{},\"rekeys\":{},\"key_epoch\":{},\"suite\":\"{}\",\"latency_ms\":{}}}",
            c.frames,
            published,
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
        let (img, info) = (ros::image(f, self.bayer), ros::frame_info(f, counters));
        let fleet = self.drone.is_none();
        let frames = self.frames.clone();
        let p = self.pubs(&f.source)?;
        p.image.put(img).wait().map_err(err)?;
        p.info.put(info).wait().map_err(err)?;
        if let Some(c) = &f.coded {
            p.coded.put(c.to_vec()).wait().map_err(err)?;
        }
        if let Some(s) = f.state.as_ref().filter(|s| s.record.is_valid()) {
            let stamp = f.stamp_ns();
            let frames = if fleet {
                ros::StateFrames {
                    body: format!("{}/{}", f.source, frames.body),
                    world: frames.world,
                }
            } else {
                frames
            };
            p.odometry
                .put(ros::odometry(stamp, &frames, s))
                .wait()
                .map_err(err)?;
            p.tf.put(ros::tf(stamp, &frames, s)).wait().map_err(err)?;
        }
        p.published += 1;
        self.published += 1;
        Ok(())
    }

    /// Every 0.5 s (each new metrics row) and at the end.
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if s.new_row {
            let p = self.pubs(&s.source)?;
            let j = Self::stats_json(s, p.published);
            p.stats.put(j).wait().map_err(err)?;
        }
        Ok(())
    }

    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        self.session.close().wait().map_err(err)?;
        Ok(Some(format!(
            "published {} frames on Zenoh under {}/ (image, frame_info, coded, odometry, tf, stats)",
            self.published, self.prefix
        )))
    }
}
