//! The drone's state record of a frame in SI units: what the outputs (ROS 2 `Odometry` and `tf`,
//! the metrics CSV, the viewer, Python) show. The record itself is `gapstream_protocol::state`.

use gapstream_protocol::state::{StateRecord, quat};

/// A frame's state in SI units (metres, m/s, m/s², rad/s; the quaternion `[x, y, z, w]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DroneState {
    /// The record as it came (authenticated with the frame).
    pub record: StateRecord,
    pub position_m: [f64; 3],
    /// World frame, as the flight controller estimates it.
    pub velocity_m_s: [f64; 3],
    pub accel_m_s2: [f64; 3],
    /// Unit quaternion `[x, y, z, w]` (the compressed one expanded as the reference does).
    pub orientation: [f64; 4],
    /// Body rates roll, pitch, yaw.
    pub rates_rad_s: [f64; 3],
}

/// Expands a compressed quaternion exactly as NanoCockpit's reference (`quatdecompress`, float32):
/// the three small components, then the largest as `√(1 − Σ squares)` summed from the last
/// component to the first.
pub fn decompress(comp: u32) -> [f32; 4] {
    let (largest, small) = quat::small_three(comp);
    let mut q = [0f32; 4];
    let mut k = 0;
    for (i, v) in q.iter_mut().enumerate() {
        if i != largest {
            *v = small[k];
            k += 1;
        }
    }
    let mut sum = 0f32;
    for i in (0..4).rev() {
        if i != largest {
            sum += q[i] * q[i];
        }
    }
    q[largest] = (1.0 - sum).max(0.0).sqrt();
    q
}

/// `v` (world frame) in the body frame of `q = [x, y, z, w]`: `q⁻¹ v q`.
pub fn world_to_body(q: [f64; 4], v: [f64; 3]) -> [f64; 3] {
    let [x, y, z, w] = q;
    // Rotation matrix of q, transposed.
    let r = [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - z * w),
            2.0 * (x * z + y * w),
        ],
        [
            2.0 * (x * y + z * w),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - x * w),
        ],
        [
            2.0 * (x * z - y * w),
            2.0 * (y * z + x * w),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ];
    [0, 1, 2].map(|j| r[0][j] * v[0] + r[1][j] * v[1] + r[2][j] * v[2])
}

impl DroneState {
    pub fn from_record(record: StateRecord) -> Self {
        let s = &record.sample;
        let si = |v: [i16; 3]| v.map(|x| x as f64 / 1000.0);
        DroneState {
            record,
            position_m: si(s.position_mm),
            velocity_m_s: si(s.velocity_mm_s),
            accel_m_s2: si(s.accel_mm_s2),
            orientation: decompress(s.quat).map(f64::from),
            rates_rad_s: si(s.rates_mrad_s),
        }
    }

    /// Yaw (rad) of the orientation.
    pub fn yaw(&self) -> f64 {
        let [x, y, z, w] = self.orientation;
        (2.0 * (w * z + x * y)).atan2(1.0 - 2.0 * (y * y + z * z))
    }

    /// The age of the sample at the end of the exposure, ms.
    pub fn age_ms(&self) -> Option<f64> {
        self.record.age_us().map(|a| a as f64 / 1000.0)
    }

    /// One line for a terminal: `pos (x, y, z) m, vel … m/s, yaw … deg, age … ms` (and what is
    /// wrong with it).
    pub fn line(&self) -> String {
        if !self.record.is_valid() {
            return "state: none from the flight controller yet".into();
        }
        let p = self.position_m;
        let v = self.velocity_m_s;
        format!(
            "state pos ({:+.3}, {:+.3}, {:+.3}) m  vel ({:+.3}, {:+.3}, {:+.3}) m/s  yaw {:+.1} deg  rates ({:+.2}, {:+.2}, {:+.2}) rad/s  age {}{}",
            p[0],
            p[1],
            p[2],
            v[0],
            v[1],
            v[2],
            self.yaw().to_degrees(),
            self.rates_rad_s[0],
            self.rates_rad_s[1],
            self.rates_rad_s[2],
            self.age_ms().map_or("?".into(), |a| format!("{a:.1} ms")),
            if self.record.is_stale() { " STALE" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapstream_protocol::state::{StateSample, VALID};

    #[test]
    fn decompress_inverts_compress() {
        for yaw in [-3.0f32, -1.0, 0.0, 0.5, 1.7, 3.1] {
            let q = [0.0, 0.0, (yaw / 2.0).sin(), (yaw / 2.0).cos()];
            let d = decompress(quat::compress(q));
            let sign = if d[3] * q[3] + d[2] * q[2] < 0.0 {
                -1.0
            } else {
                1.0
            };
            for i in 0..4 {
                assert!((d[i] - sign * q[i]).abs() < 2e-3, "{yaw}: {d:?} vs {q:?}");
            }
        }
        // The identity, exactly.
        assert_eq!(decompress(3 << 30), [0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn velocity_to_body_frame() {
        // Yawed 90° (x forward turned to world y): world +y is body +x.
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let b = world_to_body([0.0, 0.0, h, h], [0.0, 1.0, 0.0]);
        assert!((b[0] - 1.0).abs() < 1e-12 && b[1].abs() < 1e-12 && b[2].abs() < 1e-12);
    }

    #[test]
    fn si_units_and_line() {
        let r = StateRecord {
            flags: VALID,
            arrival_us: 1_000,
            exposure_end_us: 9_500,
            sample: StateSample {
                stm32_us: 5,
                position_mm: [1000, -250, 1200],
                velocity_mm_s: [0, 628, 0],
                accel_mm_s2: [-395, 0, 0],
                quat: 3 << 30,
                rates_mrad_s: [0, 0, 628],
            },
        };
        let s = DroneState::from_record(r);
        assert_eq!(s.position_m, [1.0, -0.25, 1.2]);
        assert_eq!(s.rates_rad_s[2], 0.628);
        assert_eq!(s.age_ms(), Some(8.5));
        assert!(
            s.line().contains("pos (+1.000, -0.250, +1.200) m"),
            "{}",
            s.line()
        );
        assert!(s.line().ends_with("age 8.5 ms"));
    }
}
