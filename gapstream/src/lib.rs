//! gapstream receiver and host simulation.
//!
//! | module | what |
//! |---|---|
//! | [`drone_state`] | a frame's state record in SI units (quaternion expanded, velocity in the body frame), its terminal line |
//! | [`flight`] | the simulated flight controller: a known trajectory (a circle with yaw) sent as NanoCockpit's `!STA` UART messages at 100 Hz |
//! | [`fec_rx`] | forward error correction over UDP, the receiver's side: the FEC request, `gapstream_fec`'s reassembler decoding with `reed-solomon-erasure`, loss reports |
//! | [`images`] | frame sources (synthetic pattern, PGM/PNG folder, raw file), PNG/PGM I/O, Bayer demosaicing |
//! | [`metrics`] | counters, latency percentiles, CPU / RSS / SoC temperature sampling, the 0.5 s metrics CSV |
//! | [`viewer`] | live web viewer on localhost (page, `/frame.png`, `/stats.json`) |
//! | [`report`] | `gapstream report`: PNG plots from a metrics CSV |
//! | [`codec`] | compress, then seal: the simulated drone's JPEG / JPEG-LS coder (`--codec`), the receiver's decoders of verified coded frames |
//! | [`sim`] | host simulation of the drone: std camera / SPI link / clock / entropy running `gapstream_drone::Drone` |
//! | [`receiver`] | connect to the bridge (TCP / UDP), run the session, publish verified frames on a bus whose consumers are the outputs, reconnect by itself |
//! | [`run`] | `demo`, `view`, `node`, `bench`: node + bridge + receiver + viewer wired together |
//! | [`ros`] | ROS 2 messages in CDR: `sensor_msgs/msg/Image` and gapstream's `FrameInfo`, with their ros2msg schemas |
//! | [`mcap_out`] | `--mcap FILE`: every verified frame as a ROS 2 Image + FrameInfo in an MCAP file (Foxglove's `mcap` crate) |
//! | `zenoh_out` | `--zenoh`: every verified frame published on Zenoh under `gapstream/<drone>/` (feature `zenoh`) |
//! | [`ground`] | `ground`: a swarm in one receiver: a fleet file, a receiver per drone on its own thread, one bus whose outputs keep their queues per drone |
//! | [`discovery`] | `ground --discover`: decks found by mDNS (`_cpx._tcp`, host `aideck-XXXXXX`, TXT `id` = MAC) |
//! | [`swarm`] | N simulated drones, each with its own bridge, keys and name burned into its pictures (`demo --drones N`, `swarm`, `bench-swarm`) |
//! | [`timesync`] | the drone's clock on the receiver's: capture times from the stream (one-way envelope for the drift, KEEPALIVE exchanges for the offset) |
//! | [`secret_file`] | key files and the key log, written owner-only (mode 0600, also over an existing file) |

/// One line of the run's output on stdout: banners, status lines, summaries, files written.
/// Diagnostics (errors, warnings, the receiver's notes) go to stderr with `eprintln!`. A closed
/// stdout (`gapstream view | head -3`) loses the line instead of ending the run with a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod codec;
pub mod discovery;
pub mod drone_state;
pub mod fec_rx;
pub mod flight;
pub mod ground;
pub mod images;
pub mod mcap_out;
pub mod metrics;
pub mod receiver;
pub mod report;
pub mod ros;
pub mod run;
pub mod secret_file;
pub mod sim;
pub mod swarm;
pub mod timesync;
pub mod viewer;
#[cfg(feature = "zenoh")]
pub mod zenoh_out;
